"""The file-backed replicated log, in Kafka's layout:

    <log dir>/log-start-offset-checkpoint          first offset of the log
    <log dir>/recovery-point-offset-checkpoint     below this, data was fsynced
    <log dir>/<topic>-<partition>/%020d.log        segments
    <log dir>/<topic>-<partition>/%020d.index      sparse offset index per segment
    <log dir>/<topic>-<partition>/leader-epoch-checkpoint

Opening recovers: every batch is walked with its CRC checked against offsets and the epoch
checkpoint. By default the recovery point is durable before `flush()` returns, so it is
exactly what was reported flushed. Damage at or above it is what a crash leaves (a torn or
half-written tail): the log is cut there and the cut is logged. Damage below it, or a log
that ends below it (a segment missing or cut short), is data that was fsynced and has
since gone bad: opening fails and says where, rather than drop acknowledged records.
Whatever survives is fsynced before the log is used, because a killed process leaves its
last writes in the page cache, visible but not yet durable.

Keeping the recovery point exact costs one more device flush per `flush()` (an
fdatasync of one sector, about 0.14 ms here). `recovery_point_interval_ms` > 0 writes it
at most that often instead, as Kafka's `log.flush.offset.checkpoint.interval.ms` does:
cheaper, but damage to data flushed since the last write is then cut as a torn tail.

The recovery point never claims more than the disk holds: it is raised only after the
data below it is fsynced, and lowered before a truncation removes data.

Concurrency: appends, reads and start-offset moves happen on one thread; `flush()` may run
on another (an executor), which is how group commit overlaps fsync with new appends.
Truncation takes the flush lock (it is rare, and must not interleave with a flush's
recovery-point write).
"""

import logging
import os
import re
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from kraft.records import BatchHeader, CorruptRecordError, iter_file_batches
from kraft.storage.checkpoint import InPlaceOffsetCheckpoint, read_offset_checkpoint, write_offset_checkpoint
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.errors import CorruptCheckpointError, CorruptLogError
from kraft.storage.fsutil import fsync_dir
from kraft.storage.log import DEFAULT_MAX_BATCH_BYTES, ReplicatedLog
from kraft.storage.segment import DEFAULT_INDEX_INTERVAL_BYTES, Segment
from kraft.storage.types import FileRegion, LogReadInfo

log = logging.getLogger("kraft.storage")

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"

# Kafka's defaults for metadata.log.segment.bytes and metadata.log.segment.ms.
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_SEGMENT_MS = 7 * 24 * 3600 * 1000

_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_LEFTOVERS = (".tmp", ".deleted", ".cleaned", ".swap")


def _now_ms() -> int:
    return int(time.time() * 1000)


class FileLog(ReplicatedLog):
    def __init__(
        self,
        directory: Path | str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_ms: int = DEFAULT_SEGMENT_MS,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        recovery_point_interval_ms: int = 0,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.directory = Path(directory)
        topic, _, partition = self.directory.name.rpartition("-")
        if not topic or not partition.isdigit():
            raise ValueError(f"{self.directory}: a partition directory is named <topic>-<partition>")
        self.topic, self.partition = topic, int(partition)
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        self.recovery_point_interval_ms = recovery_point_interval_ms
        self.clock = clock
        self.directory.mkdir(parents=True, exist_ok=True)
        self._segments: list[Segment] = []
        self._start_offset = 0
        self._flushed = 0
        self._recovery_point = 0
        self._recovery: InPlaceOffsetCheckpoint | None = None
        self._recovery_point_written_ms = 0
        self._flush_lock = threading.Lock()  # one flush at a time, and close() waits for it
        super().__init__(LeaderEpochCache(self.directory / EPOCH_CHECKPOINT), max_batch_bytes)
        self._recover()

    # ---------------------------------------------------------------- state

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def last_flushed_offset(self) -> int:
        return self._flushed

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def _bytes_from(self, offset: int) -> int:
        i = self._segment_for(offset)
        span = self._segments[i].locate(offset)
        within = self._segments[i].size - (span.position if span else 0)
        return within + sum(s.size for s in self._segments[i + 1 :])

    # ---------------------------------------------------------------- recovery

    def _recover(self) -> None:
        for leftover in self.directory.iterdir():
            if leftover.suffix in _LEFTOVERS:
                leftover.unlink()
        for leftover in self.directory.parent.glob("*-checkpoint.*.tmp"):  # an interrupted checkpoint write
            leftover.unlink(missing_ok=True)
        checkpointed_start = self._read_offset(LOG_START_CHECKPOINT)
        self._start_offset = checkpointed_start or 0
        self._recovery_point = self._read_offset(RECOVERY_POINT_CHECKPOINT) or 0
        try:
            checkpointed: LeaderEpochCache | None = LeaderEpochCache.read(self.directory / EPOCH_CHECKPOINT)
        except CorruptCheckpointError as e:
            log.warning("%s; rebuilding the leader epochs from the log", e)
            checkpointed = None

        bases = sorted(int(m.group(1)) for p in self.directory.iterdir() if (m := _SEGMENT_FILE.match(p.name)))
        for index in self.directory.glob("*.index"):
            if index.stem.isdigit() and int(index.stem) not in bases:
                index.unlink()
        rebuilt = LeaderEpochCache()
        expected: int | None = None
        for n, base in enumerate(bases):
            segment = Segment(self.directory, base, created_ms=self.clock(), index_interval_bytes=self.index_interval_bytes)
            if expected is None and checkpointed_start is not None and base > checkpointed_start:
                expected = checkpointed_start  # the log's first segment is missing
            if expected is not None and base != expected:
                self._damage(segment, 0, expected, f"segment starts at offset {base}, expected {expected}")
                segment.delete()
                self._drop_segments(bases[n + 1 :])
                break
            headers, good_size = self._scan(segment, base, checkpointed, rebuilt)
            segment.load_scanned(headers, good_size)
            if headers and headers[0].max_timestamp >= 0:
                segment.created_ms = headers[0].max_timestamp  # segment.ms counts from the data's time, as Kafka's does
            self._segments.append(segment)
            expected = segment.next_offset
            if good_size < os.fstat(segment.file.fd).st_size:
                self._drop_segments(bases[n + 1 :])
                break

        self._settle_start_offset()
        leo = self.end_offset
        if leo < self._recovery_point:
            last = self._segments[-1]
            raise CorruptLogError(
                last.path,
                last.size,
                f"the log ends at offset {leo}, but offsets below the recovery point {self._recovery_point} "
                "were fsynced: a segment is missing or was cut short, so opening refuses rather than lose them",
            )
        rebuilt.truncate_from_start(self._start_offset)
        rebuilt.truncate_from_end(leo)
        self._epochs = LeaderEpochCache(self.directory / EPOCH_CHECKPOINT, rebuilt.entries())
        if checkpointed is None or checkpointed.entries() != rebuilt.entries():
            log.info("%s: leader epochs rebuilt from the log: %s", self.directory.name, rebuilt.entries())
            self._epochs.save()
        # What survived may be only in the page cache (the process died, the machine did not).
        for segment in self._segments:
            os.fsync(segment.file.fd)
        self._flushed = leo
        self._recovery = InPlaceOffsetCheckpoint(self.directory.parent / RECOVERY_POINT_CHECKPOINT, self.topic, self.partition)
        self._write_recovery_point(leo)

    def _scan(
        self, segment: Segment, base: int, checkpointed: LeaderEpochCache | None, rebuilt: LeaderEpochCache
    ) -> tuple[list[BatchHeader], int]:
        """Valid batches of one segment and the size they cover; damage is cut or refused."""
        headers: list[BatchHeader] = []
        next_offset = base
        try:
            for h in iter_file_batches(segment.file.fd, expected_offset=base):
                want = checkpointed.epoch_for_offset(h.base_offset) if checkpointed else None
                latest = rebuilt.latest_epoch
                if (want is not None and h.partition_leader_epoch != want) or (
                    latest is not None and h.partition_leader_epoch < latest
                ):
                    raise CorruptRecordError(
                        h.position,
                        f"batch at offset {h.base_offset} has leader epoch {h.partition_leader_epoch}, "
                        f"but {EPOCH_CHECKPOINT} and the batches before it say epoch {want if want is not None else latest}",
                    )
                rebuilt.assign(h.partition_leader_epoch, h.base_offset)
                headers.append(h)
                next_offset = h.next_offset
        except CorruptRecordError as e:
            self._damage(segment, e.position, next_offset, e.reason)
            return headers, e.position
        return headers, os.fstat(segment.file.fd).st_size

    def _damage(self, segment: Segment, position: int, offset: int, reason: str) -> None:
        """Refuses damage to fsynced data; cuts an unflushed tail at `position` and says so."""
        if offset < self._recovery_point:
            raise CorruptLogError(
                segment.path,
                position,
                f"{reason} (offset {offset} is below the recovery point {self._recovery_point}: "
                f"this data was fsynced, so it is refused rather than dropped)",
            )
        size = os.fstat(segment.file.fd).st_size
        log.warning(
            "%s: cut the log at position %d (offset %d): %d bytes dropped from a tail that was never flushed: %s",
            segment.path,
            position,
            offset,
            size - position,
            reason,
        )
        os.ftruncate(segment.file.fd, position)
        os.fsync(segment.file.fd)

    def _drop_segments(self, bases: list[int]) -> None:
        for base in bases:
            log.warning("%s: dropped segment %020d.log after the cut", self.directory.name, base)
            for path in (self.directory / f"{base:020d}.log", self.directory / f"{base:020d}.index"):
                path.unlink(missing_ok=True)
        if bases:
            fsync_dir(self.directory)

    def _settle_start_offset(self) -> None:
        """Start offset: the checkpoint's, or the first segment's; segments wholly below it go."""
        if self._segments:
            self._start_offset = max(self._start_offset, self._segments[0].base_offset)
        # The last segment stays, as the active one, even if it ends right at the start offset.
        while len(self._segments) > 1 and self._segments[0].next_offset <= self._start_offset:
            self._segments.pop(0).delete()
        if self._segments and self._segments[-1].next_offset < self._start_offset:
            # A crash inside truncate_fully_and_start_at: all that is left lies below the start.
            for segment in self._segments:
                segment.delete()
            self._segments = []
        if not self._segments:
            self._segments.append(self._new_segment(self._start_offset))
        self._write_offset(LOG_START_CHECKPOINT, self._start_offset)

    # ---------------------------------------------------------------- checkpoints

    def _read_offset(self, name: str) -> int | None:
        return read_offset_checkpoint(self.directory.parent / name, self.topic, self.partition)

    def _write_offset(self, name: str, offset: int) -> None:
        write_offset_checkpoint(self.directory.parent / name, self.topic, self.partition, offset)

    def _write_recovery_point(self, offset: int) -> None:
        assert self._recovery is not None
        self._recovery.write(offset)
        self._recovery_point = offset
        self._recovery_point_written_ms = self.clock()

    def _lower_recovery_point(self, offset: int) -> None:
        """Before data at or above `offset` is removed: the point must never pass the data."""
        if self._recovery_point > offset:
            self._write_recovery_point(offset)

    # ---------------------------------------------------------------- writes

    def _new_segment(self, base_offset: int) -> Segment:
        segment = Segment(
            self.directory, base_offset, created_ms=self.clock(), index_interval_bytes=self.index_interval_bytes
        )
        segment.load_scanned([], 0)
        fsync_dir(self.directory)
        return segment

    def _write(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        active = self._segments[-1]
        if active.size > 0 and (
            active.size + len(data) > self.segment_bytes or self.clock() - active.created_ms >= self.segment_ms
        ):
            active.write_pending_index()
            active = self._new_segment(self.end_offset)
            self._segments.append(active)
        active.append(data, headers)

    def flush(self) -> int:
        with self._flush_lock:
            target = self.end_offset
            for segment in list(self._segments):
                segment.flush()
            if target > self._flushed:
                if self.clock() - self._recovery_point_written_ms >= self.recovery_point_interval_ms:
                    self._write_recovery_point(target)  # durable before the offset is reported
                self._flushed = target
            return self._flushed

    # ---------------------------------------------------------------- truncation and retention

    def _segment_for(self, offset: int) -> int:
        return bisect_right([s.base_offset for s in self._segments], offset) - 1

    def _truncate(self, offset: int) -> None:
        with self._flush_lock:
            self._truncate_locked(offset)

    def _truncate_locked(self, offset: int) -> None:
        i = self._segment_for(offset)
        span = self._segments[i].locate(offset)
        self._lower_recovery_point(span.first_offset if span else offset)
        doomed = self._segments[i + 1 :]
        if offset == self._segments[i].base_offset and i > 0:
            doomed.insert(0, self._segments[i])
            i -= 1
        del self._segments[i + 1 :]
        for segment in doomed:
            segment.delete()
        if doomed:
            fsync_dir(self.directory)
        self._segments[i].truncate(offset)
        self._flushed = min(self._flushed, self.end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._flush_lock:
            self._lower_recovery_point(offset)
            self._write_offset(LOG_START_CHECKPOINT, offset)
            for segment in self._segments:
                segment.delete()
            self._segments = [self._new_segment(offset)]
            self._start_offset = offset
            self._epochs.clear()
            self._flushed = offset
            self._write_recovery_point(offset)

    def _advance_start_offset(self, offset: int) -> None:
        self._write_offset(LOG_START_CHECKPOINT, offset)
        self._start_offset = offset
        if self._segments[-1].next_offset <= offset and self._segments[-1].size > 0:
            self._segments.append(self._new_segment(self.end_offset))
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            self._segments.pop(0).delete()
        fsync_dir(self.directory)

    # ---------------------------------------------------------------- reads

    def _read(self, start_offset: int, max_bytes: int, limit: int) -> LogReadInfo:
        if start_offset >= limit:
            return LogReadInfo(b"", start_offset, start_offset)
        segment = self._segments[self._segment_for(start_offset)]
        span = segment.read(start_offset, max_bytes, limit)
        if span is None:
            return LogReadInfo(b"", start_offset, start_offset)
        return LogReadInfo(FileRegion(segment.file, span.position, span.length), span.first_offset, span.next_offset)

    def close(self) -> None:
        self.flush()
        with self._flush_lock:
            if self._recovery_point < self._flushed:
                self._write_recovery_point(self._flushed)
            for segment in self._segments:
                segment.close()
            if self._recovery is not None:
                self._recovery.close()
