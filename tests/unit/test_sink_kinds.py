"""The sink registry: every config.Sinks section has a row and every row a section, and what the
code used to list by hand derives from the rows."""

from __future__ import annotations

from onceflow import sink_kinds
from onceflow.audit import suites
from onceflow.config import Sinks
from onceflow.sink_kinds import BACKFILLED, DELTA, FLOORED, FOLLOWS, KINDS, Engine, SinkName


def test_every_sinks_section_has_a_row_and_every_row_a_section():
    """A new `sinks:` section without a row (or a row without its section) fails here."""
    assert [kind.field for kind in KINDS] == list(Sinks.model_fields)
    assert [kind.name for kind in KINDS] == list(SinkName)


def test_the_derivations():
    assert FOLLOWS == {"aggregates": "bronze", "current": "bronze"}
    assert FLOORED == ("bronze", "quarantine", "kafka")
    assert BACKFILLED == ("bronze", "quarantine")
    assert DELTA == ("bronze", "quarantine", "aggregates", "current")
    assert sink_kinds.FIELD_TABLES == ("bronze", "current")


def test_rows_are_consistent():
    for kind in KINDS:
        # a follower is written from its leader's table: it keeps no floors, is never backfilled,
        # and its leader is written before it
        if kind.follows is not None:
            assert not (kind.floors or kind.backfilled), kind
            assert KINDS.index(sink_kinds.KIND[kind.follows]) < KINDS.index(kind), kind
        if kind.backfilled:  # backfill anti-joins and appends Delta tables
            assert kind.engine == Engine.DELTA, kind


def test_every_delta_sink_has_its_ddl_and_its_suite():
    """table_specs builds each Delta sink's table, and the audit validates it with a suite."""
    from onceflow.spark.table_specs import DDLS

    assert set(DDLS) == set(DELTA)
    assert {f"{name}_suite" for name in DELTA} <= set(vars(suites))


def test_names_are_their_text():
    """Ledgers, reports and JSON keep the plain names."""
    assert SinkName.BRONZE == "bronze" and f"{SinkName.KAFKA}" == "kafka"
