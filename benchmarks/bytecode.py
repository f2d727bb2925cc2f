"""What a Python process of the platform pays to start when its venv holds no compiled bytecode.

    .venv/bin/python benchmarks/bytecode.py [--rounds 3] [--json F]

uv installs wheels without compiling them (pip compiles at install; uv only with
`--compile-bytecode`), and where PYTHONDONTWRITEBYTECODE=1 is set, as on this machine kind and
in many images, nothing writes a `.pyc` at run time either: every process then compiles every
module it imports from source. Each of the platform's processes imports one of these entries in a
fresh interpreter: an audit (Great Expectations), an Airflow task or DAG parse, the job's driver,
a Spark Python worker, the `onceflow` command.

Each entry runs in a fresh process, twice per round and alternating: once with the venv's
compiled bytecode, once as an uncompiled venv sees it (PYTHONPYCACHEPREFIX pointing at an empty
folder and PYTHONDONTWRITEBYTECODE=1: no `.pyc` is found, none is written). Figures: the process's
CPU seconds (user + system), medians over the rounds, and their ratio. Needs a venv installed with
compiled bytecode (`make venv` does it since 2026-11-30); it says so otherwise.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import emit

ENTRIES = {
    "audit checks (great_expectations)": "import great_expectations",
    "Airflow DAG parse / task (onceflow.airflow.dag_factory)": "import onceflow.airflow.dag_factory",
    "the job's driver (onceflow.spark.ingest)": "import onceflow.spark.ingest",
    "a Spark Python worker (pyspark.worker + the judge)": "import pyspark.worker, onceflow.schema.reference",
    "the onceflow command (onceflow.cli.app)": "import onceflow.cli.app",
}


def _cpu_of(code: str, env: dict) -> float:
    """CPU seconds of one fresh interpreter running `code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _compiled(module_file: str) -> bool:
    """Whether the venv holds the compiled bytecode of this module (what `make venv` now writes)."""
    path = Path(module_file)
    return any((path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    import great_expectations

    if not _compiled(great_expectations.__file__):
        sys.exit(
            "the venv holds no compiled bytecode. Fix: `make venv` (uv --compile-bytecode) or "
            f"`{sys.executable} -m compileall -q -j 0 <site-packages>` first."
        )
    with tempfile.TemporaryDirectory(prefix="onceflow-bench-nopyc-") as empty:
        variants = {
            "compiled": {**os.environ},
            "uncompiled": {**os.environ, "PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"},
        }
        cpu: dict[str, dict[str, list[float]]] = {e: {v: [] for v in variants} for e in ENTRIES}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for entry, code in ENTRIES.items():
                for name in order:
                    cpu[entry][name].append(_cpu_of(code, variants[name]))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
        assert not any(Path(empty).iterdir()), "the uncompiled runs wrote bytecode"
    figures: dict = {"rounds": args.rounds, "cpu_seconds_median": {}}
    for entry, runs in cpu.items():
        compiled, uncompiled = (statistics.median(runs[v]) for v in ("compiled", "uncompiled"))
        figures["cpu_seconds_median"][entry] = {
            "uncompiled": round(uncompiled, 2),
            "compiled": round(compiled, 2),
            "ratio": round(compiled / uncompiled, 2),
        }
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
