from . import accuracy_report, format_report
from .real_runs import format_real_runs

print(format_report(accuracy_report()))
print(format_real_runs())
