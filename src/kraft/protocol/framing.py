"""Kafka's framing: every request and response is an int32 size followed by that many bytes."""

import asyncio
import struct

from kraft.protocol.errors import FrameTooLargeError, MalformedFrameError

SIZE = struct.Struct(">i")

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """Reads one frame; raises IncompleteReadError at a clean or torn end of stream.

    The size is checked before anything is allocated, so a hostile or garbled size prefix
    costs nothing but the connection.
    """
    (size,) = SIZE.unpack(await reader.readexactly(4))
    if size < 0:
        raise MalformedFrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLargeError(size, max_bytes)
    return await reader.readexactly(size)


def frame(*parts: bytes | bytearray | memoryview) -> bytes:
    """Joins parts behind their total size prefix."""
    size = sum(len(p) for p in parts)
    return b"".join((SIZE.pack(size), *parts))
