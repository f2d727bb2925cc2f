"""The reference fold: the same current state and tombstones whatever the order, the grouping into
batches and the duplicates of the changes; and the state the database itself ended in."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.cdc.envelope import Change
from onceflow.cdc.fold import Located, State, Version, fold, fold_batches, fold_into

# cheap examples: many more than the `ci` profile's Spark-sized budget, as many as `fuzz` asks
PROPERTIES = settings(
    max_examples=max(300, settings().max_examples),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def change(op: str, key: int, seq: int | tuple, value: str = "") -> Change:
    sequence = seq if isinstance(seq, tuple) else (seq,)
    return Change(op, (key,), None if op == "d" else {"id": key, "value": value}, sequence)


def at(*changes: tuple[Change, int]) -> list[Located]:
    """Changes at offsets of partition 0."""
    return [(c, 0, offset) for c, offset in changes]


def same(a: State, b: State) -> bool:
    return a.rows == b.rows and a.tombstones == b.tombstones and a.versions == b.versions


def in_every_order(located: list[Located]) -> list[State]:
    return [fold(order) for order in itertools.permutations(located)]


# -- the rules, one example each -----------------------------------------------------------
def test_the_greatest_sequence_wins_whatever_the_arrival_order():
    log = at((change("c", 1, 10, "a"), 0), (change("u", 1, 20, "b"), 1), (change("u", 1, 30, "c"), 2))
    for state in in_every_order(log):
        assert state.rows == {(1,): {"id": 1, "value": "c"}} and state.tombstones == {}


def test_a_delete_then_an_older_update_arriving_later_leaves_the_row_deleted():
    delete, older = change("d", 1, 20), change("u", 1, 10, "stale")
    state = fold(at((delete, 5), (older, 3)))  # the update arrives after the delete (a replay, another batch)
    assert state.rows == {} and state.tombstones == {(1,): (20,)}
    assert same(fold_batches([at((delete, 5)), at((older, 3))]), state)


def test_a_change_newer_than_the_tombstone_brings_the_key_back():
    log = at((change("c", 1, 10, "a"), 0), (change("d", 1, 20), 1), (change("c", 1, 30, "again"), 2))
    for state in in_every_order(log):
        assert state.rows == {(1,): {"id": 1, "value": "again"}} and state.tombstones == {}


def test_equal_sequences_go_to_the_later_record_in_the_log():
    first, second = change("u", 1, 10, "first"), change("u", 1, 10, "second")
    for state in in_every_order(at((first, 7), (second, 8))):
        assert state.rows == {(1,): {"id": 1, "value": "second"}}
    # a delete that repeats the sequence of the row it removes (a row-field sequence read from `before`)
    for state in in_every_order(at((change("u", 1, 10, "x"), 7), (change("d", 1, 10), 8))):
        assert state.rows == {} and state.tombstones == {(1,): (10,)}
    # across partitions the greater partition wins: deterministic, though no order of the database's
    assert fold([(first, 1, 99), (second, 0, 100)]).rows == {(1,): {"id": 1, "value": "first"}}


def test_a_primary_key_change_deletes_the_old_key_and_creates_the_new_one_at_one_position():
    move = at((change("c", 1, 5, "a"), 0), (change("d", 1, 9), 1), (change("c", 2, 9, "a"), 2))
    for state in in_every_order(move):
        assert state.rows == {(2,): {"id": 2, "value": "a"}} and state.tombstones == {(1,): (9,)}


def test_a_key_that_changes_and_comes_back_at_one_position_exists_at_the_end():
    # UPDATE id 1 -> 2, then 2 -> 1, in one transaction whose position is the sequence of all four
    back = at(
        (change("c", 1, 5, "a"), 0),
        (change("d", 1, 9), 1),
        (change("c", 2, 9, "a"), 2),
        (change("d", 2, 9), 3),
        (change("c", 1, 9, "a"), 4),
    )
    for state in in_every_order(back):
        assert state.rows == {(1,): {"id": 1, "value": "a"}} and state.tombstones == {(2,): (9,)}


def test_a_snapshot_read_is_an_upsert():
    assert fold(at((change("r", 1, 1, "snap"), 0))).rows == {(1,): {"id": 1, "value": "snap"}}
    log = at((change("r", 1, 1, "snap"), 0), (change("u", 1, 2, "live"), 1))
    for state in in_every_order(log):
        assert state.rows == {(1,): {"id": 1, "value": "live"}}


def test_replaying_any_part_of_the_log_changes_nothing():
    log = at((change("c", 1, 1, "a"), 0), (change("u", 1, 2, "b"), 1), (change("d", 1, 3), 2), (change("c", 2, 4), 3))
    once = fold(log)
    for n in range(len(log) + 1):
        for replayed in itertools.combinations(log, n):
            assert same(fold_batches([log, list(replayed)]), once)
            assert same(fold([*replayed, *log, *replayed]), once)


def test_tuple_sequences_compare_element_by_element():
    early, late = change("u", 1, (1767225600120, 99), "early"), change("u", 1, (1767225600120, 100), "late")
    for state in in_every_order(at((late, 0), (early, 1))):  # the log's order loses to the sequence
        assert state.rows == {(1,): {"id": 1, "value": "late"}}


def test_the_versions_keep_what_the_table_must_store():
    state = fold([(change("u", 1, 10, "a"), 2, 40), (change("d", 2, 11), 3, 41)])
    assert state.versions == {(1,): Version(change("u", 1, 10, "a"), 2, 40), (2,): Version(change("d", 2, 11), 3, 41)}
    assert state.versions[(2,)].order == ((11,), 3, 41)
    assert fold([]) == State() and fold_into(state, []) == state


# -- properties ------------------------------------------------------------------------------
OPS = st.sampled_from(["c", "u", "d", "r"])


@st.composite
def logs(draw) -> list[Located]:
    """Changes of a few keys at distinct log positions over two partitions, with sequences drawn
    freely: ties, and sequences that disagree with the log's order."""
    n = draw(st.integers(0, 25))
    out = []
    for offset in range(n):
        op, key = draw(OPS), draw(st.integers(1, 4))
        seq = draw(st.integers(0, 6))
        out.append((change(op, key, seq, f"v{offset}"), draw(st.integers(0, 1)), offset))
    return out


@st.composite
def arrivals(draw, log: list[Located]) -> list[Located]:
    """The log as a consumer may see it: any order, any record again (a replay, a redelivery)."""
    again = draw(st.lists(st.sampled_from(log), max_size=10)) if log else []
    return draw(st.permutations([*log, *again]))


@st.composite
def batches(draw, records: list[Located]) -> list[list[Located]]:
    """The records cut into consecutive batches, some empty."""
    cuts = sorted(draw(st.lists(st.integers(0, len(records)), max_size=6)))
    bounds = [0, *cuts, len(records)]
    return [records[a:b] for a, b in itertools.pairwise(bounds)]


@PROPERTIES
@given(data=st.data())
def test_any_order_with_duplicates_folds_to_the_same_state(data):
    log = data.draw(logs())
    assert same(fold(data.draw(arrivals(log))), fold(log))


@PROPERTIES
@given(data=st.data())
def test_folding_batches_one_after_another_equals_folding_everything_at_once(data):
    log = data.draw(logs())
    seen = data.draw(arrivals(log))
    assert same(fold_batches(data.draw(batches(seen))), fold(seen))


@st.composite
def database_logs(draw) -> list[Located]:
    """What a database writes: changes of one partition whose sequences never go back for a key
    (ties allowed: a coarse clock), each key created before it is updated or deleted."""
    n = draw(st.integers(0, 30))
    clock, live, out = 0, set[int](), []
    for offset in range(n):
        clock += draw(st.integers(0, 2))  # 0: the same sequence as the change before
        key = draw(st.integers(1, 4))
        op = draw(st.sampled_from(["u", "d"] if key in live else ["c", "r"]))  # a key exists before it changes
        (live.discard if op == "d" else live.add)(key)
        out.append((change(op, key, clock, f"v{offset}"), 0, offset))
    return out


def replay(log: list[Located]) -> tuple[dict, dict]:
    """The database's own state: the log applied in its order, no sequence looked at."""
    rows: dict = {}
    tombstones: dict = {}
    for c, _, _ in log:
        if c.deleted:
            rows.pop(c.key, None)
            tombstones[c.key] = c.sequence
        else:
            rows[c.key] = c.row
            tombstones.pop(c.key, None)
    return rows, tombstones


@PROPERTIES
@given(data=st.data())
def test_the_fold_of_any_arrival_is_the_state_the_database_ended_in(data):
    log = data.draw(database_logs())
    seen = data.draw(arrivals(log))
    state = fold_batches(data.draw(batches(seen)))
    assert (state.rows, state.tombstones) == replay(log)
