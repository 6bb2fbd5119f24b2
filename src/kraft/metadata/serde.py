"""Kafka's metadata record framing (MetadataRecordSerde): how a record becomes a log value.

    frame version (unsigned varint, 1) | API key (unsigned varint) | version (unsigned varint) | body

One metadata record is one Kafka record, carried in the value with a null key. A value
whose frame version, API key or version this build does not know, or that is cut short or
has bytes left over, raises MetadataRecordError saying which. A record with a field its
type cannot hold raises RecordEncodeError naming the record and the field.
"""

import struct

from kraft.metadata.errors import MetadataRecordError, RecordEncodeError
from kraft.metadata.records import RECORD_TYPES, MetadataRecord
from kraft.metadata.schema import Reader, Schema, read_uvarint, uvarint

FRAME_VERSION = 1

_BY_KEY: dict[int, Schema] = {cls.__schema__.api_key: cls.__schema__ for cls in RECORD_TYPES}
_HEADERS: dict[tuple[int, int], bytes] = {}


def _reader(api_key: int, version: int) -> Reader:
    schema = _BY_KEY.get(api_key)
    if schema is None:
        raise MetadataRecordError(f"unknown metadata record API key {api_key}")
    low, high = schema.versions
    if not low <= version <= high:
        raise MetadataRecordError(
            f"{schema.cls.__name__} version {version} is not supported (this build reads {low}-{high})"
        )
    return schema.reader(version)


_READERS: dict[bytes, Reader] = {
    bytes([FRAME_VERSION, key, version]): schema.reader(version)
    for key, schema in _BY_KEY.items()
    for version in range(schema.versions[0], schema.versions[1] + 1)
}


def encode_record(record: MetadataRecord, version: int | None = None) -> bytes:
    """The framed value of `record`, at `version` (default: the lowest, which kraft writes)."""
    schema: Schema = type(record).__schema__  # type: ignore[attr-defined]
    if version is None:
        version = schema.versions[0]
    header = _HEADERS.get((schema.api_key, version))
    if header is None:
        header = uvarint(FRAME_VERSION) + uvarint(schema.api_key) + uvarint(version)
        _HEADERS[(schema.api_key, version)] = header
    out = [header]
    try:
        schema.writer(version)(record, out)
    except (struct.error, ValueError, TypeError) as e:
        bad = schema.field_error(record, version)
        raise RecordEncodeError(f"{type(record).__name__}.{bad}" if bad else f"{type(record).__name__}: {e}") from None
    return b"".join(out)


def decode_record(value: bytes | None) -> MetadataRecord:
    """Decodes one framed metadata record value."""
    if not value:
        raise MetadataRecordError("metadata record without a value")
    try:
        read = _READERS.get(value[:3])  # the usual header: three one-byte varints
        if read is not None:
            record, pos = read(value, 3)
        else:
            frame, pos = read_uvarint(value, 0)
            if frame != FRAME_VERSION:
                raise MetadataRecordError(f"unknown metadata record frame version {frame}")
            api_key, pos = read_uvarint(value, pos)
            version, pos = read_uvarint(value, pos)
            record, pos = _reader(api_key, version)(value, pos)
    except (IndexError, struct.error) as e:
        raise MetadataRecordError(f"metadata record value of {len(value)} bytes ends early ({e})") from None
    except ValueError as e:  # includes UnicodeDecodeError
        raise MetadataRecordError(f"metadata record value does not decode: {e}") from None
    if pos != len(value):
        raise MetadataRecordError(f"{type(record).__name__} has {len(value) - pos} trailing bytes")
    return record
