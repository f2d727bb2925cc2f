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
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": ts,
            "conf": {"spark.sql.shuffle.partitions": "2"}}
    line = "-" if offsets is None else json.dumps({topic: {str(p): o for p, o in offsets.items()}})
    return "v1\n" + json.dumps(meta) + "\n" + line


def write_checkpoint(root: Path, initial: dict[int, int] | None, batches: dict[int, dict[int, int]],
                     commits: list[int], query_id: str | None = QUERY_ID, crc: bool = True) -> Path:
    """A checkpoint as Spark 4 writes it (with the local file system's .crc files)."""
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(parents=True, exist_ok=True)
    if query_id is not None:
        (root / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    if initial is not None:
        (root / "sources" / "0").mkdir(parents=True, exist_ok=True)
        (root / "sources" / "0" / "0").write_bytes(
            b"\x00v1\n" + json.dumps({TOPIC: {str(p): o for p, o in initial.items()}}).encode())
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
    return write_checkpoint(tmp_path / "ck", {0: 0, 1: 5},
                            {0: {0: 10, 1: 15}, 1: {0: 20, 1: 25}, 2: {0: 30, 1: 35}}, [0, 1, 2])


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


def test_remote_uri_is_refused_with_a_fix(ckpt):
    with pytest.raises(CheckpointError, match="only local checkpoints"):
        batch_offset_range("s3a://bucket/ck", 0, TOPIC)


@pytest.mark.parametrize("content, reason", [
    ("", "empty"),
    ("v1", "ends after its version line"),
    ("v1\n{\"batchWatermarkMs\":0}", "no source offsets line"),
    ("v1\n{\"batchWatermarkMs\":0,\n", "not valid JSON"),
    ("v1\n{}\n{\"payments\":{\"0\":", r"line 3 \(source offsets\) is not valid JSON"),
    ("v1\n{}\n{\"payments\":{\"0\":\"x\"}}", "non-integer"),
    ("v1\n{}\n[1,2]", "not a JSON object of topics"),
    ("garbage\n{}\n{}", "not a log version"),
    ("v7\n{}\n{}", "v7 is not supported"),
])
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
