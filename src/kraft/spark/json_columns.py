"""Kafka's JSON form of metadata records, built a column at a time with Arrow.

Kafka's generated JsonConverters (what `kafka-dump-log --cluster-metadata-decoder` prints as
a record's `data`) write a record's fields in schema order, each under its schema name with
the first letter lower-cased (`topicId`); a field the record's version does not have is
left out, and so is a tagged field that holds its default. Numbers and booleans are JSON
literals, strings are quoted, a UUID is Kafka's text form (URL-safe base64 without padding,
`kraft.metadata.uuid_str`), bytes are base64 (Jackson's BinaryNode: standard alphabet,
padded), arrays and structs nest. A float64 is written by Python's shortest repr (Java's
Double.toString chooses the same digits but writes 1.0E7 where Python writes 10000000.0: the
same number), a non-finite one as a quoted "NaN" or "Infinity", as Jackson does by default.

kraft's record classes carry Kafka's field names in snake case, in Kafka's order, so one walk
over a class's schema serves every type and version. The walk is made per *group* of records
of one type and version, not per record: each field becomes one Arrow column for the whole
group (`map(attrgetter(...))` and Arrow's converters, loops that run in C), its JSON text is
made by Arrow's string kernels (cast, escape, join), and the fields are joined element-wise.
A metadata log holds few types and millions of records; the Python work here is per field
and per group, never per record. The typed values made on the way (an int32 column, a list
column, UUIDs as text) are handed back too, for columns a reader wants typed.
"""

import base64
import binascii
import functools
import math
from itertools import accumulate, chain
from operator import attrgetter
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from kraft.metadata.kafka_form import camel_case
from kraft.metadata.schema import BOOL, BYTES, FLOAT64, STRING, UUID, ArrayOf, WireType, schema_of

Typed: TypeAlias = pa.Array | None  # a field's values as a typed column (None for arrays of structs)

_INT32_TYPES = ("int8", "int16", "int32", "uint16")
_b64 = functools.partial(binascii.b2a_base64, newline=False)


def quoted(strings: pa.Array) -> pa.Array:
    """JSON string literals of already-escaped strings; a null becomes `null`."""
    return pc.fill_null(pc.binary_join_element_wise('"', strings, '"', ""), "null")


def escaped(strings: pa.Array) -> pa.Array:
    """Strings with JSON's escapes: backslash, quote, and control characters (rare in
    metadata; the pass over the column that finds none is all they cost)."""
    strings = pc.replace_substring(pc.replace_substring(strings, "\\", "\\\\"), '"', '\\"')
    if pc.any(pc.match_substring_regex(strings, "[\\x00-\\x1f]")).as_py():
        for code in range(32):
            strings = pc.replace_substring(strings, chr(code), f"\\u{code:04x}")
    return strings


def uuid_strings(uuids: list[bytes]) -> pa.Array:
    """Kafka's text form of 16-byte UUIDs, all at once: with two zero bytes after each, every
    UUID is 18 bytes, so the base64 of the whole run is 24 characters per UUID, the first 22
    of which are that UUID's own unpadded base64 (the zeros only fill the last group)."""
    if not uuids:
        return pa.array([], pa.string())
    text = base64.urlsafe_b64encode(b"\0\0".join(uuids) + b"\0\0")
    chunks = pa.Array.from_buffers(pa.binary(24), len(uuids), [None, pa.py_buffer(text)])
    return pc.cast(pc.binary_slice(chunks, 0, 22), pa.string())


def uuid_lists(values: list) -> pa.Array:
    """Lists of UUIDs (None for a null list) as lists of Kafka's text form."""
    shape = pa.array(values, pa.list_(pa.binary(16)))
    items = uuid_strings(list(chain.from_iterable(filter(None, values))))
    return pa.ListArray.from_arrays(shape.offsets, items, mask=shape.is_null())


def bracketed(joined: pa.Array) -> pa.Array:
    """`[...]` around each joined list; a null list becomes `null`."""
    return pc.fill_null(pc.binary_join_element_wise("[", joined, "]", ""), "null")


def _floats(values: list[float]) -> pa.Array:
    texts = pa.array(list(map(float.__repr__, values)), pa.string())
    if all(map(math.isfinite, values)):
        return texts
    texts = pc.replace_substring_regex(texts, "^(-?)inf$", '"\\1Infinity"')
    return pc.replace_substring_regex(texts, "^nan$", '"NaN"')


def scalar_column(wire_type: WireType, values: list) -> tuple[pa.Array, pa.Array]:
    """(typed column, JSON texts) of one non-array field's values."""
    if wire_type is UUID:
        typed = uuid_strings(values)
        return typed, quoted(typed)
    if wire_type is STRING:
        typed = pa.array(values, pa.string())
        return typed, quoted(escaped(typed))
    if wire_type is BYTES:
        encoded = pa.array(list(map(_b64, values)), pa.binary()).cast(pa.string())
        return encoded, quoted(encoded)
    if wire_type is FLOAT64:
        return pa.array(values, pa.float64()), _floats(values)
    if wire_type is BOOL:
        typed = pa.array(values, pa.bool_())
        return typed, pc.cast(typed, pa.string())
    typed = pa.array(values, pa.int32() if wire_type.name in _INT32_TYPES else pa.int64())
    return typed, pc.cast(typed, pa.string())


def _list_texts(offsets: pa.Array, items: pa.Array, nulls: pa.Array | None) -> pa.Array:
    lists = pa.ListArray.from_arrays(offsets, items, mask=nulls)
    return bracketed(pc.binary_join(lists, ","))


def array_column(element: WireType | type, values: list, version: int) -> tuple[Typed, pa.Array]:
    """(typed list column, JSON texts) of one array field's values (None for a null array)."""
    if isinstance(element, type):  # structs: never nullable in Kafka's metadata schemas
        items = list(chain.from_iterable(values))
        offsets = pa.array(accumulate(map(len, values), initial=0), pa.int32())
        return None, _list_texts(offsets, object_texts(element, version, items)[0], None)
    if element is UUID:
        typed = uuid_lists(values)
        return typed, _list_texts(typed.offsets, quoted(typed.values), typed.is_null())
    item_typed, _ = scalar_column(element, [])
    typed = pa.array(values, pa.list_(item_typed.type))
    items = typed.values
    texts = quoted(escaped(items)) if element is STRING else pc.cast(items, pa.string())
    return typed, _list_texts(typed.offsets, texts, typed.is_null())


def field_column(wire_type: WireType, values: list, version: int) -> tuple[Typed, pa.Array]:
    """(typed column, JSON texts) of one field's values across a group of records."""
    if isinstance(wire_type, ArrayOf):
        return array_column(wire_type.element, values, version)
    return scalar_column(wire_type, values)


def _is_default(typed: pa.Array, default: object) -> pa.Array:
    """Where a tagged field holds its default (Kafka's converter then leaves it out)."""
    if default is None:
        return typed.is_null()
    if default == ():
        return pc.equal(pc.list_value_length(typed), 0)
    return pc.equal(typed, pa.scalar(default, typed.type))


def object_texts(cls: type, version: int, records: list) -> tuple[pa.Array, dict[str, Typed]]:
    """JSON objects of `records` (all `cls` at `version`), and each field's typed column by
    its kraft name (a tagged field at its default in every record has none). Every present
    field's text carries a leading comma; the joined text loses its first character, so
    absent tagged fields (empty strings) leave no trace."""
    pieces, typed_columns = [], {}
    for name, wf, default in schema_of(cls).fields:
        if wf.since > version:
            continue
        values = list(map(attrgetter(name), records))
        if wf.tag is not None and values.count(default) == len(values):
            continue  # left out of every record's JSON (most of a PartitionChangeRecord's fields)
        typed, texts = field_column(wf.type, values, version)
        typed_columns[name] = typed
        piece = pc.binary_join_element_wise(f',"{camel_case(name)}":', texts, "")
        if wf.tag is not None:
            piece = pc.if_else(_is_default(typed, default), "", piece)
        pieces.append(piece)
    if not pieces:
        return pa.repeat(pa.scalar("{}"), len(records)).cast(pa.string()), typed_columns
    body = pc.binary_join_element_wise(*pieces, "")
    return pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 1), "}", ""), typed_columns
