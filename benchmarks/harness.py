"""What the benchmarks here do alike: find the jars and the project, run a scratch
broker of their own, and print (and keep, with --json) their figures.

A benchmark run as `python benchmarks/<name>.py` has this folder on its path, so
`from harness import emit, scratch_broker` works from any of them.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("ONCEFLOW_JARS", str(ROOT / ".onceflow" / "jars"))
os.environ.setdefault("ONCEFLOW_PROJECT", str(ROOT))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@contextmanager
def scratch_broker(prefix: str, timeout: float = 120) -> Iterator[tuple[Path, object]]:
    """A fresh temp folder (its `home` is ONCEFLOW_HOME) and a KRaft broker of its own
    in it, stopped at the end; yields (folder, broker)."""
    from onceflow.kafka.broker import LocalBroker
    from onceflow.kafka.broker import free_port_pair

    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["ONCEFLOW_HOME"] = str(work / "home")
    broker = LocalBroker(home=work, port=free_port_pair())
    broker.start(timeout=timeout)
    try:
        yield work, broker
    finally:
        broker.stop()


def emit(figures: dict, path: str | Path | None) -> None:
    """Print the figures as JSON, and write them to `path` too when given."""
    text = json.dumps(figures, indent=2)
    print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
