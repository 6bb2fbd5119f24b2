"""Kafka's framing: every request and response is an int32 size followed by that many bytes; within
them, flexible versions write lengths and counts as unsigned varints."""

import struct

from kraft.varint import uvarint

SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


def frame(*parts: bytes | bytearray | memoryview) -> bytes:
    """Joins parts behind their total size prefix."""
    size = sum(len(p) for p in parts)
    return b"".join((SIZE.pack(size), *parts))


def compact_string(value: str | None) -> bytes:
    """A compact (nullable) string: its UTF-8 length + 1 as an unsigned varint, 0 for null."""
    if value is None:
        return b"\x00"
    data = value.encode()
    return uvarint(len(data) + 1) + data
