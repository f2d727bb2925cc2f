"""Where a row check broke, as the report and the CLI say it (the ranges themselves are Spark's:
tests/integration/test_audit.py)."""

from __future__ import annotations

from onceflow.audit.offending import ranges_text


def test_the_first_twenty_ranges_are_named_and_the_rest_counted():
    ranges = [{"partition": p % 2, "start": 10 * p, "end": 10 * p + 3, "count": 3} for p in range(25)]
    text = ranges_text("lost", ranges, 25)
    assert text.startswith("lost: partition 0 [0, 3) (3), partition 1 [10, 13) (3)")
    assert text.count("partition") == 20 and text.endswith(" … and 5 more ranges")
    assert ranges_text("lost", [], 0) == ""
