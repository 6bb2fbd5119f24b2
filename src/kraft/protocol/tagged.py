"""Decoding that tolerates tagged fields this build does not know, and that can leave
record sets in place.

kio's native reader raises KeyError on an unknown tag. Kafka's rule is that readers skip
tags they do not know (that is what makes tagged fields safe to add), so on that error we
re-read the message here, walking kio's own schema classes: known fields through kio's
readers, nested structs recursively, unknown tags skipped by their length.

With `zero_copy`, a `records` field (Fetch's records, FetchSnapshot's unaligned_records) is
a read-only view of the frame instead of a copy: a 10 MiB snapshot chunk then goes from
the socket buffer to the file without another pass through memory. The frame's buffer
must stay untouched while the views live (the connection checks that before reusing it).
"""

from dataclasses import Field, fields
from functools import cache
from typing import Any

from kio._kio_native import get_field_reader
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, is_optional
from kio.serial.readers import (
    read_compact_array_length,
    read_int8,
    read_int32,
    read_legacy_array_length,
    read_unsigned_varint,
)
from kio.static.protocol import Entity

Plan = tuple[list[tuple[Field, Any]], dict[int, tuple[Field, Any]]]


def _records_view(flexible: bool) -> Any:
    """A reader of a nullable `records` field that returns a view of the buffer."""

    def read(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
        length: int  # a compact length is one more than the count; a legacy one is an int32
        if flexible:
            length, size = read_unsigned_varint(buf, pos)
            length -= 1
        else:
            length, size = read_int32(buf, pos)
        if length < 0:
            return None, size
        if pos + size + length > len(buf):
            raise ValueError(f"records of {length} bytes run past the end of the frame")
        return buf[pos + size : pos + size + length], size + length

    return read


@cache
def _plan(cls: type[Entity], zero_copy: bool = False) -> Plan:
    """For each field, either a reader (primitives) or a marker to recurse (structs)."""
    is_header = cls.__name__ == "RequestHeader"
    plain: list[tuple[Field, Any]] = []
    tagged: dict[int, tuple[Field, Any]] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            how: Any = kind
        elif zero_copy and f.metadata.get("kafka_type") == "records":
            how = _records_view(cls.__flexible__)
        else:
            how = get_field_reader(cls, f, is_header, tag is not None)
        if tag is None:
            plain.append((f, how))
        else:
            tagged[tag] = (f, how)
    return plain, tagged


def _read_field(
    cls: type[Entity], f: Field, how: Any, buf: memoryview, pos: int, is_tag: bool, zero_copy: bool
) -> tuple[Any, int]:
    if isinstance(how, EntityTupleField):
        reader = read_compact_array_length if cls.__flexible__ else read_legacy_array_length
        n, size = reader(buf, pos)
        pos += size
        if n is None or n < 0:
            return None, pos
        items = []
        for _ in range(n):
            item, pos = read_entity(how.type_, buf, pos, zero_copy)
            items.append(item)
        return tuple(items), pos
    if isinstance(how, EntityField):
        if is_optional(f) and not is_tag:
            marker, size = read_int8(buf, pos)
            pos += size
            if marker < 0:
                return None, pos
        return read_entity(how.type_, buf, pos, zero_copy)
    value, size = how(buf, pos)
    return value, pos + size


def read_entity(cls: type[Entity], buf: memoryview, pos: int, zero_copy: bool = False) -> tuple[Any, int]:
    """Reads one `cls` at `pos`, skipping unknown tagged fields; returns it and the end position."""
    plain, tagged = _plan(cls, zero_copy)
    values: dict[str, Any] = {}
    for f, how in plain:
        values[f.name], pos = _read_field(cls, f, how, buf, pos, False, zero_copy)
    if cls.__flexible__:
        count, size = read_unsigned_varint(buf, pos)
        pos += size
        for _ in range(count):
            tag, size = read_unsigned_varint(buf, pos)
            pos += size
            length, size = read_unsigned_varint(buf, pos)
            pos += size
            if length > len(buf) - pos:
                raise ValueError(
                    f"tagged field {tag} of {length} bytes at byte {pos} runs past the end of the "
                    f"{len(buf)}-byte buffer"
                )
            if tag in tagged:
                f, how = tagged[tag]
                values[f.name], _ = _read_field(cls, f, how, buf, pos, True, zero_copy)
            pos += length
    return cls(**values), pos
