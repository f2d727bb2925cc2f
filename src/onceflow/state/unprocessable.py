"""Offset ranges an operator moved to quarantine by hand, because the job cannot process them.

A batch that fails every run the same way (an engine bug we have not met: a record that
crashes a Spark expression) would stop the stream for good: each restart re-runs the same
offsets. `onceflow quarantine` records the offsets here, in the pipeline's state directory,
with who decided and why. From then on the job writes the records of those ranges to
quarantine with reason `unprocessable` and their raw bytes, without evaluating anything on
them, and the rest of the batch as usual; the audit's judge expects exactly that reason for
them. The file only grows: a range once declared stays declared, so a replay, a recovery and
an audit all read the same decision (docs/runbooks/poison-batch.md).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from onceflow import offsets
from onceflow.errors import ConfigError
from onceflow.state.status import now_iso

FILE = "unprocessable.json"


@dataclass(frozen=True)
class Declared:
    """One decision: the topic's [start, end) offsets per partition, moved to quarantine."""

    topic: str
    ranges: dict[int, tuple[int, int]]
    note: str = ""
    batch_id: int | None = None
    generation: int | None = None
    by: str = ""
    at: str = ""

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ranges"] = offsets.ranges_as_json(self.ranges)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Declared:
        ranges = offsets.ranges_from_json(d["ranges"])
        return cls(
            d["topic"],
            ranges,
            d.get("note", ""),
            d.get("batch_id"),
            d.get("generation"),
            d.get("by", ""),
            d.get("at", ""),
        )


@dataclass
class Unprocessable:
    """Every range declared for one pipeline."""

    path: Path
    declared: list[Declared] = field(default_factory=list)

    @classmethod
    def load(cls, state_path: str | Path) -> Unprocessable:
        path = Path(state_path) / FILE
        try:
            items = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(path)
        except ValueError as exc:
            raise ConfigError(
                f"{path} is not valid JSON ({exc}); it lists the offsets moved to quarantine by hand. "
                "Fix: restore it from its history, or repair it (docs/runbooks/poison-batch.md)"
            ) from None
        return cls(path, [Declared.from_dict(d) for d in items])

    def ranges(self, topic: str) -> dict[int, list[tuple[int, int]]]:
        """Per partition, the declared [start, end) ranges of the topic."""
        out: dict[int, list[tuple[int, int]]] = {}
        for d in self.declared:
            if d.topic == topic:
                for p, r in d.ranges.items():
                    out.setdefault(p, []).append(r)
        return out

    def covers(self, topic: str, partition: int, start: int, end: int) -> bool:
        """Whether every offset of [start, end) is declared."""
        for a, b in sorted(self.ranges(topic).get(partition, [])):
            if a <= start < b:
                start = b
            if start >= end:
                return True
        return start >= end

    def add(self, declared: Declared) -> Declared:
        """Record a decision (atomically: a reader sees the old list or the new one)."""
        for p, (a, b) in declared.ranges.items():
            if not 0 <= a < b:
                raise ConfigError(f"partition {p}: [{a}, {b}) is not a range of offsets; write start < end")
        stamped = Declared(
            declared.topic,
            dict(declared.ranges),
            declared.note,
            declared.batch_id,
            declared.generation,
            declared.by or f"{getpass.getuser()}@{socket.gethostname()}",
            declared.at or now_iso(),
        )
        self.declared.append(stamped)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([d.as_dict() for d in self.declared], indent=2) + "\n")
        os.replace(tmp, self.path)
        return stamped
