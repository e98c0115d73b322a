"""Behaviour kept: the CLI's text and JSON for the golden cases (tests/golden/generate.py) are byte-identical to
the stored file. A deliberate change regenerates it (`python -m tests.golden.generate`) and says why in its commit."""

import json

from tests.golden.generate import GOLDEN, cases, run


def test_golden_file_has_at_least_500_estimates():
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    assert len(rows) >= 500
    assert sum(1 for r in rows if r["rc"] == 0) >= 500


def test_cli_output_matches_golden_file():
    old = {json.dumps(r["argv"]): r for r in map(json.loads, GOLDEN.read_text().splitlines())}
    new = [run(a) for a in cases()]
    assert [json.dumps(r["argv"]) for r in new] == list(old)  # the same cases, in order
    differ = [" ".join(r["argv"]) for r in new if old[json.dumps(r["argv"])] != r]
    assert not differ, f"{len(differ)} of {len(new)} cases differ, first: {differ[:5]}"
