from . import accuracy_report, format_report

print(format_report(accuracy_report()))
