"""Inputs the CLI refuses, with the field and the fix, exit code 2 (the real `main`, no broker)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from onceflow.cli import main
from onceflow.errors import RangeError
from onceflow.ranges import offset_range


def run(capsys, *argv: str) -> tuple[int | str | None, str]:
    """main(argv) -> (exit code, stderr with rich's line wraps undone)."""
    code: int | str | None
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse refusals
        code = exc.code
    return code, " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["produce", "--count", "-5"],
            "argument --count: -5 is out of range: the number of events must be >= 1. Fix: pass --count N with N >= 1",
        ),
        (
            ["produce", "--count", "0"],
            "argument --count: 0 is out of range: the number of events must be >= 1. Fix: pass --count N with N >= 1",
        ),
        (
            ["produce", "--count", "ten"],
            "argument --count: 'ten' is not a whole number. Fix: pass --count N with N >= 1",
        ),
        (
            ["produce", "--rate", "-1"],
            "argument --rate: -1 is out of range: the rate in events/s must be >= 0. Fix: pass --rate N with N >= 0",
        ),
        (["produce", "--rate", "nan"], "argument --rate: nan is out of range"),
        (
            ["produce", "--abort-ratio", "1"],
            "argument --abort-ratio: 1 is out of range: the fraction must be >= 0 and "
            "< 1. Fix: pass --abort-ratio N with N >= 0 and < 1",
        ),
        (["produce", "--txn-size", "0"], "Fix: pass --txn-size N with N >= 1"),
        (["demo", "--count", "-1"], "Fix: pass --count N with N >= 1"),
        (["ingest", "--max-seconds", "-3"], "Fix: pass --max-seconds N with N >= 0"),
    ],
)
def test_out_of_range_arguments_are_refused_with_the_flag_and_the_fix(capsys, argv, message):
    code, err = run(capsys, *argv)
    assert code == 2
    assert message in err


@pytest.mark.parametrize(
    "start, end, message",
    [
        (
            '{"0": 50}',
            '{"0": 20}',
            "error: partition 0: start offset 50 is after end offset 20 (--start-offsets > "
            "--end-offsets). Fix: give each partition's first offset in --start-offsets and the "
            "offset after its last in --end-offsets, start <= end",
        ),
        (
            '{"0": 0, "1": 9}',
            '{"0": 5}',
            "error: --start-offsets has partitions [0, 1] but --end-offsets [0]. Fix: give the same partitions in both",
        ),
        ("{nope", '{"0": 5}', 'error: --start-offsets: \'{nope\' is not JSON. Fix: write e.g. {"0": 100, "1": 0}'),
    ],
)
def test_backfill_refuses_a_bad_range_before_anything_starts(capsys, start, end, message):
    code, err = run(capsys, "backfill", "--start-offsets", start, "--end-offsets", end)
    assert code == 2
    assert message in err


def test_the_cli_and_the_backfill_dag_share_one_range_check():
    from onceflow.airflow.backfill import RangeError as DagRangeError
    from onceflow.airflow.backfill import validate_range

    assert DagRangeError is RangeError
    with pytest.raises(RangeError) as cli:
        offset_range({"0": 50}, {"0": 20})
    with pytest.raises(RangeError) as dag:
        validate_range({"start_offsets": {"0": 50}, "end_offsets": {"0": 20}}, {0: (0, 100)})
    assert str(cli.value) == str(dag.value)
    assert offset_range('{"0": 1, "1": 2}', {"1": 2, "0": 3}) == ({0: 1, 1: 2}, {0: 3, 1: 2})


def test_the_cli_backfill_refusal_does_not_import_airflow():
    code = (
        "import sys\nfrom onceflow.cli import main\n"
        "rc = main(['backfill', '--start-offsets', '{\"0\": 9}', '--end-offsets', '{\"0\": 1}'])\n"
        "print(rc, 'airflow' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["2", "False"], proc.stderr
