"""Kafka's framing: every request and response is an int32 size followed by that many bytes; within
them, flexible versions write lengths and counts as unsigned varints."""

import struct

from kraft.varint import uvarint

SIZE = struct.Struct(">i")
_LENGTH16 = struct.Struct(">h")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


def frame(*parts: bytes | bytearray | memoryview) -> bytes:
    """Joins parts behind their total size prefix."""
    size = sum(len(p) for p in parts)
    return b"".join((SIZE.pack(size), *parts))


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string as a version writes it: compact if flexible, else an int16 length
    (-1 for null) and its UTF-8 bytes."""
    if flexible:
        return compact_string(value)
    if value is None:
        return b"\xff\xff"
    data = value.encode()
    return _LENGTH16.pack(len(data)) + data


def array_length(count: int, flexible: bool) -> bytes:
    """An array's count as a version writes it: compact (count + 1, a varint) if flexible, else an int32."""
    return uvarint(count + 1) if flexible else SIZE.pack(count)


def compact_string(value: str | None) -> bytes:
    """A compact (nullable) string: its UTF-8 length + 1 as an unsigned varint, 0 for null."""
    if value is None:
        return b"\x00"
    data = value.encode()
    return uvarint(len(data) + 1) + data
