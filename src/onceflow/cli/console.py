"""What every `onceflow` command prints with: the two consoles, the log line, JSON output,
and the argparse checks that name the flag and the fix. One public module, so command
modules import these names instead of each other's internals."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)  # progress, logs, errors
out = Console(highlight=False, soft_wrap=True)  # the command's result


def log(msg: str) -> None:
    """A progress line on stderr, prefixed so it reads apart from the result."""
    console.print(f"[dim]onceflow:[/dim] {msg}")


def quiet(msg: str) -> None:
    """A log that says nothing (commands printing JSON)."""


def print_json(data: dict) -> None:
    """`data` as indented JSON on stdout, unstyled, so scripts can read it."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_json_line(data: dict) -> None:
    """`data` as one line of JSON on stdout (JSON Lines: a report a line, for `--watch`)."""
    sys.stdout.write(json.dumps(data, default=str, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def number(flag: str, kind: type = int, minimum: float = 0, below: float | None = None, what: str = "the value"):
    """An argparse `type` that refuses values out of [minimum, below), naming the flag and the fix."""
    bound = f">= {minimum:g}" + (f" and < {below:g}" if below is not None else "")
    fix = f"Fix: pass {flag} N with N {bound}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}. {fix}"
            ) from None
        if not (minimum <= value < (below if below is not None else float("inf"))):  # NaN fails too
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {bound}. {fix}")
        return value

    return parse


def seconds(text: str) -> float:
    """An argparse `type`: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 seconds")
    return value
