"""Writer generations: the checkpoint's identity file round-trips, an unreadable one is refused."""

from __future__ import annotations

import pytest

from onceflow.errors import RecoveryError
from onceflow.state.generation import has_spark_state, new_identity, read_identity, write_identity


def test_identity_round_trip_and_unreadable_identity(tmp_path):
    cp = tmp_path / "cp"
    assert read_identity(str(cp)) is None and not has_spark_state(str(cp))
    write_identity(str(cp), new_identity("p", 2, '{"t":{"0":5}}', "recovered", {"bronze": {"0": 9}}))
    got = read_identity(str(cp))
    assert got is not None
    assert (got.generation, got.starting_offsets, got.floor("bronze"), got.floor("quarantine")) == (
        2,
        '{"t":{"0":5}}',
        {0: 9},
        {},
    )
    (cp / "_onceflow.json").write_text("{not json")
    with pytest.raises(RecoveryError, match=r"unreadable.*onceflow recover"):
        read_identity(str(cp))
