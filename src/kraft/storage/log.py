"""The one interface through which the Raft core sees its log.

`ReplicatedLog` holds what both implementations share: validating appends, the epoch
cache, and Raft's truncation arithmetic. Subclasses store the bytes: `FileLog` in Kafka's
segment files, `MemoryLog` in memory for the simulator.

Durability model, the same for both: an append is visible at once and durable only after
a `flush()` covering it (`last_flushed_offset`); truncation and moving the start offset
are durable when they return.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterator

from kraft.records import (
    LOG_OVERHEAD,
    BatchHeader,
    RecordBatch,
    RecordError,
    assign_offsets,
    iter_batches,
    read_batches,
)
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.storage_errors import InvalidAppendError, OffsetOutOfRangeError, RecordTooLargeError
from kraft.storage.types import FileRegion, LogAppendInfo, LogReadInfo, OffsetAndEpoch

# KafkaRaftClient's limit for one batch (MAX_BATCH_SIZE_BYTES).
DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024


class ReplicatedLog(ABC):
    def __init__(self, epochs: LeaderEpochCache, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> None:
        self._epochs = epochs
        self.max_batch_bytes = max_batch_bytes

    # ---------------------------------------------------------------- state

    @property
    @abstractmethod
    def start_offset(self) -> int:
        """The first offset in the log (log start offset)."""

    @property
    @abstractmethod
    def end_offset(self) -> int:
        """The offset the next record will get (log end offset, LEO)."""

    @property
    @abstractmethod
    def last_flushed_offset(self) -> int:
        """Every offset below this is on disk (fsynced); the offset a follower may report."""

    @property
    @abstractmethod
    def size_in_bytes(self) -> int:
        """Bytes the log holds (for retention by size)."""

    def bytes_from(self, offset: int) -> int:
        """Bytes the log would hold if it started at `offset` (for retention by size)."""
        if offset <= self.start_offset:
            return self.size_in_bytes
        if offset >= self.end_offset:
            return 0
        return self._bytes_from(offset)

    @abstractmethod
    def _bytes_from(self, offset: int) -> int:
        """bytes_from for an offset strictly inside the log."""

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the last batch in the log, or None if it holds no batch."""
        return self._epochs.latest_epoch if self.end_offset > self.start_offset else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the batch holding `offset`, if it is in the log."""
        if not self.start_offset <= offset < self.end_offset:
            return None
        return self._epochs.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in this log and its end offset (see LeaderEpochCache)."""
        return self._epochs.end_offset_for(epoch, self.end_offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        return self._epochs.entries()

    # ---------------------------------------------------------------- appends

    def append_as_leader(self, batches: bytes | bytearray | memoryview, epoch: int) -> LogAppendInfo:
        """Appends batches built by the leader: offsets and the epoch are assigned here.

        The batches' base offsets are rewritten to follow the log end and their partition
        leader epoch set to `epoch`; both lie outside the CRC, which is still checked. A
        bytearray is handed over and stamped in place (build_batch makes one); other
        buffers are copied first.
        """
        latest = self._epochs.latest_epoch
        if latest is not None and epoch < latest:
            raise InvalidAppendError(f"leader epoch {epoch} is older than the log's epoch {latest}")
        buf = batches if isinstance(batches, bytearray) else bytearray(batches)
        try:
            headers = assign_offsets(buf, self.end_offset, epoch)
        except RecordError as e:
            raise InvalidAppendError(f"rejected append: {e}") from None
        self._check_sizes(headers, len(buf))
        if epoch != latest:
            self._epochs.assign(epoch, headers[0].base_offset)
        self._write(buf, headers)
        return LogAppendInfo(headers[0].base_offset, self.end_offset - 1, epoch, _any_control(headers))

    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Appends batches fetched from the leader exactly as they are.

        They must pass their CRC, start at the log end, follow each other without gaps,
        and never go back in epoch.
        """
        try:
            headers = list(iter_batches(batches, expected_offset=self.end_offset))
        except RecordError as e:
            raise InvalidAppendError(f"rejected append: {e}") from None
        self._check_sizes(headers, len(batches))
        epochs = self._epochs
        latest = epochs.latest_epoch
        for h in headers:
            epoch = h.partition_leader_epoch
            if latest is not None and epoch < latest:
                raise InvalidAppendError(
                    f"batch at offset {h.base_offset} has epoch {epoch}, older than the log's epoch {latest}"
                )
            latest = epoch
        current = epochs.latest_epoch
        for h in headers:  # checked first, recorded after: a refused append leaves the cache untouched
            if h.partition_leader_epoch != current:
                current = h.partition_leader_epoch
                epochs.assign(current, h.base_offset)
        self._write(batches, headers)
        return LogAppendInfo(
            headers[0].base_offset, self.end_offset - 1, headers[-1].partition_leader_epoch, _any_control(headers)
        )

    def _check_sizes(self, headers: list[BatchHeader], total: int) -> None:
        """Refuses an empty append or one with a batch above max_batch_bytes (no batch can be if the whole is not)."""
        if not headers:
            raise InvalidAppendError("nothing to append: no batches")
        if total > self.max_batch_bytes:
            largest = max(h.batch_length for h in headers) + LOG_OVERHEAD
            if largest > self.max_batch_bytes:
                raise RecordTooLargeError(f"batch of {largest} bytes exceeds the limit of {self.max_batch_bytes}")

    @abstractmethod
    def _write(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Stores validated batches at the log end (headers carry positions within `data`)."""

    # ---------------------------------------------------------------- reads

    def read(self, start_offset: int, max_bytes: int, upper_bound: int | None = None) -> LogReadInfo:
        """Whole batches from the one holding `start_offset`, up to about `max_bytes`.

        At least one batch is returned even if it is larger than max_bytes (so a fetcher
        always makes progress, as KIP-74 rules), and no batch reaching `upper_bound`
        (exclusive; the high watermark for readers that must not see uncommitted data).
        """
        if not self.start_offset <= start_offset <= self.end_offset:
            raise OffsetOutOfRangeError(start_offset, self.start_offset, self.end_offset)
        limit = self.end_offset if upper_bound is None else min(upper_bound, self.end_offset)
        return self._read(start_offset, max_bytes, limit)

    def control_batches(self, start_offset: int, chunk_bytes: int = 4 << 20) -> Iterator[RecordBatch]:
        """The control batches from `start_offset` to the end, read chunk by chunk: the Raft
        layer's own records (KIP-853's voter sets) are among them, replayed once at start."""
        offset = max(start_offset, self.start_offset)
        while offset < self.end_offset:
            info = self.read(offset, chunk_bytes)
            data = info.data.read() if isinstance(info.data, FileRegion) else info.data
            yield from (b for b in read_batches(data) if b.header.is_control)
            offset = info.next_offset

    @abstractmethod
    def _read(self, start_offset: int, max_bytes: int, limit: int) -> LogReadInfo:
        """Batches from the one holding start_offset whose next offset is <= limit."""

    # ---------------------------------------------------------------- durability and truncation

    @abstractmethod
    def flush(self) -> int:
        """Makes every append so far durable (one fsync for all of them); returns last_flushed_offset."""

    def truncate_to(self, offset: int) -> int:
        """Removes every record at or above `offset`; durable on return; returns the new end.

        Batches are never split: if `offset` falls inside one, that whole batch goes too, as
        Kafka does (in practice Raft truncates at batch boundaries, since replicas copy
        whole batches and epochs change only between them).
        """
        if offset >= self.end_offset:
            return self.end_offset
        if offset < self.start_offset:
            raise OffsetOutOfRangeError(offset, self.start_offset, self.end_offset)
        self._truncate(offset)
        self._epochs.truncate_from_end(self.end_offset)
        return self.end_offset

    @abstractmethod
    def _truncate(self, offset: int) -> None:
        """Cuts the stored bytes at the start of the batch holding `offset`."""

    def truncate_to_end_offset(self, diverging: OffsetAndEpoch) -> int:
        """Truncates to where this log and a leader's agree, given the leader's DivergingEpoch.

        The leader says its history of `diverging.epoch` ends at `diverging.offset`; ours of
        the same epoch may end earlier, and if we have no such epoch ours ends wherever our
        largest smaller epoch does. Returns the new log end.
        """
        local = self.end_offset_for_epoch(diverging.epoch)
        if local.epoch == diverging.epoch:
            target = min(local.offset, diverging.offset)
        elif local.offset < 0:
            target = min(self.start_offset, diverging.offset)
        else:
            target = local.offset
        return self.truncate_to(max(self.start_offset, min(target, self.end_offset)))

    def truncate_fully_and_start_at(self, offset: int, epoch_before: int | None = None) -> None:
        """Empties the log and restarts it at `offset`, after loading a snapshot ending there
        whose epoch, the epoch of the record at offset - 1, is `epoch_before`.

        The epochs below `offset` stay known (see LeaderEpochCache.history_before): exactly
        when this log held offset - 1 in that epoch, else as far as the snapshot tells.
        """
        history = self._epochs.history_before(offset, epoch_before, held=offset <= self.end_offset)
        self._restart_at(offset)
        self._epochs.reset(history)

    @abstractmethod
    def _restart_at(self, offset: int) -> None:
        """Deletes every batch and makes `offset` the (durable) start and end of the log."""

    def advance_start_offset(self, offset: int) -> None:
        """Moves the log start offset forward to a batch boundary (a snapshot's end) and
        deletes what lies wholly below it; durable on return. Never moves it back."""
        if offset <= self.start_offset:
            return
        if offset > self.end_offset:
            raise ValueError(f"start offset {offset} would pass the log end {self.end_offset}")
        if offset < self.end_offset and self.read(offset, 1).first_offset != offset:
            raise ValueError(f"start offset {offset} is inside a batch; it must be a batch boundary")
        self._advance_start_offset(offset)
        # The epochs below the new start stay in the cache: they answer OffsetForLeaderEpoch.

    @abstractmethod
    def _advance_start_offset(self, offset: int) -> None:
        """Stores the new start offset and drops what lies wholly below it."""

    def close(self, flush: bool = True) -> None:  # noqa: B027 - a log in memory has nothing to release
        """Releases files; the log is unusable afterwards. `flush=False` writes nothing more."""


def _any_control(headers: list[BatchHeader]) -> bool:
    return any(h.is_control for h in headers)
