"""The JSON documents onceflow emits and their published schemas: docs/schemas/*.json are what the
models generate (`python -m devkit.schemas`), so neither can drift from the other (issue 50)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import ValidationError

from devkit.schemas import SCHEMAS, generated, models
from onceflow.wire import OpenWire, Wire


@pytest.mark.parametrize("name", sorted(models()))
def test_each_committed_schema_is_what_its_model_generates(name):
    committed = (SCHEMAS / name).read_text()
    assert committed == generated(name), (
        f"docs/schemas/{name} differs from what {models()[name].__name__} generates: run `python -m devkit.schemas`"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads(committed))


def test_every_schema_has_a_model_and_every_model_a_schema():
    assert {p.name for p in SCHEMAS.glob("*.schema.json")} == set(models())


class _Doc(Wire):
    a: int
    b: int | None = None


class _Open(OpenWire):
    a: int


def test_a_document_writes_the_fields_it_was_given_and_refuses_others():
    assert _Doc(a=1).as_json() == {"a": 1}  # left out: absent, not null
    assert _Doc(a=1, b=None).as_json() == {"a": 1, "b": None}
    with pytest.raises(ValidationError):
        _Doc(a=1, c=2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        _Doc(a=1).a = 2  # frozen
    assert _Open.model_validate({"a": 1, "by": "x"}).as_json() == {
        "a": 1,
        "by": "x",
    }  # another file's fields pass through
