"""The in-memory replicated log for the simulator.

Same contract as FileLog, including its durability model: what a `flush()` covered
survives `simulate_crash()`; truncation and start-offset moves are durable at once
(FileLog fsyncs them). By default a crash loses everything unflushed; the simulator can
also have it keep some of the unflushed batches, tear the next one, or flip a byte of
flushed data, and then `recover()` does what opening a FileLog does: every batch is
walked with its CRC, offsets and epoch checked, a torn tail above the recovery point is
cut, and damage below it is refused with CorruptLogError. The epoch cache is memory that
no fault touches: it is only cut where the log now ends.
"""

from bisect import bisect_left, bisect_right

from kraft.records import BatchHeader, CorruptRecordError, iter_batches
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.log import DEFAULT_MAX_BATCH_BYTES, ReplicatedLog
from kraft.storage.storage_errors import CorruptLogError
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
        self._torn = b""  # what a crash left of a batch it tore, after the last whole one

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

    def unflushed_batch_sizes(self) -> list[int]:
        """The sizes of the batches above last_flushed_offset: what a crash may keep or tear."""
        first = bisect_left(self._bases, max(self._flushed, self._start))
        ends = self._positions[first + 1 :] + [len(self._data)]
        return [end - begin for begin, end in zip(self._positions[first:], ends)]

    @property
    def flushed_bytes(self) -> int:
        """How many bytes of the log lie below last_flushed_offset (the data bit rot can hit)."""
        first = bisect_left(self._bases, max(self._flushed, self._start))
        return self._positions[first] if first < len(self._positions) else len(self._data)

    def simulate_crash(self, kept_batches: int = 0, torn_bytes: int = 0) -> None:
        """A kill -9 of the process and the machine. What was flushed survives; of the
        batches after it, the first `kept_batches` reached the disk whole (the page cache
        wrote them back before the power went), and `torn_bytes` of the next one did (a
        torn write, which `recover()` cuts). Nothing else survives."""
        sizes = self.unflushed_batch_sizes()
        if not 0 <= kept_batches <= len(sizes) or (
            torn_bytes and not (kept_batches < len(sizes) and 0 < torn_bytes < sizes[kept_batches])
        ):
            raise ValueError(f"cannot keep {kept_batches} whole batches and {torn_bytes} bytes of the next: "
                             f"the unflushed batches are {sizes} bytes")
        survivors = max(self._flushed, self._start)
        first = bisect_left(self._bases, survivors)
        torn = b""
        if kept_batches < len(sizes):
            at = self._positions[first + kept_batches]
            torn = bytes(self._data[at : at + torn_bytes])
        if kept_batches:
            survivors = self._nexts[first + kept_batches - 1]
        self.truncate_to(survivors)
        self._torn = torn

    def flip_flushed_byte(self, index: int, mask: int) -> int:
        """Bit rot: XORs byte `index` of the flushed data (0 <= index < flushed_bytes) with
        `mask`, leaving every index untouched, as a disk would. Returns the base offset of
        the batch it hit; `recover()` must refuse the log from then on."""
        if not 0 <= index < self.flushed_bytes or not 0 < mask < 256:
            raise ValueError(f"byte {index} (mask {mask}) is not in the {self.flushed_bytes} flushed bytes")
        self._data[index] ^= mask
        return self._bases[bisect_right(self._positions, index) - 1]

    def recover(self) -> int:
        """What opening a FileLog does after a crash: the batches are read back from the
        bytes alone, each checked (CRC, contiguous offsets, the epoch the epoch cache gives
        it, never going back). Damage at or above the recovery point (what was flushed
        when the crash came) is a torn tail: cut. Damage below it is data that was durable
        and went bad: CorruptLogError, and the log is left as it was. What survives counts
        as flushed, as FileLog fsyncs it before use. Returns how many bytes were cut."""
        data = self._data + self._torn
        recovery_point = self._flushed
        first = self._bases[0] if self._bases else self._empty_end
        headers: list[BatchHeader] = []
        good = len(data)
        try:
            for h in iter_batches(data, expected_offset=first):
                want = self._epochs.epoch_for_offset(h.base_offset)
                before = headers[-1].partition_leader_epoch if headers else None
                epoch = h.partition_leader_epoch
                if want != epoch or (before is not None and epoch < before):
                    raise CorruptRecordError(
                        h.position, f"batch at offset {h.base_offset} has leader epoch {epoch}, but the epoch "
                        f"cache says {want} and the batch before it has epoch {before}",
                    )
                headers.append(h)
        except CorruptRecordError as e:
            offset = headers[-1].next_offset if headers else first
            if offset < recovery_point:
                raise CorruptLogError(
                    "memory log", e.position,
                    f"{e.reason} (offset {offset} is below the recovery point {recovery_point}: this data "
                    "was flushed, so it is refused rather than dropped)",
                ) from None
            good = e.position
        self._data = data[:good]
        self._bases = [h.base_offset for h in headers]
        self._nexts = [h.next_offset for h in headers]
        self._positions = [h.position for h in headers]
        if not headers:
            self._empty_end = first
        self._epochs.truncate_from_end(self.end_offset)
        self._torn = b""
        self._flushed = self.end_offset
        return len(data) - good

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
