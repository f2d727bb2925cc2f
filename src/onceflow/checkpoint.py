"""Reads Spark Structured Streaming checkpoints without a JVM.

A checkpoint is one of the four ledgers the audits compare, and the source of
each micro-batch's offset range for the sink ledger, so onceflow reads it itself
(plain files, no Spark) and reports every broken shape as a `Problem` instead of
a traceback. The layout, as Spark 4 writes it (HDFSMetadataLog, OffsetSeqLog,
CommitLog, KafkaSourceInitialOffsetWriter):

- `metadata`        `{"id": "<query uuid>"}`
- `offsets/N`       `v1`, the batch metadata JSON (`batchWatermarkMs`,
                    `batchTimestampMs`, `conf`), then one line per source: the
                    source's end offset JSON (Kafka: `{"topic": {"0": 42}}` = next
                    offset to read), or `-` when the source had none.
                    Written *before* batch N runs (a write-ahead log).
- `commits/N`       `v1` + `{"nextBatchWatermarkMs": 0}`, written only after the
                    sink succeeded for batch N.
- `sources/0/0`     a 0x00 byte, `v1`, then the Kafka source's initial offsets.

Files are written to a hidden temp file and renamed, so a finished file is
never partial; a crash can leave `.<name>.<uuid>.tmp` files behind. The local
file system also writes `.<name>.crc` checksums beside each file. Spark keeps
only the newest batches (spark.sql.streaming.minBatchesToRetain, 100 by
default) and deletes older ones, so a missing *old* prefix is normal.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.errors import CheckpointError

OFFSETS, COMMITS, SOURCES, METADATA = "offsets", "commits", "sources", "metadata"
SUPPORTED_VERSION = 1
_BATCH_FILE = re.compile(r"^\d+$")
_TMP_FILE = re.compile(r"^\..*\.tmp$|^.*\.tmp$")
_CRC_FILE = re.compile(r"^\.(.+)\.crc$")


# -- single files --------------------------------------------------------------
def _local(path: str | os.PathLike) -> Path:
    """A local path from a path or a file: URI; other schemes need a JVM."""
    text = os.fspath(path)
    if text.startswith("file:"):
        text = re.sub(r"^file:(//)?", "", text)
        if not text.startswith("/"):
            text = "/" + text
    elif "://" in text:
        raise CheckpointError(f"{text}: only local checkpoints (paths or file: URIs) can be read without a JVM. "
                              "Fix: copy the checkpoint to a local directory, or inspect it with Spark.")
    return Path(text)


def _version(line: str, path: Path) -> int:
    """`v1` -> 1; CheckpointError naming the file for anything else (Spark refuses it too)."""
    if not line.startswith("v") or not line[1:].isdigit():
        raise CheckpointError(f"{path}: first line is {line[:40]!r}, not a log version like 'v1' "
                              "(file is truncated or not written by Spark)")
    version = int(line[1:])
    if version > SUPPORTED_VERSION or version < 1:
        raise CheckpointError(f"{path}: log version v{version} is not supported (onceflow reads "
                              f"v{SUPPORTED_VERSION}, written by Spark 4.0). Fix: read it with the Spark "
                              "version that wrote it.")
    return version


def _partition_offsets(raw: object, path: Path, where: str) -> dict[str, dict[int, int]]:
    """Kafka offsets JSON {"topic": {"0": 42}} -> {"topic": {0: 42}}, checked."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: {where} is not a JSON object of topics (got {type(raw).__name__})")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise CheckpointError(f"{path}: {where}: topic {topic!r} does not map partitions to offsets")
        try:
            out[topic] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            raise CheckpointError(f"{path}: {where}: topic {topic!r} has a non-integer partition or "
                                  f"offset: {parts!r}") from None
    return out


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: file is missing") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text (corrupt file)") from None


def _json_line(line: str, path: Path, where: str) -> object:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise CheckpointError(f"{path}: {where} is not valid JSON ({exc.msg} at column {exc.colno}): "
                              f"{line[:80]!r}") from None


def read_offsets_file(path: str | os.PathLike) -> dict:
    """Parse one `offsets/N` file (a few hundred bytes; cheap enough for every micro-batch).

    Returns `{"version": 1, "metadata": {...}, "sources": [offsets | None, ...]}`, one
    `sources` item per streaming source in query order: for Kafka `{topic: {partition:
    next offset}}`, None where Spark wrote `-` (no offsets yet). CheckpointError names
    the file and what is wrong with it (missing, empty, truncated, bad JSON).
    """
    path = _local(path)
    text = _read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CheckpointError(f"{path}: offsets file is empty (a crash mid-write, or not written by Spark)")
    version = _version(lines[0], path)
    if len(lines) < 2:
        raise CheckpointError(f"{path}: offsets file ends after its version line: the batch metadata and "
                              "source offsets are missing (truncated)")
    metadata = _json_line(lines[1], path, "line 2 (batch metadata)")
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{path}: line 2 (batch metadata) is not a JSON object")
    if len(lines) < 3:
        raise CheckpointError(f"{path}: offsets file has no source offsets line (truncated)")
    sources: list[dict[str, dict[int, int]] | None] = []
    for i, line in enumerate(lines[2:], start=3):
        if line.strip() == "-":
            sources.append(None)
        else:
            sources.append(_partition_offsets(_json_line(line, path, f"line {i} (source offsets)"), path,
                                              f"line {i} (source offsets)"))
    return {"version": version, "metadata": metadata, "sources": sources}


def read_initial_offsets(path: str | os.PathLike) -> dict[str, dict[int, int]]:
    """Parse the Kafka source's `sources/<i>/0`: a 0x00 byte, `v1`, then `{topic: {p: offset}}`.

    The leading zero byte is Spark's (SPARK-19517); files from Spark 2.1.0 have no
    version line, which is accepted as Spark accepts it.
    """
    path = _local(path)
    text = _read_text(path)
    if text.startswith("\x00"):
        text = text[1:]
    if not text.strip():
        raise CheckpointError(f"{path}: initial offsets file is empty (truncated)")
    if text.startswith("v"):
        head, sep, body = text.partition("\n")
        _version(head, path)
        if not sep:
            raise CheckpointError(f"{path}: initial offsets file ends after its version line (truncated)")
    else:
        body = text
    return _partition_offsets(_json_line(body.strip(), path, "initial offsets"), path, "initial offsets")


def _topic_offsets(sources: list, topic: str) -> dict[int, int] | None:
    """The offsets of `topic` among a batch's source lines (None if no source has it)."""
    for source in sources:
        if source and topic in source:
            return dict(source[topic])
    return None


def batch_offset_range(checkpoint: str | os.PathLike, batch_id: int,
                       topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """The Kafka offset range [start, end) of micro-batch `batch_id`, per partition.

    Spark writes `offsets/N` before it runs batch N, so this works inside
    foreachBatch. `end` is `offsets/N`; `start` is `offsets/N-1`, or for the first
    batch of a checkpoint (no `offsets/N-1` and no older offsets file) the source's
    initial offsets in `sources/0/0`. A partition in `end` but not in `start` was
    added to the topic after the previous batch was planned: it starts at 0, where
    Spark starts new partitions (earliest). Partitions only in `start` are dropped
    (the batch read nothing from them). CheckpointError says which file is missing
    or unparseable and why.
    """
    if batch_id < 0:
        raise CheckpointError(f"batch id {batch_id} is negative; Spark batch ids start at 0")
    root = _local(checkpoint)
    end_path = root / OFFSETS / str(batch_id)
    end = _topic_offsets(read_offsets_file(end_path)["sources"], topic)
    if end is None:
        raise CheckpointError(f"{end_path}: no source offsets for topic {topic!r} (the checkpoint belongs to "
                              "another query or topic). Fix: check the pipeline's checkpoint path and topic.")
    prev_path = root / OFFSETS / str(batch_id - 1)
    if batch_id > 0 and prev_path.exists():
        start = _topic_offsets(read_offsets_file(prev_path)["sources"], topic)
        if start is None:
            raise CheckpointError(f"{prev_path}: no source offsets for topic {topic!r}, but batch {batch_id} "
                                  "has some: the two batches disagree on their sources")
    else:
        older = [b for b in _batch_ids(root / OFFSETS) if b < batch_id]
        if older:
            raise CheckpointError(f"{prev_path}: file is missing although older batches {older[-3:]} exist: "
                                  f"batch {batch_id}'s start offsets are unknown. Fix: inspect the checkpoint with "
                                  "`onceflow checkpoint show`; recover from the sink ledger if it is damaged.")
        init_path = root / SOURCES / "0" / "0"
        initial = read_initial_offsets(init_path)
        if topic not in initial:
            raise CheckpointError(f"{init_path}: no initial offsets for topic {topic!r} "
                                  f"(has {sorted(initial)})")
        start = initial[topic]
    return {p: start.get(p, 0) for p in sorted(end)}, dict(sorted(end.items()))


def _batch_ids(folder: Path) -> list[int]:
    """Sorted batch ids of the finished files in a log directory (temp/crc files excluded)."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if _BATCH_FILE.match(n))
