"""Reads Spark Structured Streaming checkpoints without a JVM, on disk or in an object store.

A checkpoint is one of the pipeline's facts the audits compare (onceflow.facts), and the source of
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

from onceflow.errors import CheckpointError, CheckpointFileError
from onceflow.offsets import as_json, from_json
from onceflow.storage.files import StorePath

OFFSETS, COMMITS, SOURCES, METADATA = "offsets", "commits", "sources", "metadata"
SUPPORTED_VERSION = 1
_BATCH_FILE = re.compile(r"^\d+$")
_TMP_FILE = re.compile(r"^\..*\.tmp$|^.*\.tmp$")
_CRC_FILE = re.compile(r"^\.(.+)\.crc$")


# -- single files --------------------------------------------------------------
def _local(path: str | os.PathLike) -> StorePath:
    """The checkpoint file or folder: a local path, a file: URI, or an object-store URI (s3://, s3a://)
    read through pyarrow (onceflow.storage.files), never a JVM."""
    return path if isinstance(path, StorePath) else StorePath(path)


def _version(line: str, path: StorePath) -> int:
    """`v1` -> 1; CheckpointError naming the file for anything else (Spark refuses it too)."""
    if not line.startswith("v") or not line[1:].isdigit():
        raise CheckpointFileError(
            path,
            f"first line is {line[:40]!r}, not a log version like 'v1' (file is truncated or not written by Spark)",
        )
    version = int(line[1:])
    if version > SUPPORTED_VERSION or version < 1:
        raise CheckpointFileError(
            path,
            f"log version v{version} is not supported (onceflow reads "
            f"v{SUPPORTED_VERSION}, written by Spark 4.0). Fix: read it with the Spark "
            "version that wrote it.",
        )
    return version


def _partition_offsets(raw: object, path: StorePath, where: str) -> dict[str, dict[int, int]]:
    """Kafka offsets JSON {"topic": {"0": 42}} -> {"topic": {0: 42}}, checked."""
    if not isinstance(raw, dict):
        raise CheckpointFileError(path, f"{where} is not a JSON object of topics (got {type(raw).__name__})")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise CheckpointFileError(path, f"{where}: topic {topic!r} does not map partitions to offsets")
        try:
            out[topic] = from_json(parts)
        except (TypeError, ValueError):
            raise CheckpointFileError(
                path, f"{where}: topic {topic!r} has a non-integer partition or offset: {parts!r}"
            ) from None
    return out


def _read_text(path: StorePath) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointFileError(path, "file is missing") from None
    except OSError as exc:
        raise CheckpointFileError(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointFileError(path, "not UTF-8 text (corrupt file)") from None


def _json_line(line: str, path: StorePath, where: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise CheckpointFileError(
            path, f"{where} is not valid JSON ({exc.msg} at column {exc.colno}): {line[:80]!r}"
        ) from None


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
        raise CheckpointFileError(path, "offsets file is empty (a crash mid-write, or not written by Spark)")
    version = _version(lines[0], path)
    if len(lines) < 2:
        raise CheckpointFileError(
            path,
            "offsets file ends after its version line: the batch metadata and source offsets are missing (truncated)",
        )
    metadata = _json_line(lines[1], path, "line 2 (batch metadata)")
    if not isinstance(metadata, dict):
        raise CheckpointFileError(path, "line 2 (batch metadata) is not a JSON object")
    if len(lines) < 3:
        raise CheckpointFileError(path, "offsets file has no source offsets line (truncated)")
    sources: list[dict[str, dict[int, int]] | None] = []
    for i, line in enumerate(lines[2:], start=3):
        if line.strip() == "-":
            sources.append(None)
        else:
            sources.append(
                _partition_offsets(
                    _json_line(line, path, f"line {i} (source offsets)"), path, f"line {i} (source offsets)"
                )
            )
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
        raise CheckpointFileError(path, "initial offsets file is empty (truncated)")
    if text.startswith("v"):
        head, sep, body = text.partition("\n")
        _version(head, path)
        if not sep:
            raise CheckpointFileError(path, "initial offsets file ends after its version line (truncated)")
    else:
        body = text
    return _partition_offsets(_json_line(body.strip(), path, "initial offsets"), path, "initial offsets")


def _topic_offsets(sources: list, topic: str) -> dict[int, int] | None:
    """The offsets of `topic` among a batch's source lines (None if no source has it)."""
    for source in sources:
        if source and topic in source:
            return dict(source[topic])
    return None


def batch_offset_range(
    checkpoint: str | os.PathLike, batch_id: int, topic: str
) -> tuple[dict[int, int], dict[int, int]]:
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
        raise CheckpointFileError(
            end_path,
            f"no source offsets for topic {topic!r} (the checkpoint belongs to "
            "another query or topic). Fix: check the pipeline's checkpoint path and topic.",
        )
    prev_path = root / OFFSETS / str(batch_id - 1)
    if batch_id > 0 and prev_path.exists():
        start = _topic_offsets(read_offsets_file(prev_path)["sources"], topic)
        if start is None:
            raise CheckpointFileError(
                prev_path,
                f"no source offsets for topic {topic!r}, but batch {batch_id} "
                "has some: the two batches disagree on their sources",
            )
    else:
        older = [b for b in _batch_ids(root / OFFSETS) if b < batch_id]
        if older:
            raise CheckpointFileError(
                prev_path,
                f"file is missing although older batches {older[-3:]} exist: "
                f"batch {batch_id}'s start offsets are unknown. Fix: inspect the checkpoint with "
                "`onceflow checkpoint show`; recover from the sink ledger if it is damaged.",
            )
        init_path = root / SOURCES / "0" / "0"
        initial = read_initial_offsets(init_path)
        if topic not in initial:
            raise CheckpointFileError(init_path, f"no initial offsets for topic {topic!r} (has {sorted(initial)})")
        start = initial[topic]
    return {p: start.get(p, 0) for p in sorted(end)}, dict(sorted(end.items()))


def _batch_ids(folder: StorePath) -> list[int]:
    """Sorted batch ids of the finished files in a log directory (temp/crc files excluded)."""
    try:
        names = folder.names()
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if _BATCH_FILE.match(n))


# -- the whole directory -------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """Something wrong with one file or directory of a checkpoint."""

    path: str
    reason: str

    def as_dict(self) -> dict:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class BatchOffsets:
    """One parsed `offsets/N`: the end offsets Spark planned for batch N."""

    batch_id: int
    metadata: dict
    sources: tuple[dict[str, dict[int, int]] | None, ...]

    @property
    def timestamp_ms(self) -> int | None:
        """When Spark planned the batch (batchTimestampMs)."""
        value = self.metadata.get("batchTimestampMs")
        return int(value) if isinstance(value, (int, float)) else None

    @property
    def topics(self) -> list[str]:
        return sorted({t for s in self.sources if s for t in s})

    def offsets(self, topic: str) -> dict[int, int] | None:
        """{partition: next offset} of `topic` after this batch (None if no source reads it)."""
        return _topic_offsets(list(self.sources), topic)


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint directory holds, and whether Spark could restart from it.

    `usable` follows Spark's restart (MicroBatchExecution.populateStartOffsets): it
    reads `metadata`, the newest `offsets/N`, `offsets/N-1` when N > 0, and the
    newest `commits/M`. Damage to those makes a restart fail or lose batches, so the
    checkpoint is unusable (`unusable_reasons` says why); other damage is listed in
    `problems` only (history an audit or `batch_offset_range` may still trip over).
    """

    path: str
    exists: bool
    query_id: str | None = None
    initial_offsets: dict[str, dict[int, int]] | None = None
    batches: dict[int, BatchOffsets] = field(default_factory=dict)
    commits: tuple[int, ...] = ()
    offsets_files: tuple[int, ...] = ()
    commit_files: tuple[int, ...] = ()
    problems: tuple[Problem, ...] = ()
    unusable_reasons: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """No query has planned a batch here yet (a missing or empty directory)."""
        return not self.offsets_files and not self.commit_files and self.query_id is None

    @property
    def usable(self) -> bool:
        return self.exists and not self.unusable_reasons

    @property
    def last_committed(self) -> int | None:
        """The newest batch whose sink write finished (commits/N), or None."""
        return self.commits[-1] if self.commits else None

    @property
    def latest_planned(self) -> int | None:
        """The newest batch with an offsets file, committed or not."""
        return self.offsets_files[-1] if self.offsets_files else None

    @property
    def uncommitted(self) -> int | None:
        """The planned batch without a commit, which Spark re-runs with the same offsets on restart."""
        latest = self.latest_planned
        if latest is None or latest in self.commit_files:
            return None
        return latest

    @property
    def retained(self) -> tuple[int, int] | None:
        """(oldest, newest) batch id still on disk: Spark deletes older ones."""
        return (self.offsets_files[0], self.offsets_files[-1]) if self.offsets_files else None

    @property
    def topics(self) -> list[str]:
        found = {t for b in self.batches.values() for t in b.topics}
        return sorted(found | set(self.initial_offsets or {}))

    def committed_offsets(self, topic: str) -> dict[int, int]:
        """{partition: next offset} after the last committed batch; {} if nothing is committed.

        Everything below these offsets is in the sink. CheckpointError if the last
        committed batch's offsets file is missing or unreadable.
        """
        last = self.last_committed
        if last is None:
            return {}
        batch = self.batches.get(last)
        if batch is None:
            raise CheckpointFileError(
                _local(self.path) / OFFSETS / str(last),
                f"the offsets of the last committed batch {last} are missing or unreadable",
            )
        return dict(sorted((batch.offsets(topic) or {}).items()))

    def position(self, topic: str) -> dict[int, int]:
        """Where the query stands in `topic`: committed offsets, else its initial offsets, else {}."""
        if self.last_committed is not None:
            return self.committed_offsets(topic)
        return dict(sorted(((self.initial_offsets or {}).get(topic) or {}).items()))

    def as_dict(self) -> dict:
        """JSON-ready summary (offset maps keyed by partition strings)."""

        latest = self.batches.get(self.latest_planned) if self.latest_planned is not None else None
        last = self.batches.get(self.last_committed) if self.last_committed is not None else None
        return {
            "path": self.path,
            "exists": self.exists,
            "empty": self.empty,
            "usable": self.usable,
            "unusable_reasons": list(self.unusable_reasons),
            "query_id": self.query_id,
            "last_committed": self.last_committed,
            "latest_planned": self.latest_planned,
            "uncommitted": self.uncommitted,
            "retained": list(self.retained) if self.retained else None,
            "offsets_files": len(self.offsets_files),
            "commit_files": len(self.commit_files),
            "topics": self.topics,
            "initial_offsets": {t: as_json(o) for t, o in (self.initial_offsets or {}).items()},
            "committed_offsets": {t: as_json(last.offsets(t)) for t in last.topics} if last else {},
            "latest_offsets": {t: as_json(latest.offsets(t)) for t in latest.topics} if latest else {},
            "last_committed_time_ms": last.timestamp_ms if last else None,
            "problems": [p.as_dict() for p in self.problems],
        }


def _read_commit_file(path: StorePath) -> dict:
    """`commits/N`: `v1` then `{"nextBatchWatermarkMs": ...}`."""
    text = _read_text(path)
    lines = [ln for ln in text.split("\n") if ln != ""]
    if not lines:
        raise CheckpointFileError(path, "commit file is empty (a crash mid-write, or not written by Spark)")
    _version(lines[0], path)
    if len(lines) < 2:
        raise CheckpointFileError(path, "commit file ends after its version line (truncated)")
    body = _json_line(lines[1], path, "line 2 (commit metadata)")
    if not isinstance(body, dict):
        raise CheckpointFileError(path, "line 2 (commit metadata) is not a JSON object")
    return body


def _read_metadata(path: StorePath) -> str:
    body = _json_line(_read_text(path).strip(), path, "query metadata")
    if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not body["id"]:
        raise CheckpointFileError(path, 'query metadata has no "id" (expected {"id": "<query uuid>"})')
    return body["id"]


def _leftovers(folder: StorePath) -> list[Problem]:
    """Temp files from a crash mid-write, and checksums whose file is gone."""
    out: list[Problem] = []
    try:
        names = set(folder.names())
    except (FileNotFoundError, NotADirectoryError):
        return out
    for name in sorted(names):
        if name.endswith(".tmp"):
            out.append(
                Problem(
                    str(folder / name),
                    "leftover temp file from an interrupted write "
                    "(Spark ignores it; safe to delete when the query is stopped)",
                )
            )
            continue
        crc = _CRC_FILE.match(name)
        if crc and crc.group(1) not in names and not crc.group(1).endswith(".tmp"):
            out.append(
                Problem(
                    str(folder / name),
                    f"checksum without its file {crc.group(1)!r} (leftover of a deleted or interrupted write)",
                )
            )
    return out


def _gaps(ids: tuple[int, ...]) -> list[int]:
    """Batch ids missing between the oldest and newest retained (old deletions are normal)."""
    if not ids:
        return []
    present = set(ids)
    return [b for b in range(ids[0], ids[-1] + 1) if b not in present]


def _spans(ids: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9' (a gap of thousands stays one line)."""
    parts, start = [], None
    for i, b in enumerate(ids):
        if start is None:
            start = b
        if i + 1 == len(ids) or ids[i + 1] != b + 1:
            parts.append(str(start) if start == b else f"{start}-{b}")
            start = None
    return ", ".join(parts)


def read_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read a whole checkpoint directory, local or in an object store; never raises for damage,
    only reports it."""
    root = _local(path)
    if not root.exists():
        return Checkpoint(path=str(root), exists=False, unusable_reasons=("the checkpoint directory does not exist",))
    if not root.is_dir():
        return Checkpoint(
            path=str(root),
            exists=False,
            unusable_reasons=(f"{root} is a file, not a checkpoint directory",),
            problems=(Problem(str(root), "not a directory"),),
        )
    problems: list[Problem] = []
    fatal: list[str] = []

    offsets_files = tuple(_batch_ids(root / OFFSETS))
    commit_files = tuple(_batch_ids(root / COMMITS))
    batches: dict[int, BatchOffsets] = {}
    bad_offsets: dict[int, str] = {}
    for b in offsets_files:
        try:
            parsed = read_offsets_file(root / OFFSETS / str(b))
            batches[b] = BatchOffsets(b, parsed["metadata"], tuple(parsed["sources"]))
        except CheckpointFileError as exc:
            bad_offsets[b] = exc.reason
            problems.append(Problem(str(root / OFFSETS / str(b)), exc.reason))
    commits: list[int] = []
    bad_commits: dict[int, str] = {}
    for b in commit_files:
        try:
            _read_commit_file(root / COMMITS / str(b))
            commits.append(b)
        except CheckpointFileError as exc:
            bad_commits[b] = exc.reason
            problems.append(Problem(str(root / COMMITS / str(b)), exc.reason))

    # metadata: written first when a query starts; without it the directory is not a whole checkpoint
    query_id = None
    meta = root / METADATA
    if meta.exists():
        try:
            query_id = _read_metadata(meta)
        except CheckpointFileError as exc:
            problems.append(Problem(str(meta), exc.reason))
            fatal.append(f"metadata is unreadable: {exc.reason}")
    elif offsets_files or commit_files:
        problems.append(Problem(str(meta), "file is missing: the query id is lost"))
        fatal.append(
            "metadata is missing although batches exist: the directory is not a whole checkpoint "
            "(Spark would silently start a new query id on it)"
        )

    # sources/0/0: the initial offsets, needed for batch 0's start and for a query that has not planned yet
    initial = None
    init_path = root / SOURCES / "0" / "0"
    if init_path.exists():
        try:
            initial = read_initial_offsets(init_path)
        except CheckpointFileError as exc:
            problems.append(Problem(str(init_path), exc.reason))
            if not offsets_files:
                fatal.append(f"the initial offsets are unreadable and no batch was planned yet: {exc.reason}")
    elif offsets_files and offsets_files[0] == 0:
        problems.append(Problem(str(init_path), "file is missing: batch 0's start offsets are unknown"))

    # the files a restart reads
    if offsets_files:
        latest = offsets_files[-1]
        if latest in bad_offsets:
            fatal.append(
                f"the newest offsets file offsets/{latest} is unreadable, and a restart reads it: {bad_offsets[latest]}"
            )
        if latest > 0 and (latest - 1) not in batches:
            state = "unreadable" if (latest - 1) in bad_offsets else "missing"
            fatal.append(
                f"offsets/{latest - 1} is {state}, and a restart at batch {latest} needs it "
                f"(Spark fails with 'batch {latest - 1} doesn't exist')"
            )
    if commit_files:
        newest_commit = commit_files[-1]
        if newest_commit in bad_commits:
            fatal.append(
                f"the newest commit file commits/{newest_commit} is unreadable, and a restart reads it: "
                f"{bad_commits[newest_commit]}"
            )
        newest_offsets = offsets_files[-1] if offsets_files else None
        if newest_offsets is None or newest_commit > newest_offsets:
            fatal.append(
                f"commits are ahead of offsets: commits/{newest_commit} exists but the newest offsets "
                f"file is {'none' if newest_offsets is None else f'offsets/{newest_offsets}'} (a commit without its "
                "planned offsets: files were deleted or copied from another query)"
            )
        elif newest_commit < latest - 1:
            fatal.append(
                f"commits trail offsets by more than one batch: newest commit {newest_commit}, newest "
                f"offsets {latest}; Spark would re-run only batch {latest} and never write batches "
                f"{_spans(list(range(newest_commit + 1, latest)))}"
            )
    elif offsets_files and offsets_files[-1] > offsets_files[0]:
        fatal.append(
            f"no commit file exists although batches {offsets_files[0]}-{offsets_files[-1]} were planned; "
            "Spark would re-run only the newest one and never write the others"
        )

    # history: gaps and commits without offsets (not read by a restart, but audits and ranges need them)
    for name, ids in ((OFFSETS, offsets_files), (COMMITS, commit_files)):
        gaps = _gaps(ids)
        if gaps:
            problems.append(
                Problem(
                    str(root / name),
                    f"gap: batch files {_spans(gaps)} are missing between "
                    f"{ids[0]} and {ids[-1]} (Spark only deletes the oldest)",
                )
            )
    oldest = offsets_files[0] if offsets_files else 0
    orphans = [b for b in commit_files if b >= oldest and b not in set(offsets_files)]
    if orphans:
        problems.append(Problem(str(root / COMMITS), f"commits without an offsets file: {_spans(orphans)}"))

    for folder in (root, root / OFFSETS, root / COMMITS, root / SOURCES / "0"):
        problems.extend(_leftovers(folder))

    return Checkpoint(
        path=str(root),
        exists=True,
        query_id=query_id,
        initial_offsets=initial,
        batches=batches,
        commits=tuple(commits),
        offsets_files=offsets_files,
        commit_files=commit_files,
        problems=tuple(problems),
        unusable_reasons=tuple(fatal),
    )
