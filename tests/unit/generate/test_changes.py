"""The change stream generator: every record is what it says (a change, a tombstone, or malformed
with exactly its reason, as cdc/envelope.py judges it), and the fold of what is delivered, with
its duplicates and late changes, is the table the simulated database ends with."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow import config
from onceflow.cdc.envelope import TOMBSTONE, Change, Envelope, Malformed
from onceflow.cdc.fold import Located, fold, fold_batches
from onceflow.cdc.spec import KeyedSpec, resolve
from onceflow.cli.produce import produce_plan
from onceflow.errors import ConfigError
from onceflow.generate.changes import TOMBSTONE_KIND, ChangeRecord, ChangeStream
from onceflow.generate.records import VALID
from onceflow.schema import reasons as R
from onceflow.schema.model import Schema
from onceflow.schema.reasons import Reason

PROPERTIES = settings(
    max_examples=max(40, settings().max_examples),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PARTITIONS = 4

CUSTOMERS = config.load_pipeline("customers_cdc")
# a composite key, a nested column, and a sequence that is a row field (REPLICA IDENTITY FULL)
ORDERS = Schema.model_validate(
    {
        "format": "debezium",
        "event_time": "updated_at",
        "fields": [
            {"name": "region", "type": "string", "allowed": ["eu", "us", "ap"]},
            {"name": "id", "type": "int", "min": 1, "max": 400},
            {"name": "version", "type": "long"},
            {"name": "amount", "type": "decimal(10,2)", "encoding": "precise", "min": 0, "required": False},
            {"name": "code", "type": "string", "pattern": "^[A-Z]{3}$", "examples": ["ABC", "XYZ"]},
            {"name": "note", "type": "string", "path": "$.meta.note", "required": False, "max_length": 20},
            {"name": "placed", "type": "date"},
            {"name": "updated_at", "type": "timestamp"},
        ],
    }
)
# Debezium's default time encodings, and no event_time: the envelope's source.ts_ms (issue 48)
ORDERS_EPOCH = Schema.model_validate(
    {
        **ORDERS.model_dump(exclude_defaults=True),
        "event_time": None,
        "fields": [
            {**f.model_dump(exclude_defaults=True), "encoding": enc}
            if (enc := {"placed": "epoch_days", "updated_at": "epoch_micros"}.get(f.name))
            else f.model_dump(exclude_defaults=True)
            for f in ORDERS.fields
        ],
    }
)
SPECS: dict[str, tuple[Schema, KeyedSpec]] = {
    "customers_lsn": (CUSTOMERS.schema, CUSTOMERS.keyed),  # type: ignore[dict-item]
    "customers_ts": (CUSTOMERS.schema, resolve(CUSTOMERS.schema, ["id"], ["source.ts_ms", "source.lsn"])),
    "customers_processed": (CUSTOMERS.schema, resolve(CUSTOMERS.schema, ["id"], "ts_ms")),
    "orders_version": (ORDERS, resolve(ORDERS, ["region", "id"], "version")),
    "orders_updated_at": (ORDERS, resolve(ORDERS, ["id", "region"], ["updated_at"])),
    "orders_epoch": (ORDERS_EPOCH, resolve(ORDERS_EPOCH, ["region", "id"], "version")),
}


def stream(name: str = "customers_lsn", seed: int = 1, count: int = 3000, **options: Any) -> ChangeStream:
    schema, spec = SPECS[name]
    return ChangeStream(schema, spec, seed, count=count, **options)


def envelope_of(s: ChangeStream) -> Envelope:
    return Envelope(s.schema, s.spec.key_names, [p.name for p in s.spec.sequence])


def partition(key: bytes) -> int:
    return zlib.crc32(key) % PARTITIONS


def delivered(records: list[ChangeRecord], env: Envelope) -> tuple[list[Located], list[str]]:
    """The valid changes at synthetic (partition, offset): the partition from the Kafka key, the
    offsets in delivery order per partition, as a producer keyed by the row's key writes them;
    and what was not parsed as intended."""
    offsets: Counter = Counter()
    located, wrong = [], []
    for rec in records:
        p = partition(rec.key)
        got = env.parse(rec.key, rec.value)
        if rec.kind == VALID and isinstance(got, Change):
            located.append((got, p, offsets[p]))
        elif rec.kind == TOMBSTONE_KIND and got is TOMBSTONE:
            pass
        elif not (isinstance(got, Malformed) and got.reason == rec.kind):
            wrong.append(f"{rec.kind} parsed as {got}: {rec.value!r}")
        offsets[p] += 1
    return located, wrong


@pytest.mark.parametrize("name", list(SPECS))
def test_every_record_parses_as_intended_and_the_fold_is_the_database(name):
    s = stream(name, malformed_ratio=0.1, duplicate_ratio=0.1, out_of_order_ratio=0.1)
    records = list(s)
    located, wrong = delivered(records, envelope_of(s))
    assert not wrong, "\n".join(wrong[:5])
    assert len(records) == 3000
    state = fold(located)
    assert state.rows == s.expected_rows() and len(state.rows) > 10
    assert set(state.tombstones) == s.expected_deleted() and state.tombstones
    # batch by batch (a per-batch MERGE) ends the same
    assert fold_batches([located[i : i + 97] for i in range(0, len(located), 97)]).rows == s.expected_rows()


@PROPERTIES
@given(
    name=st.sampled_from(list(SPECS)),
    seed=st.integers(0, 2**32),
    count=st.integers(0, 400),
    snapshot=st.none() | st.integers(0, 30),
    dup=st.floats(0, 0.6),
    late=st.floats(0, 0.45),
    bad=st.floats(0, 0.5),
)
def test_any_mix_delivers_exactly_count_records_and_folds_to_the_database(name, seed, count, snapshot, dup, late, bad):
    s = stream(
        name,
        seed,
        count,
        snapshot_rows=snapshot,
        duplicate_ratio=dup,
        out_of_order_ratio=late,
        malformed_ratio=bad,
    )
    records = list(s)
    assert len(records) == count == s.summary()["records"]
    located, wrong = delivered(records, envelope_of(s))
    assert not wrong, "\n".join(wrong[:5])
    state = fold(located)
    assert state.rows == s.expected_rows()
    assert set(state.tombstones) == s.expected_deleted()
    # every record is exactly one of: a change's first delivery, a copy, a tombstone, a malformed record
    c = s.summary()
    assert c["changes"] + c["duplicates"] + c["tombstones"] + c["malformed"] == count
    assert c["changes"] == c["snapshot_reads"] + c["creates"] + c["updates"] + c["deletes"]  # a key change: d + c


def test_duplicates_and_late_changes_occur_at_the_requested_ratios():
    s = stream(count=8000, duplicate_ratio=0.1, out_of_order_ratio=0.2)
    records = list(s)
    env = envelope_of(s)
    # independently of the generator's flags: a copy is a change value seen before; a late change
    # one delivered after a change of its key with a greater lsn
    seen: set[bytes] = set()
    newest: dict[tuple, int] = {}
    copies = late = firsts = 0
    for rec in records:
        if rec.value is None:
            continue
        change = env.parse(rec.key, rec.value)
        assert isinstance(change, Change)
        if rec.value in seen:
            copies += 1
            assert rec.duplicate
            continue
        seen.add(rec.value)
        firsts += 1
        lsn = change.source["lsn"]
        if newest.get(change.key, -1) > lsn:
            late += 1
            assert rec.late
        newest[change.key] = max(newest.get(change.key, -1), lsn)
    c = s.summary()
    assert (copies, late, firsts) == (c["duplicates"], c["out_of_order"], c["changes"])
    assert copies / (copies + firsts) == pytest.approx(0.1, abs=0.015)
    assert late / firsts == pytest.approx(0.2, abs=0.015)


def test_without_duplicates_or_late_changes_the_log_is_delivered_in_order():
    s = stream(duplicate_ratio=0, out_of_order_ratio=0)
    values = [rec.value for rec in s if rec.value is not None]
    lsns = [json.loads(v)["source"]["lsn"] for v in values]
    assert lsns == sorted(lsns) and len(set(values)) == len(values)
    assert s.summary()["duplicates"] == s.summary()["out_of_order"] == 0


def test_a_snapshot_then_creates_updates_deletes_key_changes_and_recreations():
    s = stream(count=5000, snapshot_rows=40)
    records = list(s)
    envelopes = [(r, json.loads(r.value)) for r in records if r.value is not None and not r.duplicate]
    reads = [e for _, e in envelopes[:40]]
    assert [e["op"] for e in reads] == ["r"] * 40
    assert {e["source"]["lsn"] for e in reads} == {reads[0]["source"]["lsn"]}  # the snapshot's one position
    assert [e["source"]["snapshot"] for e in reads][:2] == ["first", "true"] and reads[-1]["source"][
        "snapshot"
    ] == "last"
    assert all(e["before"] is None for e in reads)
    later = [e for _, e in envelopes[40:]]
    assert min(e["source"]["lsn"] for e in later) > reads[0]["source"]["lsn"]
    assert {e["source"]["snapshot"] for e in later} == {"false"}
    c = s.summary()
    assert all(c[k] > 0 for k in ("creates", "updates", "deletes", "key_changes", "recreations", "tombstones"))
    # a delete carries the key alone (the default replica identity), and its tombstone follows it
    for i, rec in enumerate(records):
        if rec.op == "d" and not rec.duplicate:
            body = json.loads(rec.value or b"")
            assert body["before"] == json.loads(rec.key) and body["after"] is None
            assert records[i + 1] == ChangeRecord(rec.key, None, TOMBSTONE_KIND)
    # a key change: a delete of one key and a create of another at one lsn
    by_lsn: dict[int, list[tuple[str, bytes]]] = {}
    for r, e in envelopes:
        by_lsn.setdefault(e["source"]["lsn"], []).append((e["op"], r.key))
    moves = [v for v in by_lsn.values() if [op for op, _ in v] == ["d", "c"]]
    assert len(moves) == c["key_changes"] and all(a != b for (_, a), (_, b) in moves)


def test_the_envelope_is_the_postgresql_connectors():
    body = json.loads(next(r.value for r in stream(duplicate_ratio=0) if r.op == "u") or b"")
    assert body["before"] is None and set(body["after"]) == {"id", "email", "name", "tier", "balance", "updated_at"}
    src = body["source"]
    assert src["connector"] == "postgresql" and src["table"] == "customers" and src["schema"] == "public"
    assert isinstance(src["lsn"], int) and src["ts_us"] // 1000 == src["ts_ms"] and src["ts_ns"] == src["ts_us"] * 1000
    assert body["ts_ms"] >= src["ts_ms"] and body["after"]["updated_at"].endswith("Z")


def test_a_row_field_sequence_writes_the_whole_old_row_and_grows_over_the_keys_life():
    s = stream("orders_version", count=4000, duplicate_ratio=0, out_of_order_ratio=0)
    records = list(s)
    versions: dict[bytes, int] = {}
    for rec in records:
        if rec.value is None:
            continue
        body = json.loads(rec.value)
        if body["op"] == "d":
            assert body["before"]["version"] == versions[rec.key]  # ties with the change it removes
        else:
            assert body["after"]["version"] > versions.get(rec.key, 0)  # a re-created key too
            versions[rec.key] = body["after"]["version"]
        if body["op"] == "u":
            assert body["before"]["version"] < body["after"]["version"]
    assert s.summary()["recreations"] > 0 and json.loads(records[0].key).keys() == {"region", "id"}


@pytest.mark.parametrize("name", ["customers_lsn", "orders_version", "orders_epoch"])
def test_each_malformed_kind_is_made_and_judged_with_exactly_its_reason(name):
    s = stream(name, count=4000, malformed_ratio=0.5)
    records = list(s)
    _, wrong = delivered(records, envelope_of(s))
    assert not wrong, "\n".join(wrong[:5])
    made = {r.kind for r in records} - {VALID, TOMBSTONE_KIND}
    # the event time is a column of these but orders_epoch's: its envelope's source.ts_ms
    positional = s.schema.event_time_position is not None
    expected = set(R.CDC_REASONS) - (set() if positional else {Reason.CDC_INVALID_EVENT_TIME})
    assert made == set(s.kinds()) and expected <= made
    assert {Reason.MISSING_FIELD, Reason.WRONG_TYPE, Reason.INVALID_VALUE} <= made  # a row breaking the declared fields
    assert s.summary()["malformed"] == sum(1 for r in records if r.kind in made)


def test_the_kinds_follow_the_order_of_the_checks_and_the_schemas_rules():
    kinds = stream().kinds()
    envelope = tuple(r for r in R.CDC_REASONS if r != Reason.CDC_INVALID_EVENT_TIME)  # the event time is a column
    assert kinds[: len(envelope) + 1] == (Reason.INVALID_JSON, *envelope)
    assert {Reason.NOT_ALLOWED, Reason.TOO_LONG} <= set(
        kinds
    ) and Reason.BELOW_MIN not in kinds  # tier allowed, email max_length
    assert {Reason.PATTERN_MISMATCH, Reason.BELOW_MIN, Reason.ABOVE_MAX} <= set(stream("orders_version").kinds())


def test_a_seed_gives_the_same_stream_and_the_same_table():
    a, b, c = stream(seed=5, malformed_ratio=0.1), stream(seed=5, malformed_ratio=0.1), stream(seed=6)
    ra, rb, rc = list(a), list(b), list(c)
    assert ra == rb and a.expected_rows() == b.expected_rows() and a.expected_document() == b.expected_document()
    assert ra != rc


def test_the_expected_document_is_json_of_the_rows_as_debezium_writes_them():
    s = stream(count=500)
    list(s)
    doc = json.loads(json.dumps(s.expected_document()))
    assert doc["keys"] == ["id"] and doc["sequence_by"] == ["source.lsn"]
    assert len(doc["rows"]) == len(s.expected_rows()) and len(doc["deleted_keys"]) == len(s.expected_deleted())
    assert [r["id"] for r in doc["rows"]] == sorted(k for (k,) in s.expected_rows())
    assert doc["counts"]["records"] == 500


def test_the_table_is_known_once_the_stream_was_read_and_a_stream_is_read_once():
    s = stream(count=10)
    with pytest.raises(RuntimeError, match="once every record"):
        s.expected_rows()
    list(s)
    with pytest.raises(RuntimeError, match="read once"):
        list(s)


@pytest.mark.parametrize(
    "sequence_by, words",
    [
        ("source.pos", "PostgreSQL's envelope"),
        ("placed", "int, long and timestamp fields only"),
    ],
)
def test_a_sequence_it_cannot_make_is_refused_with_the_fix(sequence_by, words):
    with pytest.raises(ConfigError, match=words):
        ChangeStream(ORDERS, resolve(ORDERS, ["id"], sequence_by), count=10)


def test_ratios_out_of_range_are_refused():
    with pytest.raises(ConfigError, match=r"out_of_order_ratio=0.5 must be in \[0, 0.5\)"):
        stream(out_of_order_ratio=0.5)
    with pytest.raises(ConfigError, match="duplicate_ratio=1"):
        stream(duplicate_ratio=1)


def test_produce_plans_a_debezium_pipelines_change_event_kinds():
    pipeline, _, kinds = produce_plan("customers_cdc")
    assert pipeline.keyed is not None and pipeline.keyed.debezium
    assert Reason.CDC_MISSING_OP in kinds and Reason.DUPLICATE_KEY not in kinds


def test_produce_writes_the_expected_table_and_says_where(tmp_path, capsys):
    from onceflow.cli.app import build_parser
    from onceflow.cli.produce import print_summary, write_expected
    from onceflow.generate.producer import ProduceSummary

    args = build_parser().parse_args(
        ["produce", "--pipeline", "customers_cdc", "--expect", str(tmp_path / "t.json"), "--out-of-order-ratio", "0.2"]
    )
    assert args.out_of_order_ratio == 0.2 and args.duplicate_ratio == 0.05
    s = stream(count=300)
    list(s)
    summary = ProduceSummary("customers_cdc", changes=s)
    path = write_expected(summary, args.expect)
    assert path is not None and path == tmp_path / "t.json"
    doc = json.loads(path.read_text())
    assert doc["topic"] == "customers_cdc" and len(doc["rows"]) == len(s.expected_rows())
    assert summary.as_dict()["changes"] == s.summary()
    print_summary(summary, path)
    shown = capsys.readouterr().out
    assert "change stream: 300 records" in shown and str(path) in shown.replace("\n", "")
    assert write_expected(ProduceSummary("payments"), None) is None  # plain events: no table


def test_a_table_is_compared_with_the_databases_final_table():
    """ChangeStream.compare_table, the demo's summary and the e2e proof's oracle: the expected table
    matches; a changed value, a lost tombstone and a key held twice each do not."""
    s = stream(count=600)
    list(s)
    keys = s.spec.key_names
    rows = [{**row, "_deleted": False} for row in s.expected_rows().values()]
    names = [f.name for f in s.schema.fields]
    rows += [
        {**dict.fromkeys(names), **dict(zip(keys, key, strict=True)), "_deleted": True} for key in s.expected_deleted()
    ]
    same = s.compare_table(rows)
    assert same.match and same.rows == len(s.expected_rows()) and same.tombstones == len(s.expected_deleted())
    changed = [dict(rows[0], email="someone@else.example"), *rows[1:]]
    assert list(s.compare_table(changed).differ) == [tuple(rows[0][k] for k in keys)]
    tombstones = [r for r in rows if r["_deleted"]]
    assert tombstones, "the stream must delete keys"
    assert s.compare_table([r for r in rows if r is not tombstones[0]]).deleted_apart
    assert s.compare_table([*rows, rows[0]]).twice == [tuple(rows[0][k] for k in keys)]
