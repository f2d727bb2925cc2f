"""Small Delta appends from Python with delta-rs: one commit with its ledger entry, skipped when replayed."""

from __future__ import annotations

import json

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from onceflow.deltars import Appender, table_schema_json


def test_an_append_is_one_commit_with_its_metadata_and_a_replay_is_skipped(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.string())}))
    appender = Appender(path)
    version = appender.append({"b": ["x", "y"], "a": [1, 2]}, '{"batch": 0}', "app", 0)
    assert version == 1
    assert appender.append({"a": [1], "b": ["x"]}, '{"batch": 0}', "app", 0) is None  # replayed: nothing written
    assert appender.append(None, '{"batch": 1}', "app", 1) == 2  # no rows: the entry alone is committed
    table = DeltaTable(path)
    assert table.version() == 2 and sorted(table.to_pyarrow_table().column("a").to_pylist()) == [1, 2]
    assert table.history()[0]["userMetadata"] == '{"batch": 1}' and table.transaction_version("app") == 1
    assert [f["name"] for f in json.loads(table_schema_json(path))["fields"]] == ["a", "b"]
    assert appender.small_files(below_bytes=10**9) == 1  # the append with rows wrote one file
