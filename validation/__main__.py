"""`python -m validation` prints the accuracy report and the real-run check; `--write` also stores the report for the
How page (ui/data/accuracy_report.json)."""

import sys

from . import STORED_REPORT, accuracy_report, format_report, write_stored_report
from .real_runs import format_real_runs

if "--write" in sys.argv[1:]:
    write_stored_report()
    print(f"wrote {STORED_REPORT.relative_to(STORED_REPORT.parents[2])}", file=sys.stderr)
print(format_report(accuracy_report()))
print(format_real_runs())
