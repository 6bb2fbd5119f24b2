"""One log segment: `%020d.log` holding batches, and its sparse `%020d.index`.

The index is Kafka's: 8-byte entries (offset relative to the segment's base offset, int32;
file position, int32), one every `index_interval_bytes` of log data, each naming a batch's
last offset and the position where that batch starts. A lookup finds the nearest entry
below the target and walks batch headers from there, so finding any offset reads a few
headers, however large the segment.

The index is a cache of the log file: it is not fsynced, and recovery rebuilds it from
the log when it is missing, torn or disagrees.
"""

import logging
import os
import struct
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from kraft.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header
from kraft.storage import fsutil
from kraft.storage.types import SharedFd

log = logging.getLogger("kraft.storage")

INDEX_ENTRY = struct.Struct(">ii")
DEFAULT_INDEX_INTERVAL_BYTES = 4096


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def index_name(base_offset: int) -> str:
    return f"{base_offset:020d}.index"


@dataclass
class Span:
    """Batches found in a segment: [position, position + length) covering [first_offset, next_offset)."""

    position: int
    length: int
    first_offset: int
    next_offset: int


class Segment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        created_ms: int,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset)
        self.index_path = directory / index_name(base_offset)
        with fsutil.disk("open", self.path):
            self.file = SharedFd(os.open(self.path, os.O_RDWR | os.O_CREAT, fsutil.PRIVATE_FILE))
        self.size = 0
        self.next_offset = base_offset
        self.created_ms = created_ms
        # Appends counted as they happen, and the count the last fsync covered. A flush runs
        # on another thread while appends go on: a flag cleared after the fsync would also
        # clear an append made during it, which the next flush would then skip.
        self.appends = 0
        self._synced_appends = 0
        self.index_interval_bytes = index_interval_bytes
        self._index_offsets = array("q")
        self._index_positions = array("q")
        self._bytes_since_index = 0
        self._index_written = 0  # entries already in the index file; the rest are pending
        # Every batch from the last indexed one to the end, (base offset, position): the batches
        # readers want most (a follower's next Fetch, the commits to hand to the state machine)
        # are found without reading a header. At most index_interval_bytes of batches.
        self._tail_bases = array("q")
        self._tail_positions = array("q")
        with fsutil.disk("open", self.index_path):
            self._index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT, fsutil.PRIVATE_FILE)

    # ---------------------------------------------------------------- recovery support

    def load_scanned(self, headers: list[BatchHeader], size: int) -> None:
        """Adopts the batches a recovery scan found valid in [0, size) and rebuilds the index."""
        self.size = size
        self.next_offset = headers[-1].next_offset if headers else self.base_offset
        self._index_offsets = array("q")
        self._index_positions = array("q")
        self._bytes_since_index = 0
        del self._tail_bases[:], self._tail_positions[:]
        self._index(headers, 0)
        stored = self._read_index_file()
        if stored != self._index_bytes():
            if stored:
                log.info("%s: index disagrees with the log; rebuilt from the log", self.index_path.name)
            self._write_index_file()

    def _read_index_file(self) -> bytes:
        size = os.fstat(self._index_fd).st_size
        return os.pread(self._index_fd, size, 0)

    def _index_bytes(self) -> bytes:
        return b"".join(
            INDEX_ENTRY.pack(o - self.base_offset, p) for o, p in zip(self._index_offsets, self._index_positions)
        )

    def _write_index_file(self) -> None:
        data = self._index_bytes()
        fsutil.ftruncate(self._index_fd, 0, self.index_path)
        fsutil.pwrite_all(self._index_fd, data, 0, self.index_path)
        self._index_written = len(self._index_offsets)

    def write_pending_index(self) -> None:
        """Writes index entries added since the last write. The index is a cache that
        recovery rebuilds, so it is written in bulk rather than once per batch."""
        n = len(self._index_offsets)
        if n > self._index_written:
            start = self._index_written
            data = b"".join(
                INDEX_ENTRY.pack(self._index_offsets[i] - self.base_offset, self._index_positions[i])
                for i in range(start, n)
            )
            fsutil.pwrite_all(self._index_fd, data, start * INDEX_ENTRY.size, self.index_path)
            self._index_written = n

    # ---------------------------------------------------------------- writes

    def _index(self, headers: list[BatchHeader], shift: int) -> None:
        """Kafka's rule: an entry once more than index_interval_bytes were appended since the
        last, naming a batch's last offset and where it starts (its position + `shift`)."""
        since, interval = self._bytes_since_index, self.index_interval_bytes
        offsets, positions = self._index_offsets, self._index_positions
        tail_bases, tail_positions = self._tail_bases, self._tail_positions
        for h in headers:
            position = h.position + shift
            if since > interval or not offsets:
                offsets.append(h.base_offset + h.last_offset_delta)
                positions.append(position)
                since = 0
                del tail_bases[:], tail_positions[:]
            tail_bases.append(h.base_offset)
            tail_positions.append(position)
            since += h.batch_length + LOG_OVERHEAD
        self._bytes_since_index = since

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Appends validated batches; `headers` carry positions within `data`."""
        base = self.size
        fsutil.pwrite_all(self.file.fd, data, base, self.path)
        self.appends += 1  # counted before the new end is visible, so a flush that sees it fsyncs
        self._index(headers, base - headers[0].position)
        if len(self._index_offsets) - self._index_written >= 256:
            self.write_pending_index()
        self.size = base + len(data)
        last = headers[-1]
        self.next_offset = last.base_offset + last.last_offset_delta + 1

    def flush(self) -> None:
        """fsyncs every append made before the call (and perhaps some made during it)."""
        seen = self.appends
        if seen != self._synced_appends:
            fsutil.fsync(self.file.fd, self.path)
            self._synced_appends = seen

    def truncate(self, offset: int) -> None:
        """Cuts the segment at the start of the batch holding `offset`; fsynced."""
        span = self.locate(offset)
        position = span.position if span else self.size
        offset = span.first_offset if span else self.next_offset
        fsutil.ftruncate(self.file.fd, position, self.path)
        fsutil.fsync(self.file.fd, self.path)
        keep = bisect_right(self._index_positions, position - 1)
        del self._index_offsets[keep:], self._index_positions[keep:]
        keep = bisect_right(self._tail_positions, position - 1)  # the batches before the cut stay the tail
        del self._tail_bases[keep:], self._tail_positions[keep:]
        self._write_index_file()
        self._bytes_since_index = position - (self._index_positions[-1] if self._index_positions else 0)
        self.size = position
        self.next_offset = offset

    # ---------------------------------------------------------------- reads

    def header_at(self, position: int) -> BatchHeader:
        return parse_header(memoryview(os.pread(self.file.fd, HEADER_SIZE, position)), 0, position)

    def locate(self, offset: int) -> Span | None:
        """The batch holding `offset`, found from the index and a short header walk."""
        if not self.base_offset <= offset < self.next_offset:
            return None
        tail = self._tail_bases
        if tail and offset >= tail[0]:
            j = bisect_right(tail, offset) - 1
            last = j + 1 == len(tail)
            position = self._tail_positions[j]
            end = self.size if last else self._tail_positions[j + 1]
            return Span(position, end - position, tail[j], self.next_offset if last else tail[j + 1])
        i = bisect_right(self._index_offsets, offset) - 1
        position = self._index_positions[i] if i >= 0 else 0
        while position < self.size:
            h = self.header_at(position)
            if h.next_offset > offset:
                return Span(position, h.size, h.base_offset, h.next_offset)
            position += h.size
        raise AssertionError(f"{self.path}: offset {offset} below next offset {self.next_offset} not found")

    def read(self, start_offset: int, max_bytes: int, limit: int) -> Span | None:
        """Whole batches from the one holding start_offset: always that one, then more while
        they fit in max_bytes, and none whose next offset passes `limit`."""
        first = self.locate(start_offset)
        if first is None or first.next_offset > limit:
            return None
        stop, stop_offset = self.size, self.next_offset
        if limit < self.next_offset:
            excluded = self.locate(limit)  # the batch holding `limit` reaches past it
            assert excluded is not None
            stop, stop_offset = excluded.position, excluded.first_offset
        budget_end = first.position + max(max_bytes, first.length)
        if budget_end >= stop:
            return Span(first.position, stop - first.position, first.first_offset, stop_offset)
        # The last batch ending within the budget: walk from the index entry just before it.
        i = bisect_right(self._index_positions, budget_end) - 1
        position = max(first.position, self._index_positions[i] if i >= 0 else 0)
        h = self.header_at(position)
        while position + h.size <= budget_end:
            position += h.size
            h = self.header_at(position)  # position <= budget_end < stop: a batch starts here
        return Span(first.position, position - first.position, first.first_offset, h.base_offset)

    # ---------------------------------------------------------------- lifecycle

    def close(self, write_index: bool = True) -> None:
        if write_index:
            self.write_pending_index()
        os.close(self._index_fd)
        self._index_fd = -1

    def delete(self) -> None:
        """Unlinks both files; readers holding a region keep reading through the open descriptor."""
        os.close(self._index_fd)
        for path in (self.path, self.index_path):
            fsutil.unlink(path, missing_ok=True)
