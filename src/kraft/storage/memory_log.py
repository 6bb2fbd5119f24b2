"""The in-memory replicated log for the simulator.

Same contract as FileLog, including its durability model: what a `flush()` covered
survives `simulate_crash()`, and nothing else does; truncation and start-offset moves are
durable at once (FileLog fsyncs them).
"""

from bisect import bisect_right

from kraft.records import BatchHeader
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.log import DEFAULT_MAX_BATCH_BYTES, ReplicatedLog
from kraft.storage.types import LogReadInfo


class MemoryLog(ReplicatedLog):
    def __init__(self, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> None:
        super().__init__(LeaderEpochCache(), max_batch_bytes)
        self._data = bytearray()
        # Per batch: base offset, next offset, start position in _data.
        self._bases: list[int] = []
        self._nexts: list[int] = []
        self._positions: list[int] = []
        self._start = 0
        self._empty_end = 0  # the log end when it holds no batch
        self._flushed = 0
        self._generation = 0  # bumped by every truncation, so a flush that raced one covers nothing

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._nexts[-1] if self._nexts else self._empty_end

    @property
    def last_flushed_offset(self) -> int:
        return self._flushed

    @property
    def generation(self) -> int:
        """Changes whenever records are removed from the end (truncation), never on appends."""
        return self._generation

    @property
    def size_in_bytes(self) -> int:
        return len(self._data) - (self._positions[0] if self._positions else 0)

    def _bytes_from(self, offset: int) -> int:
        return len(self._data) - self._positions[self._index(offset)]

    def _write(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        base = len(self._data)
        first = headers[0].position
        self._data += data
        for h in headers:
            self._bases.append(h.base_offset)
            self._nexts.append(h.next_offset)
            self._positions.append(base + h.position - first)

    def flush(self) -> int:
        self._flushed = self.end_offset
        return self._flushed

    def begin_flush(self) -> tuple[int, int]:
        """Starts an fsync that takes time (the simulator's disk): it covers what is in the
        log now, not what is appended while it runs."""
        return self._generation, self.end_offset

    def complete_flush(self, token: tuple[int, int]) -> int:
        generation, end = token
        if generation == self._generation:
            self._flushed = max(self._flushed, min(end, self.end_offset))
        return self._flushed

    def simulate_crash(self) -> None:
        """A kill -9 of the process and the machine: everything not flushed is gone."""
        self.truncate_to(max(self._flushed, self._start))

    def _index(self, offset: int) -> int:
        """Index of the batch holding `offset`."""
        return bisect_right(self._bases, offset) - 1

    def _truncate(self, offset: int) -> None:
        self._generation += 1
        i = bisect_right(self._nexts, offset)  # the first batch reaching past offset
        if i < len(self._bases):
            if i == 0:
                self._empty_end = self._bases[0]
            del self._data[self._positions[i] :]
            del self._bases[i:], self._nexts[i:], self._positions[i:]
        self._flushed = min(self._flushed, self.end_offset)

    def _restart_at(self, offset: int) -> None:
        self._generation += 1
        self._data = bytearray()
        self._bases, self._nexts, self._positions = [], [], []
        self._start = self._empty_end = self._flushed = offset

    def _advance_start_offset(self, offset: int) -> None:
        self._start = offset
        keep = bisect_right(self._nexts, offset)  # batches ending at or before offset go
        if keep == len(self._bases):
            self._empty_end = self.end_offset
        if keep:
            cut = self._positions[keep] if keep < len(self._positions) else len(self._data)
            del self._data[:cut]
            del self._bases[:keep], self._nexts[:keep], self._positions[:keep]
            self._positions = [p - cut for p in self._positions]

    def _read(self, start_offset: int, max_bytes: int, limit: int) -> LogReadInfo:
        if start_offset >= limit or not self._bases:
            return LogReadInfo(b"", start_offset, start_offset)
        first = self._index(start_offset)
        if self._nexts[first] > limit:
            return LogReadInfo(b"", start_offset, start_offset)
        last = first
        start = self._positions[first]
        while last + 1 < len(self._bases) and self._nexts[last + 1] <= limit:
            end = self._positions[last + 2] if last + 2 < len(self._positions) else len(self._data)
            if end - start > max_bytes:
                break
            last += 1
        end = self._positions[last + 1] if last + 1 < len(self._positions) else len(self._data)
        # One copy, not two (a bytearray slice, then bytes of it). The bytes must be a copy:
        # the buffer is resized by later appends and truncations, which an export would forbid.
        with memoryview(self._data) as view:
            data = bytes(view[start:end])
        return LogReadInfo(data, self._bases[first], self._nexts[last])
