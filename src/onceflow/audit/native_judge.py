"""The columnar judge compiled (onceflow/native.py: native/judge, Rust, loaded with ctypes): what
audit/columnar_judge.py decides with a DuckDB query, decided a record at a time in about a
microsecond, the GIL let go meanwhile.

It reads the schemas the DuckDB judge reads (top-level fields without encodings or patterns;
`why_not`). It is sure of every record the DuckDB judge is sure of, with the same typed values,
and besides of records whose undeclared members nest (objects and arrays within the depth limit,
no duplicate or escaped key at any depth): the deep and wide records a stream carries, 0.2% of the
generator's and most of their bytes, which the reference judge reads at milliseconds each. Both
judges are held to the reference on records from the whole space, and this one to the query
(tests/unit/audit/test_columnar_judge.py); in every audit a sample of its sure records is judged
again by the reference (audit/source.py).

Where the library is not built the audit uses the DuckDB judge, and its report says so (`engine`).
"""

from __future__ import annotations

import ctypes
import functools
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from onceflow import native
from onceflow.audit import columnar_judge
from onceflow.schema import reasons as R
from onceflow.schema.model import FieldSpec, Schema

if TYPE_CHECKING:
    import pyarrow as pa


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    lib = native.library()
    if lib is None:
        return None
    lib.onceflow_judge.restype = ctypes.c_int64
    lib.onceflow_judge.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    return lib


def available() -> bool:
    """Whether the library is built here."""
    return _library() is not None


def why_not(schema: Schema) -> str | None:
    """Why this judge cannot read a schema's records, or None (the DuckDB judge's reasons)."""
    return columnar_judge.why_not(schema)


def _hex(text: str) -> str:
    return text.encode().hex() or "-"


def _bound(f: FieldSpec, value: object, is_min: bool) -> str:
    """A min or max as the library compares it, worked out exactly here: an integer's (ceiling of a
    min, floor of a max), a decimal's in units of its scale, or a double's; `never` where no value
    could be sure to keep it (a double bound past the double's range)."""
    d = Decimal(str(value))
    if f.ftype.base == "double":
        b = float(d)
        return f"float {b!r}" if abs(b) != float("inf") else "never"
    if not d.is_finite():
        return "never"
    units = d.scaleb(f.ftype.scale) if f.ftype.base == "decimal" else d
    whole = int(units.to_integral_value(ROUND_CEILING if is_min else ROUND_FLOOR))
    limit = 2**126  # past every value of the type, well inside an i128
    return f"int {max(-limit, min(limit, whole))}"


def spec_text(schema: Schema) -> str:
    """The schema as the library reads it: a line a setting (native/judge/src/lib.rs, parse_spec)."""
    lines = [f"max_bytes {schema.max_bytes}", f"max_number_chars {R.MAX_NUMBER_CHARS}", f"max_depth {R.MAX_DEPTH}"]
    for f in schema.fields:
        t = f.ftype
        p, s = (t.precision, t.scale) if t.base == "decimal" else (0, 0)
        lines.append(f"field {_hex(f.keys[0])} {t.base} {int(f.required)} {p} {s}")
        for a in f.allowed or ():
            lines.append(f"allowed_str {_hex(a)}" if isinstance(a, str) else f"allowed_int {int(a)}")
        if f.min is not None:
            lines.append(f"min {_bound(f, f.min, True)}")
        if f.max is not None:
            lines.append(f"max {_bound(f, f.max, False)}")
        if f.max_length is not None:
            lines.append(f"max_length {f.max_length}")
        if f.uuid:
            lines.append("uuid")
    return "\n".join(lines) + "\n"


_WIDTH = {"int": 4, "date": 4, "decimal": 16, "long": 8, "double": 8, "timestamp": 8}


class NativeJudge:
    """ColumnarJudge's judge(), compiled: the declared fields in their Arrow types (NULL where not
    sure) and `_sure`, one row per value, in order."""

    engine = "native"

    def __init__(self, schema: Schema):
        problem = why_not(schema)
        if problem:
            raise ValueError(f"the columnar judge cannot read this schema: {problem}")
        lib = _library()
        if lib is None:
            raise RuntimeError(f"the native library is not built ({native.library_path()}). Fix: run `onceflow setup`")
        self.lib, self.schema = lib, schema
        self.spec = spec_text(schema).encode()

    def judge(self, values: pa.Array | pa.ChunkedArray) -> pa.Table:
        import pyarrow as pa

        from onceflow.audit.arrow_types import arrow_type

        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        names = [*self.schema.names, "_sure"]
        types = [arrow_type(f.ftype) for f in self.schema.fields] + [pa.bool_()]
        if not chunks:
            return pa.table([pa.array([], t) for t in types], names=names)
        tables = [pa.table(self._judge_chunk(c), names=names) for c in chunks]
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def _judge_chunk(self, values: pa.Array) -> list[pa.Array]:
        import pyarrow as pa

        from onceflow.audit.arrow_types import arrow_type

        if values.type not in (pa.binary(), pa.large_binary()):
            values = values.cast(pa.binary())
        n, at = len(values), values.offset
        validity, offsets, data = values.buffers()
        wide = values.type == pa.large_binary()
        bitmap = (n + 7) // 8
        data_len = data.size if data is not None else 0
        held: list = []  # the buffers of each field, in the library's order
        pointers = (ctypes.c_void_p * (3 * len(self.schema.fields)))()
        for k, f in enumerate(self.schema.fields):
            base = f.ftype.base
            size = bitmap if base == "boolean" else 8 * (n + 1) if base == "string" else _WIDTH[base] * n
            bufs = [pa.allocate_buffer(bitmap), pa.allocate_buffer(max(size, 1))]
            bufs.append(pa.allocate_buffer(max(data_len, 1)) if base == "string" else None)
            held.append(bufs)
            for j, b in enumerate(bufs):
                pointers[3 * k + j] = b.address if b is not None else None
        sure = pa.allocate_buffer(max(bitmap, 1))
        width = 8 if wide else 4
        got = self.lib.onceflow_judge(
            self.spec,
            len(self.spec),
            n,
            offsets.address + at * width,
            int(wide),
            data.address if data is not None else None,
            data_len,
            validity.address if validity is not None else None,
            at,
            sure.address,
            pointers,
        )
        if got < 0:
            raise RuntimeError(f"the native judge could not read its spec:\n{self.spec.decode()}")
        out = []
        for f, (valid, vals, text) in zip(self.schema.fields, held, strict=True):
            t = arrow_type(f.ftype)
            if f.ftype.base == "string":
                column = pa.Array.from_buffers(pa.large_string(), n, [valid, vals, text]).cast(pa.string())
            else:
                column = pa.Array.from_buffers(t, n, [valid, vals])
            out.append(column)
        out.append(pa.Array.from_buffers(pa.bool_(), n, [None, sure]))
        return out
