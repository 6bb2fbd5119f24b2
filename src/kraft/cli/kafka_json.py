"""Kafka's JSON forms of metadata and control records, as kafka-dump-log prints them.

kafka-dump-log --cluster-metadata-decoder (DumpLogSegments.ClusterMetadataLogMessageParser)
prints each metadata record as `{"type":"TOPIC_RECORD","version":0,"data":{...}}`: the
type is MetadataRecordType's name (the record class's name in upper snake case), the data
what the generated `<Record>JsonConverter.write` makes of the record. That converter
(generator/.../JsonConverterGenerator.java) writes each field under its schema name with the
first letter lower-cased, in schema order, leaves out a field the version does not have and
writes a tagged field only when it differs from its default. int8 to int64 are JSON numbers,
a UUID is Kafka's base64 text, bytes are base64 in Jackson's default variant (standard
alphabet, padded), float64 is what Java's Double.toString prints (1.048576E7, not 10485760.0;
NaN and the infinities as strings, Jackson's WRITE_NAN_AS_STRINGS). Jackson writes the tree
compactly, without escaping non-ASCII. Control records (LeaderChange, SnapshotHeader,
SnapshotFooter, KRaftVersion, Voters) are written by their own converters the same way.

kraft's record classes carry Kafka's field names in snake case and the same order, so one
walk over a record's schema makes Kafka's JSON for every type and version; a test checks the
names against Kafka's schemas.
"""

import base64
import math
import re
from typing import Any, Literal, NamedTuple

from kraft.metadata import decode_record, uuid_str
from kraft.metadata.kafka_form import camel_case, control_data, type_name
from kraft.metadata.metadata_errors import MetadataRecordError
from kraft.metadata.records import RECORD_TYPES, MetadataRecord
from kraft.metadata.schema import BYTES, FLOAT64, UUID, ArrayOf, WireType, schema_of
from kraft.records import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
)

Json = dict | list | str | int | float | bool | None

# ------------------------------------------------------------------------------ Jackson's text

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TO_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def java_double(x: float) -> str:
    """Java's Double.toString: decimal from 10^-3 up to 10^7, else d.dddE<n>; the digits are
    the shortest that read back to `x` (Java 19 on; Python's repr picks the same digits)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)  # Python writes these in decimal too, with at least one fraction digit
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # where the decimal point falls in `digits`
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    significant = significant.rstrip("0")
    sign = "-" if x < 0 else ""
    return f"{sign}{significant[0]}.{significant[1:] or '0'}E{point - 1}"


def _escape(match: re.Match) -> str:
    char = match.group()
    return _ESCAPES.get(char) or f"\\u{ord(char):04X}"


def to_json(value: Json) -> str:
    """`value` as Jackson's ObjectNode.toString writes it: compact, keys in insertion order,
    floats as Java prints doubles (non-finite ones quoted), non-ASCII characters as they are."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{to_json(k)}:{to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + _TO_ESCAPE.sub(_escape, value) + '"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = java_double(value)
        return text if math.isfinite(value) else f'"{text}"'
    return str(value)


# ------------------------------------------------------------------------------ metadata records


def _field_json(wire_type: WireType, value: Any, version: int) -> Json:
    if value is None:
        return None
    if wire_type is UUID:
        return uuid_str(value)
    if wire_type is BYTES:
        return base64.b64encode(value).decode()
    if wire_type is FLOAT64:
        return float(value)
    if isinstance(wire_type, ArrayOf):
        element = wire_type.element
        if isinstance(element, type):
            return [record_data(item, version) for item in value]
        return [_field_json(element, item, version) for item in value]
    return value


def record_data(record: Any, version: int) -> dict:
    """The `data` object of Kafka's JSON for `record` (a metadata record or one of its
    structs) at `version`."""
    out = {}
    for name, wf, default in type(record).__schema__.fields:
        if wf.since > version:
            continue
        value = getattr(record, name)
        if wf.tag is not None and value == default:
            continue
        out[camel_case(name)] = _field_json(wf.type, value, version)
    return out


def record_json(record: MetadataRecord, version: int) -> str:
    """One metadata record as kafka-dump-log --cluster-metadata-decoder prints it."""
    return to_json({"type": type_name(type(record)), "version": version, "data": record_data(record, version)})


class FrameHeader(NamedTuple):
    """The three unsigned varints MetadataRecordSerde puts before a record's fields."""

    frame_version: int
    api_key: int
    version: int


def frame_header(value: bytes) -> FrameHeader | None:
    """A framed metadata record's header; None if the value ends inside it."""
    numbers: list[int] = []
    pos = 0
    while len(numbers) < 3:
        result = shift = 0
        while True:
            if pos >= len(value) or shift > 28:
                return None
            byte = value[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        numbers.append(result)
    return FrameHeader(*numbers)


_KNOWN_VERSIONS = {schema_of(cls).api_key: schema_of(cls).versions for cls in RECORD_TYPES}


def is_newer_than_known(header: FrameHeader) -> bool:
    """Whether a record that does not decode is of a type or version this build does not know
    (written by a newer Kafka), rather than a damaged record of a known one."""
    versions = _KNOWN_VERSIONS.get(header.api_key)
    return header.frame_version == 1 and (versions is None or header.version > versions[1])


class Payload(NamedTuple):
    """What --cluster-metadata-decoder prints for one record, and what it was."""

    text: str
    kind: Literal["record", "unknown", "error"]


def metadata_payload(value: bytes | None, offset: int) -> Payload:
    """A record value in Kafka's JSON. A type or version newer than kraft knows is shown as
    JSON of type UNKNOWN with its API key, version and the whole value in base64, so a newer
    log still dumps; a value that does not decode is Kafka's own line for it
    ("Error at <offset>, skipping. <why>")."""
    header = frame_header(value or b"")
    try:
        record = decode_record(value)
    except MetadataRecordError as e:
        if value is not None and header is not None and is_newer_than_known(header):
            unknown = {"type": "UNKNOWN", "apiKey": header.api_key, "version": header.version,
                       "value": base64.b64encode(value).decode()}
            return Payload(to_json(unknown), "unknown")
        return Payload(f"Error at {offset}, skipping. {e}", "error")
    assert header is not None, "a value that decodes has a header"
    return Payload(record_json(record, header.version), "record")


# ------------------------------------------------------------------------------ control records


ControlJson = LeaderChangeMessage | SnapshotHeaderRecord | SnapshotFooterRecord | KRaftVersionRecord | VotersRecord


def control_json(message: ControlJson) -> str:
    """A control record's value as Kafka's LeaderChangeMessage-, SnapshotHeaderRecord-,
    SnapshotFooterRecord-, KRaftVersionRecord- and VotersRecordJsonConverter write it."""
    return to_json(control_data(message)[1])
