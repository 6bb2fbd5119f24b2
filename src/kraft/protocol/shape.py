"""Shapes: what `_shape.check` walks to prove a frame's lengths and counts fit its bytes.

kio's native reader trusts counts: it sizes an array from its count before reading one
element, so a count of 2^32-2 in a 21-byte request aborted the whole process on a 34 GB
allocation. Every frame is therefore walked in C before kio reads it (see `_shape.c`),
against a shape compiled once per kio message class from kio's own schema introspection:
each field's wire layout, nested structs, and the tagged fields the class knows. The
layouts below must be read exactly as kio reads them; tests compare the two on valid,
mutated and random frames of every request and response class kio has.
"""

import dataclasses
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag
from kio.static.protocol import Entity

from kraft.protocol._shape import Shape, ShapeError, check
from kraft.protocol.protocol_errors import MalformedFrameError

__all__ = ["Shape", "ShapeError", "checked_end", "shape"]

_FIXED_WIDTH = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}

Layout = tuple[Any, ...]


def _primitive(kafka_type: str, flexible: bool, legacy_string: bool, nullable: bool) -> Layout:
    """A primitive's layout. Nullable fixed-width types (uuid, datetime_i64) stay fixed: kio
    writes their null as a value (the zero UUID, -1)."""
    if kafka_type in _FIXED_WIDTH:
        return ("fixed", _FIXED_WIDTH[kafka_type])
    if kafka_type == "string":
        return ("clen" if flexible and not legacy_string else "len16", nullable)
    if kafka_type in ("bytes", "records"):
        return ("clen" if flexible else "len32", nullable)
    raise ValueError(f"no layout for kafka_type {kafka_type!r}")


def _nullable(f: dataclasses.Field) -> bool:
    """Whether the field itself may be None. (kio's is_optional also answers True for an
    array whose elements may be None, as BrokerRegistration's log_dirs.)"""
    return get_origin(f.type) in (UnionType, Union) and NoneType in get_args(f.type)


def _layout(cls: type[Entity], f: dataclasses.Field) -> Layout:
    """A field's layout. Null is allowed where the field's type allows None: kio reads a null
    array into a field that may not hold one, and the handler then fails on it."""
    flexible = cls.__flexible__
    kind = classify_field(f)
    nullable = _nullable(f)
    if isinstance(kind, EntityField):
        # A nullable struct has an int8 marker first, unless it is tagged (a tag is its presence).
        return ("struct", shape(kind.type_), nullable and get_field_tag(f) is None)
    if isinstance(kind, EntityTupleField):
        element: Layout = ("struct", shape(kind.type_), False)
    else:
        # Kafka's request header keeps its client id a legacy string even in flexible versions.
        legacy = cls.__name__ == "RequestHeader" and f.name == "client_id"
        if not kind.is_array:
            return _primitive(f.metadata["kafka_type"], flexible, legacy, nullable)
        element = _primitive(f.metadata["kafka_type"], flexible, legacy, False)
    return ("carray" if flexible else "array32", element, nullable)


def _merge_fixed(fields: list[tuple[str, Layout]]) -> list[tuple[str, Layout]]:
    """Runs of fixed-width fields as one step (`a..c`): a Fetch partition is then one step
    of 33 bytes instead of six."""
    merged: list[tuple[str, Layout]] = []
    for name, layout in fields:
        if merged and layout[0] == "fixed" and merged[-1][1][0] == "fixed":
            first = merged[-1][0].split("..")[0]
            merged[-1] = (f"{first}..{name}", ("fixed", merged[-1][1][1] + layout[1]))
        else:
            merged.append((name, layout))
    return merged


@cache
def shape(cls: type[Entity]) -> Shape:
    """The compiled shape of a kio message class (request, response, header or nested struct)."""
    plain: list[tuple[str, Layout]] = []
    tagged: list[tuple[int, str, Layout]] = []
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        if tag is None:
            plain.append((f.name, _layout(cls, f)))
        else:
            tagged.append((tag, f.name, _layout(cls, f)))
    return Shape(cls.__name__, cls.__flexible__, _merge_fixed(plain), tagged)


def checked_end(cls: type[Entity], buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Where a `cls` starting at `pos` ends, once every length and count in it is known to
    fit; MalformedFrameError naming the field and byte otherwise."""
    try:
        return check(shape(cls), buf, pos)
    except ShapeError as e:
        raise MalformedFrameError(e.args[1]) from None
