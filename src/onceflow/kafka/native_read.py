"""Reading ranges of a topic at read_committed straight into Arrow (onceflow/native.py's reader):
the librdkafka that confluent-kafka's wheel carries, polled by native code that appends each
record's key, value, partition and offset to Arrow buffers. The Python path (kafka/consume.py,
_message_batches) makes a Message object a record and calls it five times more; on 2 cores that
loop was as long as the rest of an audit's reading.

The same consumer settings, the same ranges and the same stop rule as the Python path (a range is
read when a record at or past its end is seen, or the consumer's position passes its end: at
read_committed its last offsets may be transaction markers or aborted records). The consumer's
life (configure, assign, positions, close) stays here, through ctypes.
"""

from __future__ import annotations

import ctypes
import functools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceflow import native
from onceflow.errors import BrokerError
from onceflow.kafka.client import BOUNDED_READ, Cluster, as_client
from onceflow.polling import Deadline

if TYPE_CHECKING:
    import pyarrow as pa

READER_ENV = "ONCEFLOW_KAFKA_READER"  # `python`: the Python path even where the native one is built
_CONSUMER = 1  # RD_KAFKA_CONSUMER
_POLL_MS = 200
_NAMES = ["key", "value", "topic", "partition", "offset"]


class _TopicPartition(ctypes.Structure):
    """librdkafka's rd_kafka_topic_partition_t (rdkafka.h, stable ABI)."""

    _fields_ = [
        ("topic", ctypes.c_char_p),
        ("partition", ctypes.c_int32),
        ("offset", ctypes.c_int64),
        ("metadata", ctypes.c_void_p),
        ("metadata_size", ctypes.c_size_t),
        ("opaque", ctypes.c_void_p),
        ("err", ctypes.c_int),
        ("_private", ctypes.c_void_p),
    ]


class _TopicPartitionList(ctypes.Structure):
    _fields_ = [("cnt", ctypes.c_int), ("size", ctypes.c_int), ("elems", ctypes.POINTER(_TopicPartition))]


@functools.lru_cache(maxsize=1)
def _librdkafka() -> ctypes.CDLL | None:
    """confluent-kafka's own librdkafka (the one its Consumer runs), with the signatures used here."""
    import confluent_kafka

    here = Path(confluent_kafka.__file__).resolve().parent
    found = sorted((here.parent / "confluent_kafka.libs").glob("librdkafka*.so*"))
    if not found:
        return None
    rd = ctypes.CDLL(str(found[0]))
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "rd_kafka_conf_new": (ctypes.c_void_p, []),
        "rd_kafka_conf_destroy": (None, [ctypes.c_void_p]),
        "rd_kafka_conf_set": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
        ),
        "rd_kafka_new": (ctypes.c_void_p, [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
        "rd_kafka_poll_set_consumer": (ctypes.c_int, [ctypes.c_void_p]),
        "rd_kafka_topic_partition_list_new": (ctypes.POINTER(_TopicPartitionList), [ctypes.c_int]),
        "rd_kafka_topic_partition_list_add": (
            ctypes.POINTER(_TopicPartition),
            [ctypes.POINTER(_TopicPartitionList), ctypes.c_char_p, ctypes.c_int32],
        ),
        "rd_kafka_topic_partition_list_destroy": (None, [ctypes.POINTER(_TopicPartitionList)]),
        "rd_kafka_assign": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_TopicPartitionList)]),
        "rd_kafka_position": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_TopicPartitionList)]),
        "rd_kafka_consumer_close": (ctypes.c_int, [ctypes.c_void_p]),
        "rd_kafka_destroy": (None, [ctypes.c_void_p]),
        "rd_kafka_err2str": (ctypes.c_char_p, [ctypes.c_int]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(rd, name)
        fn.restype, fn.argtypes = restype, argtypes
    return rd


@functools.lru_cache(maxsize=1)
def _reader_library() -> ctypes.CDLL | None:
    lib = native.library()
    if lib is None or not hasattr(lib, "onceflow_reader_fill"):
        return None
    lib.onceflow_reader_new.restype = ctypes.c_void_p
    lib.onceflow_reader_free.argtypes = [ctypes.c_void_p]
    lib.onceflow_reader_take.restype = ctypes.c_void_p
    lib.onceflow_reader_take.argtypes = [ctypes.c_void_p]
    lib.onceflow_taken_free.argtypes = [ctypes.c_void_p]
    lib.onceflow_reader_fill.restype = ctypes.c_int64
    lib.onceflow_reader_fill.argtypes = [ctypes.c_void_p] * 4 + [
        ctypes.c_int32,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int32),
    ]
    lib.onceflow_taken_buffer.restype = ctypes.c_void_p
    lib.onceflow_taken_buffer.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_size_t)]
    return lib


def _settings(config: dict[str, Any]) -> dict[str, str] | None:
    """A consumer config as librdkafka's strings; None when one is not a plain value (a callback:
    only the Python client takes those)."""
    out = {}
    for key, value in config.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            out[key] = str(value)
        else:
            return None
    return out


def usable(cluster: Cluster) -> bool:
    """Whether the native reader reads for this cluster here: built, not turned off, plain settings."""
    import os

    if os.environ.get(READER_ENV, "").strip().lower() == "python":
        return False
    if _reader_library() is None or _librdkafka() is None:
        return False
    return _settings(as_client(cluster).librdkafka()) is not None


def range_batches(
    cluster: Cluster, topic: str, spans: dict[int, tuple[int, int]], timeout: float, size: int
) -> Iterator[pa.RecordBatch]:
    """kafka/consume.range_batches' batches (`spans`: the non-empty ranges), read natively; call
    only where `usable`."""
    lib, rd = _reader_library(), _librdkafka()
    assert lib is not None and rd is not None, "native_read.range_batches without usable()"
    config = _settings(
        as_client(cluster).librdkafka(
            **{
                **BOUNDED_READ,
                "group.id": f"onceflow-read-{uuid.uuid4()}",
                "isolation.level": "read_committed",
            }
        )
    )
    assert config is not None
    rk = _consumer(rd, config)
    reader = lib.onceflow_reader_new()
    try:
        parts = sorted(spans)
        tpl = rd.rd_kafka_topic_partition_list_new(len(parts))
        for p in parts:
            rd.rd_kafka_topic_partition_list_add(tpl, topic.encode(), p).contents.offset = spans[p][0]
        err = rd.rd_kafka_assign(rk, tpl)
        rd.rd_kafka_topic_partition_list_destroy(tpl)
        if err:
            raise BrokerError(f"reading {topic}: assigning its partitions failed: {rd.rd_kafka_err2str(err).decode()}")
        n = len(parts)
        ids = (ctypes.c_int32 * n)(*parts)
        ends = (ctypes.c_int64 * n)(*(spans[p][1] for p in parts))
        done = (ctypes.c_uint8 * n)()
        timed_out = ctypes.c_int32()
        poll = ctypes.cast(rd.rd_kafka_consumer_poll, ctypes.c_void_p)
        destroy = ctypes.cast(rd.rd_kafka_message_destroy, ctypes.c_void_p)
        deadline = Deadline(timeout)
        yielded = False
        while True:
            if deadline.passed:
                raise BrokerError(
                    f"reading {topic} at read_committed did not reach the end offsets "
                    f"{ {p: e for p, (_, e) in spans.items()} } within {timeout:.0f}s "
                    f"(done: {[p for p, d in zip(parts, done, strict=True) if d]})"
                )
            held = lib.onceflow_reader_fill(
                reader, poll, destroy, rk, _POLL_MS, size, n, ids, ends, done, ctypes.byref(timed_out)
            )
            if timed_out.value:
                _passed_by_position(rd, rk, topic, parts, ends, done)
            finished = all(done)
            if held and (held >= size or finished):
                yield _batch(lib, reader, topic, held)
                yielded = True
            if finished:
                break
        if not yielded:  # at least one batch: it gives the columns
            yield _batch(lib, reader, topic, 0)
    finally:
        lib.onceflow_reader_free(reader)
        rd.rd_kafka_consumer_close(rk)
        rd.rd_kafka_destroy(rk)


def _consumer(rd: ctypes.CDLL, config: dict[str, str]) -> int:
    """A librdkafka consumer of these settings (its messages on the consumer queue)."""
    errstr = ctypes.create_string_buffer(512)
    conf = rd.rd_kafka_conf_new()
    for key, value in config.items():
        if rd.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr)) != 0:
            rd.rd_kafka_conf_destroy(conf)
            raise BrokerError(f"the Kafka consumer setting {key!r} was refused: {errstr.value.decode()}")
    rk = rd.rd_kafka_new(_CONSUMER, conf, errstr, len(errstr))  # owns conf from here on success
    if not rk:
        rd.rd_kafka_conf_destroy(conf)
        raise BrokerError(f"a Kafka consumer could not be made: {errstr.value.decode()}")
    rd.rd_kafka_poll_set_consumer(rk)
    return rk


def _passed_by_position(rd: ctypes.CDLL, rk: int, topic: str, parts: list[int], ends, done) -> None:
    """Mark done each range the consumer's position has passed (its last offsets may be transaction
    markers or aborted records, which no record shows)."""
    waiting = [i for i, d in enumerate(done) if not d]
    tpl = rd.rd_kafka_topic_partition_list_new(len(waiting))
    try:
        for i in waiting:
            rd.rd_kafka_topic_partition_list_add(tpl, topic.encode(), parts[i])
        rd.rd_kafka_position(rk, tpl)
        for k, i in enumerate(waiting):
            if tpl.contents.elems[k].offset >= ends[i]:
                done[i] = 1
    finally:
        rd.rd_kafka_topic_partition_list_destroy(tpl)


class _Taken:
    """The native buffers of one batch, freed when the last Arrow buffer over them goes."""

    def __init__(self, lib: ctypes.CDLL, reader: int):
        self.lib, self.ptr = lib, lib.onceflow_reader_take(reader)

    def buffer(self, which: int) -> pa.Buffer:
        import pyarrow as pa

        size = ctypes.c_size_t()
        address = self.lib.onceflow_taken_buffer(self.ptr, which, ctypes.byref(size))
        return pa.foreign_buffer(address or 0, size.value, base=self)

    def __del__(self) -> None:
        self.lib.onceflow_taken_free(self.ptr)


def _batch(lib: ctypes.CDLL, reader: int, topic: str, n: int) -> pa.RecordBatch:
    """The held records, taken out of the reader, as kafka/consume.range_batches' columns: Arrow
    arrays over the native buffers themselves (no copy)."""
    import pyarrow as pa

    if n == 0:
        return pa.RecordBatch.from_arrays(
            [pa.array([], t) for t in (pa.binary(), pa.binary(), pa.string(), pa.int32(), pa.int64())], names=_NAMES
        )
    taken = _Taken(lib, reader)

    def binary(first: int) -> pa.Array:
        valid, offsets, data = taken.buffer(first), taken.buffer(first + 1), taken.buffer(first + 2)
        return pa.Array.from_buffers(pa.large_binary(), n, [valid, offsets, data]).cast(pa.binary())

    keys, values = binary(0), binary(3)
    partitions = pa.Array.from_buffers(pa.int32(), n, [None, taken.buffer(6)])
    offsets = pa.Array.from_buffers(pa.int64(), n, [None, taken.buffer(7)])
    topics = pa.repeat(pa.scalar(topic, pa.string()), n)
    return pa.RecordBatch.from_arrays([keys, values, topics, partitions, offsets], names=_NAMES)
