"""Valid records at the edges of what validation accepts, made on purpose.

A pipeline fed only events of a few dozen bytes never meets the record that stops a stream:
a 2,000-character string, a record of exactly `max_bytes`, a member nested to the depth
limit, an object of thousands of keys. The generator (generate/records.py) turns a small
share of its valid events into one of these kinds, so the demo, the kill schedules and
every test that produces events carry them. Each stays valid: it keeps every declared rule.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from onceflow.schema.model import FieldSpec, Schema
from onceflow.schema.reasons import MAX_DEPTH

LONG_STRING = "long_string"  # a free string field as long as its max_length and the record allow
AT_MAX_BYTES = "at_max_bytes"  # a record of exactly schema.max_bytes bytes
DEEP = "deep"  # an undeclared member nested to the depth limit
WIDE = "wide"  # an undeclared object of as many members as fit
KINDS = (LONG_STRING, AT_MAX_BYTES, DEEP, WIDE)
RATIO = 0.01  # the share of valid events made large by default (`onceflow produce --large-ratio`)
# characters whose JSON is longer than themselves: quotes, backslashes, control and non-ASCII ones
_HARD = ('"', "\\", "\n", "\t", "/", "é", "\u2028", "\U0001f600", "p", "p", "p", "p")


def free_strings(schema: Schema) -> list[FieldSpec]:
    """String fields without a rule that constrains the text (allowed, uuid, pattern)."""
    return [f for f in schema.fields if f.ftype.base == "string" and not (f.allowed or f.uuid or f.pattern)]


class Large:
    """Makes the large kinds a schema allows from a valid event; `build` assembles an event's
    JSON object from its values, `splice` adds the undeclared member `spare_key` to its text."""

    def __init__(
        self,
        schema: Schema,
        rng: random.Random,
        build: Callable[[dict[str, Any]], dict],
        splice: Callable[[bytes, bytes], bytes],
    ):
        self.schema, self.rng, self.build, self.splice = schema, rng, build, splice
        self.strings = free_strings(schema)
        self.kinds = tuple(k for k in KINDS if k != LONG_STRING or self.strings)

    def make(self, values: dict[str, Any]) -> tuple[str, bytes, dict[str, Any]] | None:
        """(kind, record, values) of one large kind drawn for this event, or None when the event
        leaves no room for it."""
        kind = self.rng.choice(self.kinds)
        values = dict(values)
        text = json.dumps(self.build(values)).encode()
        room = self.schema.max_bytes - len(text)
        if kind == LONG_STRING:
            f = self.rng.choice(self.strings)
            old = values.get(f.name)
            old_len = len(json.dumps(old)) if isinstance(old, str) else 0
            values[f.name] = self._hard_string(f.max_length or self.schema.max_bytes, room + old_len - 8)
            value = json.dumps(self.build(values)).encode()
        elif kind == AT_MAX_BYTES:
            pad = self.schema.max_bytes - len(self.splice(text, b'""'))
            value = self.splice(text, b'"' + b"p" * pad + b'"')
        elif kind == DEEP:
            depth = MAX_DEPTH - 1  # the event object is one level
            value = self.splice(text, b"[" * depth + b"]" * depth)
        else:
            members: list[str] = []
            size = 2
            while size + 16 < room - 40:
                member = f'"k{len(members)}":{len(members)}'
                members.append(member)
                size += len(member) + 1
            value = self.splice(text, ("{" + ",".join(members) + "}").encode())
        if len(value) > self.schema.max_bytes:
            return None
        return kind, value, values

    def _hard_string(self, max_chars: int, max_json_bytes: int) -> str:
        """A string of quotes, backslashes, line terminators and non-ASCII characters: at most
        `max_chars` characters and `max_json_bytes` bytes once escaped."""
        out: list[str] = []
        size = 2
        while len(out) < max_chars:
            ch = self.rng.choice(_HARD)
            cost = len(json.dumps(ch)) - 2
            if size + cost > max_json_bytes:
                break
            out.append(ch)
            size += cost
        return "".join(out)
