"""The argparse checks every command uses name the flag and the fix; JSON goes to stdout unstyled."""

from __future__ import annotations

import argparse
import json

import pytest

from onceflow.cli.console import number, print_json, seconds


def test_a_number_in_range_passes_and_one_outside_names_the_flag_and_the_fix():
    count = number("--count", minimum=1, what="the number of events")
    assert count("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match="Fix: pass --count N with N >= 1"):
        count("0")
    ratio = number("--ratio", float, below=1, what="the fraction")
    assert ratio("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match="'x' is not a number"):
        ratio("x")
    with pytest.raises(argparse.ArgumentTypeError, match="must be >= 0 and < 1"):
        ratio("1")


def test_seconds_are_more_than_zero():
    assert seconds("2.5") == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds(bad)


def test_json_is_printed_whole_to_stdout(capsys):
    print_json({"a": 1, "when": object.__name__})
    assert json.loads(capsys.readouterr().out) == {"a": 1, "when": "object"}
