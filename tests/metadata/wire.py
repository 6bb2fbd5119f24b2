"""Test-side views of the metadata record schemas, independent of kraft's own codec.

* Hypothesis strategies for any record of any type at any version (`any_record`).
* `reference_decode`: a plain Python reading of the same field declarations, field by field,
  built through the classes' __init__. It shares nothing with the C reader but the schemas,
  so the two agreeing on random and corrupted values is evidence about both.
* `variant`: a writer of the variations Kafka's format allows but kraft's writer never
  makes: multi-byte varints, known tagged fields at their default, unknown tags, tags out
  of order or repeated (the last one counts), in every struct.
"""

import random
import struct
from typing import Any

from hypothesis import strategies as st

from kraft.metadata.records import RECORD_TYPES
from kraft.metadata.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
    WireType,
)

# Hypothesis values for each wire type, in range for it.
SCALARS = {
    INT8: st.integers(-(2**7), 2**7 - 1),
    INT16: st.integers(-(2**15), 2**15 - 1),
    INT32: st.integers(-(2**31), 2**31 - 1),
    INT64: st.integers(-(2**63), 2**63 - 1),
    UINT16: st.integers(0, 2**16 - 1),
    BOOL: st.booleans(),
    UUID: st.binary(min_size=16, max_size=16),
    STRING: st.text(max_size=20),
    BYTES: st.binary(max_size=20),
    FLOAT64: st.floats(allow_nan=False),  # NaN != NaN: equality checks would fail on it
}

_FORMATS = {
    INT8: ">b", INT16: ">h", INT32: ">i", INT64: ">q", UINT16: ">H", BOOL: ">?", UUID: ">16s", FLOAT64: ">d",
}
_VARIABLE = (STRING, BYTES)


def _values(wire_field, version):
    t = wire_field.type
    if isinstance(t, ArrayOf):
        element = t.element
        items = instances(element, version) if isinstance(element, type) else SCALARS[element]
        strategy = st.lists(items, max_size=5).map(tuple)
    else:
        strategy = SCALARS[t]
    return st.none() | strategy if wire_field.nullable else strategy


def instances(cls, version):
    """Any instance of a message class that `version` can hold (newer fields at default)."""
    fields = {
        name: _values(wf, version) if wf.since <= version else st.just(default)
        for name, wf, default in cls.__schema__.fields
    }
    return st.builds(cls, **fields)


def versions(cls) -> range:
    low, high = cls.__schema__.versions
    return range(low, high + 1)


def any_record():
    """(version, record) for every record type and every version it has."""
    return st.one_of([st.tuples(st.just(v), instances(cls, v)) for cls in RECORD_TYPES for v in versions(cls)])


_RANGES = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}


def _random_value(t: WireType, nullable: bool, version: int, rng: random.Random) -> Any:
    if nullable and rng.random() < 0.2:
        return None
    if isinstance(t, ArrayOf):
        element = t.element
        if isinstance(element, type):
            return tuple(random_record(element, version, rng) for _ in range(rng.randint(0, 3)))
        return tuple(_random_value(element, False, version, rng) for _ in range(rng.randint(0, 5)))
    if t is STRING:
        return "".join(rng.choice("ab-.é€😀") for _ in range(rng.randint(0, 12)))
    if t is BYTES:
        return rng.randbytes(rng.randint(0, 12))
    if t is FLOAT64:
        return rng.choice([0.0, -1.5, 1e300, float("inf"), rng.uniform(-1e6, 1e6)])
    if t is BOOL:
        return rng.random() < 0.5
    if t is UUID:
        return rng.randbytes(16)
    if t is UINT16:
        return rng.randrange(2**16)
    bits = _RANGES[t]
    return rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))


def random_record(cls: type, version: int, rng: random.Random) -> Any:
    """An instance of `cls` that `version` can hold, seeded: the same rng state, the same record."""
    return cls(**{
        name: _random_value(wf.type, wf.nullable, version, rng) if wf.since <= version else default
        for name, wf, default in cls.__schema__.fields
    })


def shape(value: Any) -> Any:
    """A value with every type spelled out, so that equal means equal types too (True is not 1,
    a list is not a tuple)."""
    if hasattr(type(value), "__schema__"):
        return type(value).__name__, tuple((name, shape(getattr(value, name))) for name, _, _ in value.__schema__.fields)
    if isinstance(value, tuple):
        return "tuple", tuple(shape(v) for v in value)
    return type(value).__name__, value


# ---------------------------------------------------------------- reference reader


class Bad(Exception):
    """The reference reader's refusal."""


class _Cursor:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.buf) - self.pos:
            raise Bad(f"{n} bytes past the end")
        self.pos += n
        return self.buf[self.pos - n : self.pos]

    def uvarint(self) -> int:
        value = 0
        for i in range(5):
            b = self.take(1)[0]
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                return value
        raise Bad("varint longer than 5 bytes")


def _read_value(cur: _Cursor, t: WireType, nullable: bool, version: int) -> Any:
    if t in _VARIABLE or isinstance(t, ArrayOf):
        n = cur.uvarint()
        if n == 0:
            if not nullable:
                raise Bad("null")
            return None
        if t is BYTES:
            return cur.take(n - 1)
        if t is STRING:
            try:
                return cur.take(n - 1).decode()
            except UnicodeDecodeError as e:
                raise Bad(str(e)) from None
        element = t.element
        if isinstance(element, type):
            return tuple(_read_struct(cur, element, version) for _ in range(n - 1))
        return tuple(_read_value(cur, element, False, version) for _ in range(n - 1))
    fmt = _FORMATS[t]
    return struct.unpack(fmt, cur.take(struct.calcsize(fmt)))[0]


def _read_struct(cur: _Cursor, cls: type, version: int) -> Any:
    fields = cls.__schema__.fields
    values = {}
    for name, wf, _ in fields:
        if wf.since <= version and wf.tag is None:
            values[name] = _read_value(cur, wf.type, wf.nullable, version)
    known = {wf.tag: (name, wf) for name, wf, _ in fields if wf.since <= version and wf.tag is not None}
    for _ in range(cur.uvarint()):
        tag = cur.uvarint()
        body = _Cursor(cur.take(cur.uvarint()))
        if tag in known:
            name, wf = known[tag]
            values[name] = _read_value(body, wf.type, wf.nullable, version)
            if body.pos != len(body.buf):
                raise Bad("tagged field longer than its value")
    return cls(**values)


def reference_decode(value: bytes) -> Any:
    """The record in a framed value, or Bad."""
    cur = _Cursor(value)
    if not value or cur.uvarint() != 1:
        raise Bad("no value, or not frame version 1")
    api_key, version = cur.uvarint(), cur.uvarint()
    classes = [cls for cls in RECORD_TYPES if cls.__schema__.api_key == api_key and version in versions(cls)]
    if not classes:
        raise Bad("unknown API key or version")
    record = _read_struct(cur, classes[0], version)
    if cur.pos != len(value):
        raise Bad("trailing bytes")
    return record


# ---------------------------------------------------------------- variant writer


def _uvarint(n: int, rng: random.Random) -> bytes:
    """n in 1 to 5 bytes: the shortest form, or sometimes a longer one (zero groups with the
    continuation bit), which Kafka's reader accepts too."""
    size = max(1, (n.bit_length() + 6) // 7)
    if size < 5 and rng.random() < 0.2:
        size = rng.randint(size + 1, 5)
    return bytes(((n >> (7 * i)) & 0x7F) | (0x80 if i < size - 1 else 0) for i in range(size))


def _write_value(value: Any, t: WireType, version: int, rng: random.Random) -> bytes:
    if t in _VARIABLE or isinstance(t, ArrayOf):
        if value is None:
            return _uvarint(0, rng)
        if t in _VARIABLE:
            data = value.encode() if t is STRING else value
            return _uvarint(len(data) + 1, rng) + data
        element = t.element
        if isinstance(element, type):
            items = [_write_struct(v, version, rng) for v in value]
        else:
            items = [_write_value(v, element, version, rng) for v in value]
        return _uvarint(len(value) + 1, rng) + b"".join(items)
    return struct.pack(_FORMATS[t], value)


def _write_struct(obj: Any, version: int, rng: random.Random) -> bytes:
    out = []
    entries = []
    known = set()
    for name, wf, default in obj.__schema__.fields:
        if wf.since > version:
            continue
        value = getattr(obj, name)
        if wf.tag is None:
            out.append(_write_value(value, wf.type, version, rng))
            continue
        known.add(wf.tag)
        if value != default or rng.random() < 0.3:
            entries.append((wf.tag, _write_value(value, wf.type, version, rng)))
            if rng.random() < 0.2:  # an earlier value of the same tag, which the later one replaces
                decoy = _random_value(wf.type, wf.nullable, version, rng)
                entries.insert(0, (wf.tag, _write_value(decoy, wf.type, version, rng)))
    for _ in range(rng.choice([0, 0, 1, 2])):
        tag = rng.choice([t for t in range(8) if t not in known] + [99, 1000, 2**20])
        entries.insert(rng.randint(0, len(entries)), (tag, rng.randbytes(rng.randint(0, 20))))
    out.append(_uvarint(len(entries), rng))
    for tag, body in entries:
        out += [_uvarint(tag, rng), _uvarint(len(body), rng), body]
    return b"".join(out)


def variant(record: Any, version: int, rng: random.Random) -> bytes:
    """A framed value of `record` at `version`, written with random allowed variations."""
    header = _uvarint(1, rng) + _uvarint(record.__schema__.api_key, rng) + _uvarint(version, rng)
    return header + _write_struct(record, version, rng)
