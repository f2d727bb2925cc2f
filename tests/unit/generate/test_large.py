"""The large valid events the generator makes on purpose: every kind, at its edge, and valid."""

from __future__ import annotations

from collections import Counter

from onceflow.config import load_pipeline
from onceflow.generate import large
from onceflow.generate.records import Generator
from onceflow.schema.reasons import MAX_DEPTH
from onceflow.schema.reference import Judge, outside_strings


def test_each_kind_is_made_at_its_edge_and_judged_valid():
    for name in ("payments", "sensors"):
        pipeline = load_pipeline(name)
        schema = pipeline.schema
        aggregates = pipeline.sinks.aggregates
        assert aggregates is not None  # both shipped examples declare aggregates
        gen = Generator(schema, 7, group_by=aggregates.group_by, large_ratio=0.5)
        judge, kinds = Judge(schema), Counter[str | None]()
        for _ in range(400):
            made = gen.record()
            assert judge.judge(made.value).reason is None, (made.large, made.value[:120])
            kinds[made.large] += 1
            if made.large == large.AT_MAX_BYTES:
                assert len(made.value) == schema.max_bytes
            elif made.large == large.DEEP:
                depth, deepest = 0, 0
                for c in outside_strings(made.value.decode()):
                    depth += c in "[{"
                    depth -= c in "]}"
                    deepest = max(deepest, depth)
                assert deepest == MAX_DEPTH
            elif made.large == large.LONG_STRING:
                longest = max(len(v) for v in made.values.values() if isinstance(v, str))
                limit = max(f.max_length or 0 for f in large.free_strings(schema))
                assert longest >= (limit or 1000), (longest, limit)
        assert set(kinds) == {None, *large.KINDS}, kinds


def test_the_other_records_of_a_seed_do_not_depend_on_the_ratio():
    schema = load_pipeline("payments").schema
    without, with_large = Generator(schema, 3, large_ratio=0), Generator(schema, 3, large_ratio=0.2)
    plain = [without.record(0.1) for _ in range(300)]
    mixed = [with_large.record(0.1) for _ in range(300)]
    assert len({m.value for m in plain}) > 250 and sum(m.large is not None for m in mixed) > 30
    same = [a.value == b.value for a, b in zip(plain, mixed, strict=True) if b.large is None]
    assert same and all(same)
