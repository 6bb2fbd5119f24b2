"""Kafka RecordBatch v2 (magic 2): header layout, the batch walker, building and decoding.

Two levels of reading, because replication and state machines need different things:

* `iter_batches` / `iter_file_batches` walk batch headers and check CRCs without decoding a
  single record. Replication, recovery and FetchSnapshot only need offsets, epochs and sizes,
  and move the bytes on untouched.
* `RecordBatch.records()` decodes records (in C, see `_codec.c`) for the state machine.

Header layout (big endian, 61 bytes), CRC32C covering `attributes` to the end of the batch:

    base_offset i64 | batch_length i32 | partition_leader_epoch i32 | magic i8 | crc u32 |
    attributes i16 | last_offset_delta i32 | base_timestamp i64 | max_timestamp i64 |
    producer_id i64 | producer_epoch i16 | base_sequence i32 | records_count i32
"""

import enum
import os
import struct
import time
from collections.abc import Iterator, Sequence
from typing import Literal, NamedTuple

from crc32c import crc32c

import kraft.records._codec as _codec
from kraft.records._codec import Record  # a decoded record: a tuple with named fields, fast to build
from kraft.records.compression import Compression, compress, decompress
from kraft.records.record_errors import CorruptRecordError, IncompleteBatchError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted in batch_length
CRC_START = 21  # offset of attributes, where the CRC's span begins
MAGIC = 2
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class SimpleRecord(NamedTuple):
    """A record to be written; its offset is assigned by its position in the batch."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


class BatchHeader(NamedTuple):
    """A batch's header as read in place, with the absolute position it was read at."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_BIT) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def parse_header(view: memoryview, pos: int, position: int) -> BatchHeader:
    """Unpacks and range-checks the header at `pos`; `position` is its absolute position in the file."""
    if len(view) - pos < HEADER_SIZE:
        raise IncompleteBatchError(position, f"{len(view) - pos} bytes left, fewer than a batch header")
    fields = HEADER.unpack_from(view, pos)
    header = BatchHeader(position, *fields)
    if header.magic != MAGIC:
        raise CorruptRecordError(position, f"magic byte is {header.magic}, expected {MAGIC}")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(position, f"batch length {header.batch_length} is below the header size")
    return header


# Batches checked per call into C: 1, 2, 4, ... up to this many. Enough to amortise the
# call, and a caller that stops early (reading a snapshot's header batch) checks at most
# twice the batches it took, not a chunk of megabyte batches it never asked for.
_WALK_CHUNK = 64


def iter_batches(
    buf: bytes | bytearray | memoryview,
    *,
    position: int = 0,
    verify_crc: bool = True,
    expected_offset: int | None = None,
    partial_tail: Literal["error", "stop"] = "error",
) -> Iterator[BatchHeader]:
    """Walks the batches in `buf` without decoding records.

    `position` is where `buf` starts in its file or stream, so errors and headers carry
    absolute positions. With `expected_offset`, each batch must start where the previous one
    ended (the only check that covers base_offset, which the CRC does not). A buffer ending
    inside a batch raises IncompleteBatchError, or ends the walk with partial_tail="stop"
    (a fetch response cut at its byte limit, or a torn tail the caller will handle). Every
    batch before a bad one is yielded first. The per-batch work is in C (`_codec.c`).
    """
    start, stop, chunk = 0, partial_tail == "stop", 1
    while True:
        headers, start, error = _codec.walk_batches(
            buf, start, chunk, verify_crc, expected_offset, stop, BatchHeader, position, None
        )
        yield from headers
        if error is not None:
            _raise_walk_error(error)
        if len(headers) < chunk:
            return
        if expected_offset is not None:
            expected_offset = headers[-1].next_offset
        chunk = min(2 * chunk, _WALK_CHUNK)


def assign_offsets(buf: bytearray | memoryview, base_offset: int, epoch: int) -> list[BatchHeader]:
    """Checks every batch in `buf` as iter_batches does and stamps, in place, consecutive
    offsets from `base_offset` and the leader `epoch`: what a leader does before appending.
    Both fields lie outside the CRC. On a bad batch it raises; batches before it are already
    stamped, so `buf` must be the caller's own copy."""
    headers, _end, error = _codec.walk_batches(buf, 0, len(buf), True, base_offset, False, BatchHeader, 0, epoch)
    if error is not None:
        _raise_walk_error(error)
    return headers


def _raise_walk_error(error: tuple[bool, int, str]) -> None:
    incomplete, at, reason = error
    raise (IncompleteBatchError if incomplete else CorruptRecordError)(at, reason)


def iter_file_batches(
    fd: int,
    start: int = 0,
    end: int | None = None,
    *,
    verify_crc: bool = True,
    expected_offset: int | None = None,
    partial_tail: Literal["error", "stop"] = "error",
    chunk_size: int = 4 << 20,
) -> Iterator[BatchHeader]:
    """Walks the batches of a file region [start, end) through one reusable buffer.

    Reads with preadv into the same buffer, so a scan of a large segment allocates nothing
    per batch and never holds more than one chunk (or one batch, if a batch is larger).
    Errors and `partial_tail` are as in iter_batches; a batch whose length field runs past
    `end` is a partial tail, found from its header before any buffer that size is allocated.
    """
    if end is None:
        end = os.fstat(fd).st_size
    buf = bytearray(chunk_size)
    pos = start
    while pos < end:
        want = min(len(buf), end - pos)
        got = os.preadv(fd, [memoryview(buf)[:want]], pos)
        view = memoryview(buf)[:got]
        consumed = 0
        for header in iter_batches(
            view, position=pos, verify_crc=verify_crc, expected_offset=expected_offset, partial_tail="stop"
        ):
            consumed = header.position + header.size - pos
            if expected_offset is not None:
                expected_offset = header.next_offset
            yield header
        view.release()
        if consumed:
            pos += consumed
            continue
        # No whole batch in the window: a batch larger than the buffer, or a partial tail.
        # A size past the region's end is a torn tail or a corrupt length: either way it is
        # reported from the header, before a buffer of that size is allocated.
        reason = f"data ends {got} bytes into a batch"
        if got >= HEADER_SIZE:
            batch_size = parse_header(memoryview(buf), 0, pos).size
            if batch_size > end - pos:
                reason = f"batch of {batch_size} bytes but only {end - pos} bytes left in the region"
            elif batch_size > len(buf):
                buf = bytearray(batch_size)
                continue
        if partial_tail == "stop":
            return
        raise IncompleteBatchError(pos, reason)


class RecordBatch:
    """A whole batch: its header plus the bytes, decodable into records."""

    __slots__ = ("header", "data")

    def __init__(self, header: BatchHeader, data: bytes | memoryview) -> None:
        self.header = header
        self.data = data

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(offsets={h.base_offset}..{h.last_offset}, epoch={h.partition_leader_epoch}, "
            f"count={h.records_count}, size={h.size}, control={h.is_control})"
        )

    def records(self) -> list[Record]:
        """Decodes every record; any inconsistency raises CorruptRecordError at its position."""
        h = self.header
        body: bytes | memoryview = self.data[HEADER_SIZE : h.size]
        if h.compression != Compression.NONE:
            try:
                body = decompress(h.compression, body)
            except ValueError as e:
                raise CorruptRecordError(h.position, str(e)) from None
        log_append = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        try:
            return _codec.decode_records(
                body, h.base_offset, h.last_offset_delta, h.base_timestamp, h.records_count, log_append
            )
        except ValueError as e:
            reason, rel = e.args
            if rel is None:  # the header's fields contradict each other
                raise CorruptRecordError(h.position, reason) from None
            if h.compression == Compression.NONE:
                raise CorruptRecordError(h.position + HEADER_SIZE + rel, reason) from None
            raise CorruptRecordError(h.position, f"{reason} (at byte {rel} of the decompressed records)") from None


def read_batches(
    buf: bytes | bytearray | memoryview, *, position: int = 0, expected_offset: int | None = None
) -> Iterator[RecordBatch]:
    """Walks `buf` (CRC-checked) and yields each batch ready to decode, sharing `buf`'s memory."""
    view = memoryview(buf)
    for header in iter_batches(view, position=position, expected_offset=expected_offset):
        rel = header.position - position
        yield RecordBatch(header, view[rel : rel + header.size])


def build_batch(
    records: Sequence[SimpleRecord | tuple],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: Compression = Compression.NONE,
    timestamp: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    control: bool = False,
    transactional: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytearray:
    """Encodes one batch. Records are (key, value[, headers[, timestamp]]) tuples.

    A bytearray, so a leader's log can stamp offsets and its epoch into it without a copy.

    Records without a timestamp get `timestamp` (default: now). With LOG_APPEND_TIME,
    `timestamp` is the append time and becomes the batch's max timestamp, which readers
    report for every record.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    now = int(time.time() * 1000) if timestamp is None else timestamp
    first = records[0]
    base_timestamp = first[3] if len(first) == 4 and first[3] is not None else now
    body, max_timestamp = _codec.encode_records(records, base_timestamp, now)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_timestamp = now
    body = compress(compression, body)
    attributes = int(compression) | (timestamp_type << 3)
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    fields = (
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return _sealed(base_offset, partition_leader_epoch, fields, body)


def _sealed(base_offset: int, partition_leader_epoch: int, fields: tuple[int, ...], body: bytes) -> bytearray:
    """Header and `body` as one batch: its length and CRC worked out; `fields` are the
    header's from attributes to the record count."""
    tail = HEADER.pack(0, 0, 0, 0, 0, *fields)[CRC_START:]
    crc = crc32c(body, crc32c(tail))
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    batch = bytearray(HEADER.pack(base_offset, length, partition_leader_epoch, MAGIC, crc, *fields))
    batch += body
    return batch


def with_values(batch: RecordBatch, values: Sequence[bytes | None]) -> bytearray:
    """`batch` with each record's value replaced by `values` (in order) and everything else
    kept: offsets, timestamps, keys, headers, the leader epoch, the producer fields, the
    attributes (records compressed again as they were). Its length and CRC follow the new
    bytes, so any reader validates it. A batch whose offsets are not consecutive from its
    base (no writer of kraft's or Kafka's metadata log makes one) is a ValueError."""
    h = batch.header
    records = batch.records()
    if len(values) != len(records):
        raise ValueError(f"{len(values)} values for a batch of {len(records)} records")
    if any(r.offset != h.base_offset + i for i, r in enumerate(records)):
        raise ValueError(f"the batch at offset {h.base_offset} has gaps in its offsets: they cannot be kept")
    body, _ = _codec.encode_records([(r.key, v, r.headers, r.timestamp) for r, v in zip(records, values)],
                                    h.base_timestamp, h.base_timestamp)
    fields = (h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
              h.base_sequence, h.records_count)
    return _sealed(h.base_offset, h.partition_leader_epoch, fields, compress(h.compression, body))


def crc_is_valid(batch: bytes | bytearray | memoryview, position: int = 0) -> bool:
    """Whether the stored CRC of the batch at the start of `batch` matches its bytes (for
    tools that report, not stop). `position` is where it lies in its file, for errors: a
    buffer shorter than the batch it starts is an IncompleteBatchError, not a False."""
    view = memoryview(batch)
    header = parse_header(view, 0, position)
    if len(view) < header.size:
        raise IncompleteBatchError(position, f"batch of {header.size} bytes but only {len(view)} bytes given")
    return crc32c(view[CRC_START : header.size]) == header.crc
