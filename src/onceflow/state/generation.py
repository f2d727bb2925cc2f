"""Which writer generation a checkpoint belongs to, and where a fresh one starts.

Delta skips any txnVersion it has already seen for an app id, and a fresh
checkpoint restarts batch ids at 0: writing again under the old app id would
be silently ignored — data loss without a sound. So every checkpoint records
its generation in `<checkpoint>/_onceflow.json`, each generation writes under
its own app id, and a job refuses to start on a checkpoint it cannot place.
Recovery (onceflow recover) writes this file, with exact starting offsets, when
it starts a new generation from the sink ledgers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from onceflow import offsets
from onceflow.errors import IdentityFileError
from onceflow.state.status import now_iso
from onceflow.storage.files import StorePath

IDENTITY_FILE = "_onceflow.json"


@dataclass
class CheckpointIdentity:
    pipeline: str
    generation: int
    created: str
    starting_offsets: str | None = None  # Kafka startingOffsets JSON for a fresh checkpoint
    reason: str = "new pipeline"
    # sink -> {partition: offset}: a new generation starts at the lowest committed
    # point of all sinks; a sink that had got further skips the rows it already holds
    sink_floors: dict[str, dict[str, int]] | None = None

    def floor(self, sink: str) -> dict[int, int]:
        return offsets.from_json((self.sink_floors or {}).get(sink))


def has_spark_state(checkpoint: str) -> bool:
    """True once Spark has written anything that decides where a restart begins."""
    root = StorePath(checkpoint)
    if (root / "metadata").exists():
        return True
    try:
        return any(name.isdigit() for name in (root / "offsets").names())
    except FileNotFoundError:
        return False


def read_identity(checkpoint: str) -> CheckpointIdentity | None:
    path = StorePath(checkpoint) / IDENTITY_FILE
    try:
        body = json.loads(path.read_bytes())
        return CheckpointIdentity(**body)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise IdentityFileError(path, str(exc)) from None


def write_identity(checkpoint: str, identity: CheckpointIdentity) -> None:
    (StorePath(checkpoint) / IDENTITY_FILE).write_text(json.dumps(asdict(identity), indent=2))


def new_identity(
    pipeline: str,
    generation: int,
    starting_offsets: str | None,
    reason: str,
    sink_floors: dict[str, dict[str, int]] | None = None,
) -> CheckpointIdentity:
    return CheckpointIdentity(
        pipeline=pipeline,
        generation=generation,
        created=now_iso(),
        starting_offsets=starting_offsets,
        reason=reason,
        sink_floors=sink_floors,
    )
