"""Seconds per test module, summed over its tests, from the JUnit XML `make test` writes
(test-artifacts/junit.xml): `python -m devkit.suite_times [FILE ...]`.

With two files it prints them side by side with the ratio, to compare two runs module by module
(docs/testing.md: a single run's total varies with the machine by 15-25%, so quote ratios). A
module's seconds are its tests' set-up, call and tear-down as pytest timed them in its worker; the
wall time of the run is about half their sum (two workers, a module at a time each).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

DEFAULT = Path("test-artifacts/junit.xml")


def module_seconds(path: Path) -> dict[str, float]:
    """module path → seconds summed over its test cases."""
    out: defaultdict[str, float] = defaultdict(float)
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "?").replace(".", "/") + ".py"
        out[module] += float(case.get("time") or 0)
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, default=[DEFAULT])
    ap.add_argument("--top", type=int, default=30, help="modules to print, slowest first (default 30)")
    args = ap.parse_args(argv)
    if not 1 <= len(args.files) <= 2:
        ap.error("one file, or two to compare")
    runs = [module_seconds(f) for f in args.files]
    first = runs[0]
    rows = sorted(first, key=lambda m: -first[m])[: args.top]
    if len(runs) == 1:
        for m in rows:
            print(f"{first[m]:8.1f}  {m}")
        print(f"{sum(first.values()):8.1f}  all {len(first)} modules")
        return 0
    second = runs[1]
    for m in rows:  # a module renamed or removed since the first run: "-" in the second
        ratio = f"{second[m] / first[m]:5.2f}" if first[m] and m in second else "   - "
        shown = f"{second[m]:8.1f}" if m in second else "       -"
        print(f"{first[m]:8.1f} {shown} {ratio}  {m}")
    a, b = sum(first.values()), sum(second.values())
    print(f"{a:8.1f} {b:8.1f} {b / a:5.2f}  all modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
