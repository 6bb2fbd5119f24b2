"""Kafka's framing: every request and response is an int32 size followed by that many bytes."""

import struct

SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


def frame(*parts: bytes | bytearray | memoryview) -> bytes:
    """Joins parts behind their total size prefix."""
    size = sum(len(p) for p in parts)
    return b"".join((SIZE.pack(size), *parts))
