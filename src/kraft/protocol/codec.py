"""Request and response encoding on top of kio's generated message classes.

Which header a message uses follows Kafka's rules, which kio records per class: requests in
flexible versions use request header v2 (tagged fields), others v1; responses in flexible
versions use response header v1, except ApiVersions, whose response header is always v0 so
that a client can read it before it knows which versions the server speaks.
"""

import io
import struct
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

from kraft.protocol import fetch_request
from kraft.protocol.framing import frame
from kraft.protocol.protocol_errors import MalformedFrameError, UnsupportedVersionError
from kraft.protocol.shape import ShapeError, check, shape
from kraft.protocol.tagged import read_entity

_KEY_AND_VERSION = struct.Struct(">hh")
_REQUEST_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id's length
FETCH = 1


def api_name(api_key: int) -> str:
    """Kafka's name for an API key, for logs and errors (`fetch_snapshot`)."""
    return api_key_map.get(api_key, f"unknown({api_key})")


@cache
def request_class(api_key: int, version: int) -> type[RequestPayload]:
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        raise UnsupportedVersionError(api_key, version, f" ({api_name(api_key)} has no such schema)") from None


@cache
def response_class(api_key: int, version: int) -> type[ResponsePayload]:
    try:
        return load_response_schema(api_key, version)
    except KioIndexError:
        raise UnsupportedVersionError(api_key, version, f" ({api_name(api_key)} has no such schema)") from None


def decode(
    cls: type[Entity], buf: bytes | memoryview, pos: int = 0, zero_copy: bool = False
) -> tuple[Any, int]:
    """Reads a `cls` at `pos`; returns it and the end position.

    First the shape check (kraft.protocol.shape): no count or length may claim more than
    the bytes that follow it, since kio's reader allocates by them. Then kio's native
    reader; if it meets a tagged field it does not know, the tolerant reader, which skips
    it. With `zero_copy`, the tolerant reader at once, leaving record sets in place (see
    kraft.protocol.tagged). Anything that goes wrong is a MalformedFrameError.
    """
    try:
        check(shape(cls), buf, pos)
        if not zero_copy:
            value, size = entity_reader(cls)(buf, pos)
            return value, pos + size
    except ShapeError as e:
        raise MalformedFrameError(e.args[1]) from None
    except KeyError as e:
        if "tagged field" not in str(e):
            raise MalformedFrameError(f"{cls.__name__}: {e}") from None
    except Exception as e:  # kio raises a mix of ValueError, DecodeError, UnicodeError...
        raise MalformedFrameError(f"{cls.__name__} does not parse: {e}") from None
    try:
        return read_entity(cls, memoryview(buf), pos, zero_copy)
    except Exception as e:
        raise MalformedFrameError(f"{cls.__name__} does not parse: {e}") from None


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def peek_api(frame_body: bytes | memoryview) -> tuple[int, int]:
    """The (api_key, api_version) every request header starts with."""
    if len(frame_body) < _KEY_AND_VERSION.size:
        raise MalformedFrameError(f"frame of {len(frame_body)} bytes is too short for a request header")
    return _KEY_AND_VERSION.unpack_from(frame_body)


def decode_request(frame_body: bytes | memoryview) -> tuple[Any, Any]:
    """Parses a request frame (without its size prefix) into (header, request).

    Raises UnsupportedVersionError for an API key or version with no schema, and
    MalformedFrameError when the bytes do not parse. Bytes after the request are ignored,
    as Kafka's broker ignores them (AbstractRequest.parseRequest reads the message and
    never looks at what remains): confluent-kafka's admin client sends Metadata v13 with
    three bytes over.
    """
    api_key, version = peek_api(frame_body)
    cls = request_class(api_key, version)
    try:
        header, pos = decode(cls.__header_schema__, frame_body)
        request, _ = decode(cls, frame_body, pos)
    except MalformedFrameError as e:
        raise MalformedFrameError(f"{api_name(api_key)} v{version} request: {e}") from None
    return header, request


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A whole response frame: size, the header this response version uses, body."""
    header_cls = type(response).__header_schema__
    return frame(encode(header_cls(correlation_id=correlation_id)), encode(response))


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None, flexible: bool) -> bytes:
    """Request header v1, or v2 (`flexible`: with tagged fields), as bytes: kio's writer took 4 us
    of entity and BytesIO for these dozen bytes. The client id is a nullable string with an
    int16 length in both, never compact (Kafka's RequestHeader.json)."""
    tags = b"\x00" if flexible else b""
    if client_id is None:
        return _REQUEST_HEADER.pack(api_key, version, correlation_id, -1) + tags
    data = client_id.encode()
    return _REQUEST_HEADER.pack(api_key, version, correlation_id, len(data)) + data + tags


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame, for clients and peer connections: a Fetch of the versions a
    follower sends written by hand (fetch_request.py), any other body through kio."""
    cls = type(request)
    key, version = cls.__api_key__, cls.__version__
    head = request_header(key, version, correlation_id, client_id, cls.__header_schema__.__flexible__)
    if key == FETCH and fetch_request.FIRST_VERSION <= version <= fetch_request.LAST_VERSION:
        return frame(head, fetch_request.encode(request))
    return frame(head, encode(request))


def decode_response(frame_body: bytes | memoryview, response_cls: type[ResponsePayload], zero_copy: bool = False) -> tuple[int, Any]:
    """Parses a response frame (without size prefix) into (correlation_id, response). With
    `zero_copy`, record sets are views of `frame_body` (see kraft.protocol.tagged). A peer's
    response is checked as a request is: a hostile peer must not crash the node either."""
    header, pos = decode(response_cls.__header_schema__, frame_body)
    response, pos = decode(response_cls, frame_body, pos, zero_copy)
    if pos != len(frame_body):
        raise MalformedFrameError(f"{response_cls.__name__}: {len(frame_body) - pos} bytes left over")
    return header.correlation_id, response
