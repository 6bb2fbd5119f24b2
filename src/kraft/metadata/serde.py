"""Kafka's metadata record framing (MetadataRecordSerde): how a record becomes a log value.

    frame version (unsigned varint, 1) | API key (unsigned varint) | version (unsigned varint) | body

One metadata record is one Kafka record, carried in the value with a null key. A value
whose frame version, API key or version this build does not know, or that is cut short or
has bytes left over, raises MetadataRecordError saying which. A record with a field its
type cannot hold raises RecordEncodeError naming the record and the field.
"""

import struct
from collections.abc import Callable

import kraft.metadata._fields as _fields
from kraft.metadata.metadata_errors import MetadataRecordError, RecordEncodeError
from kraft.metadata.records import RECORD_TYPES, MetadataRecord
from kraft.metadata.schema import Schema, schema_of, uvarint

FRAME_VERSION = 1

_HEADERS: dict[tuple[int, int], bytes] = {}


def _schema_and_key(cls: type) -> tuple[Schema, int]:
    schema = schema_of(cls)
    if schema.api_key is None:
        raise TypeError(f"{cls.__name__} is declared as a record type without an API key")
    return schema, schema.api_key


# Every record type's schema and API key, by class: what encode_record looks up per record.
_SCHEMAS = {cls: _schema_and_key(cls) for cls in RECORD_TYPES}


def _read_plans(schema: Schema, api_key: int, name: str) -> tuple[int, str, int, int, tuple[_fields.Plan, ...]]:
    """What the Decoder needs of a record type: API key, name, versions and a plan for each."""
    low, high = schema.versions
    return api_key, name, low, high, tuple(schema.plan(v) for v in range(low, high + 1))


_DECODER = _fields.Decoder(
    MetadataRecordError,
    FRAME_VERSION,
    [_read_plans(schema, api_key, cls.__name__) for cls, (schema, api_key) in _SCHEMAS.items()],
)

def encode_record(record: MetadataRecord, version: int | None = None) -> bytes:
    """The framed value of `record`, at `version` (default: the lowest that holds it, which
    is what kraft writes)."""
    schema, api_key = _SCHEMAS[type(record)]
    if version is None:
        version = schema.version_for(record)
    header = _HEADERS.get((api_key, version))
    if header is None:
        header = uvarint(FRAME_VERSION) + uvarint(api_key) + uvarint(version)
        _HEADERS[(api_key, version)] = header
    out = [header]
    try:
        schema.writer(version)(record, out)
    except (struct.error, ValueError, TypeError) as e:
        bad = schema.field_error(record, version)
        raise RecordEncodeError(f"{type(record).__name__}.{bad}" if bad else f"{type(record).__name__}: {e}") from None
    return b"".join(out)


decode_record: Callable[[bytes | None], MetadataRecord] = _DECODER.decode
"""Decodes one framed metadata record value (bytes-like). A value that is missing, cut short,
malformed or followed by trailing bytes, or whose frame version, API key or version this
build does not know, raises MetadataRecordError naming the record type, field and byte.
It is the C reader's method itself, not a wrapper: every replica calls it per record."""
