"""The checkpoint reader on synthetic checkpoint directories shaped like Spark 4's.

Each broken shape a crash or a careless hand can leave is built file by file and
must come back as a Problem (or a CheckpointError naming the file), never a
traceback. The real-Spark counterpart is tests/integration/test_checkpoint_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onceflow.checkpoint import batch_offset_range, read_initial_offsets, read_offsets_file
from onceflow.errors import CheckpointError

TOPIC = "payments"
QUERY_ID = "5a3a8e3e-1111-4222-8333-444455556666"


def offsets_text(offsets: dict[int, int] | None, topic: str = TOPIC, ts: int = 1_700_000_000_000) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": ts, "conf": {"spark.sql.shuffle.partitions": "2"}}
    line = "-" if offsets is None else json.dumps({topic: {str(p): o for p, o in offsets.items()}})
    return "v1\n" + json.dumps(meta) + "\n" + line


def write_checkpoint(
    root: Path,
    initial: dict[int, int] | None,
    batches: dict[int, dict[int, int]],
    commits: list[int],
    query_id: str | None = QUERY_ID,
    crc: bool = True,
) -> Path:
    """A checkpoint as Spark 4 writes it (with the local file system's .crc files)."""
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(parents=True, exist_ok=True)
    if query_id is not None:
        (root / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    if initial is not None:
        (root / "sources" / "0").mkdir(parents=True, exist_ok=True)
        (root / "sources" / "0" / "0").write_bytes(
            b"\x00v1\n" + json.dumps({TOPIC: {str(p): o for p, o in initial.items()}}).encode()
        )
    for n, offs in batches.items():
        (root / "offsets" / str(n)).write_text(offsets_text(offs, ts=1_700_000_000_000 + n * 1000))
        if crc:
            (root / "offsets" / f".{n}.crc").write_bytes(b"crc")
    for n in commits:
        (root / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        if crc:
            (root / "commits" / f".{n}.crc").write_bytes(b"crc")
    return root


@pytest.fixture
def ckpt(tmp_path) -> Path:
    """Three committed batches over partitions 0 and 1, starting at offsets 0 and 5."""
    return write_checkpoint(
        tmp_path / "ck", {0: 0, 1: 5}, {0: {0: 10, 1: 15}, 1: {0: 20, 1: 25}, 2: {0: 30, 1: 35}}, [0, 1, 2]
    )


# -- step 1: the offset range of one batch -------------------------------------------------
def test_first_batch_starts_at_the_initial_offsets(ckpt):
    assert batch_offset_range(ckpt, 0, TOPIC) == ({0: 0, 1: 5}, {0: 10, 1: 15})


def test_later_batch_starts_where_the_previous_one_ended(ckpt):
    assert batch_offset_range(ckpt, 2, TOPIC) == ({0: 20, 1: 25}, {0: 30, 1: 35})
    assert batch_offset_range(str(ckpt), 1, TOPIC) == ({0: 10, 1: 15}, {0: 20, 1: 25})


def test_file_uri_is_accepted(ckpt):
    assert batch_offset_range(f"file://{ckpt}", 1, TOPIC)[1] == {0: 20, 1: 25}


def test_partition_added_later_starts_at_zero(tmp_path):
    ck = write_checkpoint(tmp_path, {0: 3}, {0: {0: 8}, 1: {0: 9, 1: 4}}, [0])
    assert batch_offset_range(ck, 1, TOPIC) == ({0: 8, 1: 0}, {0: 9, 1: 4})


def test_first_batch_of_a_checkpoint_may_have_a_later_id(tmp_path):
    ck = write_checkpoint(tmp_path, {0: 7}, {4: {0: 12}}, [])
    assert batch_offset_range(ck, 4, TOPIC) == ({0: 7}, {0: 12})


def test_missing_previous_offsets_with_older_batches_is_an_error(tmp_path):
    ck = write_checkpoint(tmp_path, {0: 0}, {0: {0: 1}, 2: {0: 3}}, [0])
    with pytest.raises(CheckpointError, match=r"offsets/1: file is missing although older batches"):
        batch_offset_range(ck, 2, TOPIC)


def test_missing_batch_file_names_the_path(ckpt):
    with pytest.raises(CheckpointError, match=r"offsets/9: file is missing"):
        batch_offset_range(ckpt, 9, TOPIC)


def test_missing_initial_offsets_names_the_path(tmp_path):
    ck = write_checkpoint(tmp_path, None, {0: {0: 1}}, [])
    with pytest.raises(CheckpointError, match=r"sources/0/0: file is missing"):
        batch_offset_range(ck, 0, TOPIC)


def test_unknown_topic_is_an_error(ckpt):
    with pytest.raises(CheckpointError, match=r"no source offsets for topic 'other'"):
        batch_offset_range(ckpt, 1, "other")


def test_negative_batch_id_is_an_error(ckpt):
    with pytest.raises(CheckpointError, match="negative"):
        batch_offset_range(ckpt, -1, TOPIC)


@pytest.mark.parametrize(
    "content, reason",
    [
        ("", "empty"),
        ("v1", "ends after its version line"),
        ('v1\n{"batchWatermarkMs":0}', "no source offsets line"),
        ('v1\n{"batchWatermarkMs":0,\n', "not valid JSON"),
        ('v1\n{}\n{"payments":{"0":', r"line 3 \(source offsets\) is not valid JSON"),
        ('v1\n{}\n{"payments":{"0":"x"}}', "non-integer"),
        ("v1\n{}\n[1,2]", "not a JSON object of topics"),
        ("garbage\n{}\n{}", "not a log version"),
        ("v7\n{}\n{}", "v7 is not supported"),
    ],
)
def test_broken_offsets_file_raises_with_the_reason(tmp_path, content, reason):
    path = tmp_path / "5"
    path.write_text(content)
    with pytest.raises(CheckpointError, match=reason) as info:
        read_offsets_file(path)
    assert str(path) in str(info.value)


def test_offsets_file_with_no_offsets_for_a_source(tmp_path):
    path = tmp_path / "0"
    path.write_text(offsets_text(None) + "\n" + json.dumps({"other": {"0": 4}}) + "\n")
    parsed = read_offsets_file(path)
    assert parsed["version"] == 1
    assert parsed["metadata"]["batchTimestampMs"] == 1_700_000_000_000
    assert parsed["sources"] == [None, {"other": {0: 4}}]


def test_initial_offsets_with_and_without_the_zero_byte(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(b'\x00v1\n{"t":{"1":4,"0":2}}')
    b.write_bytes(b'{"t":{"0":9}}')  # Spark 2.1.0 wrote no version line
    c.write_bytes(b"\x00v1")
    assert read_initial_offsets(a) == {"t": {0: 2, 1: 4}}
    assert read_initial_offsets(b) == {"t": {0: 9}}
    with pytest.raises(CheckpointError, match="truncated"):
        read_initial_offsets(c)


# -- step 2: the whole directory --------------------------------------------------------------
from onceflow.checkpoint import read_checkpoint  # noqa: E402


def reasons(ck) -> str:
    return " | ".join(ck.unusable_reasons)


def problem_at(ck, suffix: str) -> str:
    found = [p.reason for p in ck.problems if p.path.endswith(suffix)]
    assert found, f"no problem reported at *{suffix}; problems: {ck.problems}"
    return found[0]


def test_healthy_checkpoint_reads_whole(ckpt):
    ck = read_checkpoint(ckpt)
    assert ck.exists and ck.usable and not ck.empty
    assert ck.problems == () and ck.unusable_reasons == ()
    assert ck.query_id == QUERY_ID
    assert ck.last_committed == 2 and ck.latest_planned == 2 and ck.uncommitted is None
    assert ck.committed_offsets(TOPIC) == {0: 30, 1: 35}
    assert ck.initial_offsets == {TOPIC: {0: 0, 1: 5}}
    assert ck.batches[1].timestamp_ms == 1_700_000_001_000
    assert ck.topics == [TOPIC]
    d = ck.as_dict()
    assert d["committed_offsets"] == {TOPIC: {"0": 30, "1": 35}} and d["retained"] == [0, 2]
    json.dumps(d)


def test_planned_but_uncommitted_batch_is_reported_and_usable(tmp_path):
    ck = read_checkpoint(write_checkpoint(tmp_path, {0: 0}, {0: {0: 5}, 1: {0: 9}}, [0]))
    assert ck.usable and ck.uncommitted == 1 and ck.last_committed == 0
    assert ck.committed_offsets(TOPIC) == {0: 5}


def test_missing_directory_is_not_usable_and_not_raising(tmp_path):
    ck = read_checkpoint(tmp_path / "nope")
    assert not ck.exists and not ck.usable and ck.empty
    assert ck.position(TOPIC) == {} and ck.last_committed is None


def test_empty_directory_is_usable_and_empty(tmp_path):
    ck = read_checkpoint(tmp_path)
    assert ck.exists and ck.empty and ck.usable


def test_fresh_query_position_is_its_initial_offsets(tmp_path):
    ck = read_checkpoint(write_checkpoint(tmp_path, {0: 4, 1: 2}, {}, []))
    assert ck.usable and ck.last_committed is None
    assert ck.committed_offsets(TOPIC) == {} and ck.position(TOPIC) == {0: 4, 1: 2}


def test_old_batches_purged_is_not_a_gap(tmp_path):
    ck = read_checkpoint(
        write_checkpoint(tmp_path, {0: 0}, {n: {0: n * 10} for n in range(200, 205)}, list(range(200, 205)))
    )
    assert ck.usable and ck.problems == ()
    assert ck.retained == (200, 204)


def test_truncated_latest_offsets_is_unusable(ckpt):
    (ckpt / "offsets" / "2").write_text('v1\n{"batchWatermarkMs":0,"batchTi')
    ck = read_checkpoint(ckpt)
    assert not ck.usable
    assert "offsets/2 is unreadable" in reasons(ck)
    assert "not valid JSON" in problem_at(ck, "offsets/2")
    assert ck.last_committed == 2 and 2 not in ck.batches
    with pytest.raises(CheckpointError, match="last committed batch 2"):
        ck.committed_offsets(TOPIC)


def test_empty_latest_offsets_is_unusable(ckpt):
    (ckpt / "offsets" / "2").write_text("")
    ck = read_checkpoint(ckpt)
    assert not ck.usable and "empty" in problem_at(ck, "offsets/2")


def test_garbage_in_an_old_offsets_file_is_a_problem_only(ckpt):
    (ckpt / "offsets" / "0").write_bytes(b"\xff\xfe garbage")
    ck = read_checkpoint(ckpt)
    assert ck.usable
    assert "not UTF-8" in problem_at(ck, "offsets/0")


def test_garbage_second_latest_offsets_is_unusable(ckpt):
    (ckpt / "offsets" / "1").write_text("v1\n{}\nnot json")
    ck = read_checkpoint(ckpt)
    assert not ck.usable and "offsets/1 is unreadable" in reasons(ck)


def test_missing_metadata_is_unusable(tmp_path):
    ck = read_checkpoint(write_checkpoint(tmp_path, {0: 0}, {0: {0: 5}}, [0], query_id=None))
    assert not ck.usable and ck.query_id is None
    assert "metadata is missing" in reasons(ck)
    assert "query id is lost" in problem_at(ck, "metadata")


def test_garbage_metadata_is_unusable(ckpt):
    (ckpt / "metadata").write_text('{"name": 1}')
    ck = read_checkpoint(ckpt)
    assert not ck.usable and "metadata is unreadable" in reasons(ck)


def test_tmp_and_orphan_crc_leftovers_are_problems(ckpt):
    (ckpt / "offsets" / ".3.4f1d-uuid.tmp").write_text("v1\n{")
    (ckpt / "commits" / ".7.crc").write_bytes(b"x")
    (ckpt / "offsets" / ".1.crc").write_bytes(b"x")  # belongs to offsets/1: fine
    ck = read_checkpoint(ckpt)
    assert ck.usable, "Spark ignores hidden temp files"
    assert "leftover temp file" in problem_at(ck, ".3.4f1d-uuid.tmp")
    assert "checksum without its file '7'" in problem_at(ck, "commits/.7.crc")
    assert not [p for p in ck.problems if p.path.endswith(".1.crc")]
    assert ck.latest_planned == 2


def test_gap_in_offsets_is_a_problem_and_unusable_when_it_hits_the_previous_batch(tmp_path):
    ck = read_checkpoint(
        write_checkpoint(tmp_path / "a", {0: 0}, {0: {0: 1}, 1: {0: 2}, 3: {0: 4}, 4: {0: 5}}, [0, 1, 3, 4])
    )
    assert "gap: batch files 2 are missing" in problem_at(ck, "/offsets")
    assert "gap: batch files 2 are missing" in problem_at(ck, "/commits")
    assert ck.usable, "a restart reads only offsets/4 and offsets/3"
    ck = read_checkpoint(write_checkpoint(tmp_path / "b", {0: 0}, {0: {0: 1}, 1: {0: 2}, 3: {0: 4}}, [0, 1]))
    assert not ck.usable and "offsets/2 is missing" in reasons(ck)


def test_gap_spans_are_compact(tmp_path):
    batches = {n: {0: n} for n in (0, 1, 5, 6)}
    ck = read_checkpoint(write_checkpoint(tmp_path, {0: 0}, batches, [0, 1, 5, 6]))
    assert "batch files 2-4 are missing" in problem_at(ck, "/offsets")


def test_commits_ahead_of_offsets_is_unusable(ckpt):
    (ckpt / "commits" / "3").write_text('v1\n{"nextBatchWatermarkMs":0}')
    ck = read_checkpoint(ckpt)
    assert not ck.usable and "commits are ahead of offsets" in reasons(ck)
    assert "commits without an offsets file: 3" in problem_at(ck, "/commits")


def test_commits_trailing_by_more_than_one_is_unusable(tmp_path):
    ck = read_checkpoint(write_checkpoint(tmp_path, {0: 0}, {0: {0: 1}, 1: {0: 2}, 2: {0: 3}, 3: {0: 4}}, [0]))
    assert not ck.usable and "never write batches 1-2" in reasons(ck)


def test_truncated_newest_commit_is_unusable(ckpt):
    (ckpt / "commits" / "2").write_text("v1")
    ck = read_checkpoint(ckpt)
    assert not ck.usable and "commits/2 is unreadable" in reasons(ck)
    assert ck.last_committed == 1, "an unreadable commit does not count as committed"


def test_unreadable_initial_offsets_is_a_problem(ckpt):
    (ckpt / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"payments":')
    ck = read_checkpoint(ckpt)
    assert ck.usable, "a restart after batch 0 does not read the initial offsets"
    assert "not valid JSON" in problem_at(ck, "sources/0/0")
    with pytest.raises(CheckpointError, match="sources/0/0"):
        batch_offset_range(ckpt, 0, TOPIC)


def test_a_file_instead_of_a_directory(tmp_path):
    f = tmp_path / "ck"
    f.write_text("x")
    ck = read_checkpoint(f)
    assert not ck.usable and "is a file" in reasons(ck)
