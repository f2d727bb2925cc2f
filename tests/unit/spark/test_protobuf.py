"""The job's view of a Protobuf record (spark/protobuf.py, the protobuf runtime): each type written
as docs/registry.md#the-json-view-of-a-protobuf-record says."""

from __future__ import annotations

import json
import math
import struct

from onceflow.schema.protobuf import encode_indexes
from onceflow.spark.protobuf import protobuf_view
from tests.protobuf_space import FILES, Payment, Refund


def test_the_view_writes_each_type_as_docs_registry_md_says():
    m = Payment(event_id="e", amount_cents=-3, rate=1.5, ratio=0.1, raw=b"\x00\xff", channel=2, note="")
    m.event_time.seconds, m.event_time.nanos = 1_700_000_000, 123_000
    m.meta.source = "pos"
    m.fee.value = 7
    m.limits["a"] = 1
    m.metas[5].via = 1
    m.tags.extend(["x", "y"])
    view = json.loads(protobuf_view(FILES, b"\x00" + m.SerializeToString()) or "")
    assert view["event_time"] == "2023-11-14T22:13:20.000123Z"
    assert view["ratio"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]  # a float's exact value
    assert (view["channel"], view["raw"], view["note"], view["fee"], view["memo"]) == ("STORE", "AP8=", "", 7, None)
    assert view["meta"] == {"source": "pos", "retries": None, "via": "CHANNEL_UNSPECIFIED"}
    assert (view["card"], view["wallet"], view["i32"]) == (None, None, 0)  # no presence: its default
    assert view["limits"] == {"a": 1} and view["metas"]["5"]["via"] == "WEB" and view["tags"] == ["x", "y"]
    refund = json.loads(protobuf_view(FILES, encode_indexes((1,)) + Refund(event_id="r").SerializeToString()) or "")
    assert refund == {"event_id": "r", "meta": None}
    # Payment.Meta by its nested index: protoc puts the maps' entry messages first, and no record is one
    assert json.loads(protobuf_view(FILES, encode_indexes((0, 2)) + b"") or "")["via"] == "CHANNEL_UNSPECIFIED"
    assert protobuf_view(FILES, encode_indexes((0, 0)) + b"") is None
    assert protobuf_view(FILES, encode_indexes((2,)) + b"") is None  # no third message


def test_nan_and_infinities_are_strings_in_the_view():
    view = json.loads(protobuf_view(FILES, b"\x00" + Payment(rate=math.inf, ratio=math.nan).SerializeToString()) or "")
    assert (view["rate"], view["ratio"]) == ("Infinity", "NaN")
