"""Batches with chosen header fields or record offset deltas under a CRC that still matches:
what a writer's bug (not a flipped bit, which the CRC catches) would produce. They exercise
the decoder's own checks."""

import struct

from crc32c import crc32c

from kraft.records import HEADER_SIZE, build_batch
from kraft.records.batch import CRC_START

LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
RECORDS_COUNT_AT = 57


def restamp_crc(buf: bytearray) -> bytes:
    """The batch with its CRC recomputed over whatever its bytes now are."""
    struct.pack_into(">I", buf, 17, crc32c(buf[CRC_START:]))
    return bytes(buf)


def with_offset_deltas(deltas: list[int], *, base_offset: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A batch of len(deltas) records whose offset deltas are `deltas` (each below 64, so one
    varint byte, as the builder's own), optionally with another last offset delta."""
    n = len(deltas)
    buf = bytearray(build_batch([(None, b"v")] * n, base_offset=base_offset, timestamp=0))
    size = (len(buf) - HEADER_SIZE) // n  # the records are alike, so all the same size
    for i, delta in enumerate(deltas):
        at = HEADER_SIZE + i * size + 3  # after the length, attributes and timestamp delta
        assert buf[at] == 2 * i, "the builder's own delta (zigzag) is where expected"
        buf[at] = 2 * delta
    if last_offset_delta is not None:
        struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, last_offset_delta)
    return restamp_crc(buf)
