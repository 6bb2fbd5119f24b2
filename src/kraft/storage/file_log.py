"""The file-backed replicated log, in Kafka's layout:

    <log dir>/log-start-offset-checkpoint          first offset of the log
    <log dir>/recovery-point-offset-checkpoint     below this, data was fsynced
    <log dir>/<topic>-<partition>/%020d.log        segments
    <log dir>/<topic>-<partition>/%020d.index      sparse offset index per segment
    <log dir>/<topic>-<partition>/leader-epoch-checkpoint

The two offset checkpoints hold one partition each (each version the same length, see
checkpoint.py), so a second partition in the same log dir keeps its own: `checkpoint_dir`,
its partition directory (kraft's `__consumer_offsets` partitions beside the metadata one).

Opening recovers: every batch is walked with its CRC checked against offsets and the epoch
checkpoint. By default the recovery point is written at every flush, right after the data
(`flush()` does both; a node reports its position between `flush_data()` and
`write_recovery_point()`), so it is what was reported flushed, short of the last flush if
the node stopped between the two: that flush's batches are then checked as a tail, and kept
when whole. Damage at or above it is what a crash leaves (a torn or
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
from kraft.storage import fsutil
from kraft.storage.checkpoint import InPlaceOffsetCheckpoint, read_offset_checkpoint, write_offset_checkpoint
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.log import DEFAULT_MAX_BATCH_BYTES, ReplicatedLog
from kraft.storage.segment import DEFAULT_INDEX_INTERVAL_BYTES, Segment
from kraft.storage.snapshot import parse_snapshot_file_name
from kraft.storage.storage_errors import CorruptCheckpointError, CorruptLogError, SnapshotError
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
# The recovery point when its checkpoint is missing or damaged: above every offset.
_ALL_FSYNCED = 2**63


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
        checkpoint_dir: Path | None = None,
    ) -> None:
        """`checkpoint_dir`: where the log-start and recovery-point checkpoints are (default:
        the log dir, the partition directory's parent, as Kafka has them)."""
        self.directory = Path(directory)
        self.checkpoint_dir = checkpoint_dir if checkpoint_dir is not None else self.directory.parent
        topic, _, partition = self.directory.name.rpartition("-")
        if not topic or not partition.isdigit():
            raise ValueError(f"{self.directory}: a partition directory is named <topic>-<partition>")
        self.topic, self.partition = topic, int(partition)
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        self.recovery_point_interval_ms = recovery_point_interval_ms
        self.clock = clock
        fsutil.make_dirs(self.directory)
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
                fsutil.unlink(leftover)
        for leftover in self.checkpoint_dir.glob("*-checkpoint.*.tmp"):  # an interrupted checkpoint write
            fsutil.unlink(leftover, missing_ok=True)
        claimed_start = self._read_offset(LOG_START_CHECKPOINT)
        recovery_point = self._read_offset(RECOVERY_POINT_CHECKPOINT)
        # Without a recovery point nothing tells a torn tail from fsynced data gone bad, so
        # every batch counts as fsynced: damage anywhere is refused, never cut.
        self._recovery_point = _ALL_FSYNCED if recovery_point is None else recovery_point
        try:
            checkpointed: LeaderEpochCache | None = LeaderEpochCache.read(self.directory / EPOCH_CHECKPOINT)
        except CorruptCheckpointError as e:
            log.warning("%s; rebuilding the leader epochs from the log", e)
            checkpointed = None

        bases = sorted(int(m.group(1)) for p in self.directory.iterdir() if (m := _SEGMENT_FILE.match(p.name)))
        for index in self.directory.glob("*.index"):
            if index.stem.isdigit() and int(index.stem) not in bases:
                fsutil.unlink(index)
        rebuilt = LeaderEpochCache()
        expected: int | None = None
        for n, base in enumerate(bases):
            segment = Segment(self.directory, base, created_ms=self.clock(), index_interval_bytes=self.index_interval_bytes)
            if expected is None and claimed_start is not None and base > claimed_start:
                expected = claimed_start  # the log's first segment is missing
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

        self._settle_start_offset(claimed_start)
        leo = self.end_offset
        if recovery_point is not None and leo < recovery_point:
            last = self._segments[-1]
            raise CorruptLogError(
                last.path,
                last.size,
                f"the log ends at offset {leo}, but offsets below the recovery point {recovery_point} "
                "were fsynced: a segment is missing or was cut short, so opening refuses rather than lose them",
            )
        rebuilt.truncate_from_end(leo)
        rebuilt.keep_history(checkpointed.entries() if checkpointed else [], self._start_offset)
        self._epochs = LeaderEpochCache(self.directory / EPOCH_CHECKPOINT, rebuilt.entries())
        if checkpointed is None or checkpointed.entries() != rebuilt.entries():
            log.info("%s: leader epochs rebuilt from the log: %s", self.directory.name, rebuilt.entries())
            self._epochs.save()
        # What survived may be only in the page cache (the process died, the machine did not).
        for segment in self._segments:
            fsutil.fsync(segment.file.fd, segment.path)
        self._flushed = leo
        self._recovery_point = leo
        self._recovery = InPlaceOffsetCheckpoint(
            self.checkpoint_dir / RECOVERY_POINT_CHECKPOINT, self.topic, self.partition, leo
        )
        self._recovery_point_written_ms = self.clock()

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
                        f"but {EPOCH_CHECKPOINT} and the batches before it say epoch "
                        f"{want if want is not None else latest} (one of the two is damaged)",
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
            known = self._recovery_point != _ALL_FSYNCED
            raise CorruptLogError(
                segment.path,
                position,
                f"{reason} (offset {offset} is below the recovery point {self._recovery_point}: "
                f"this data was fsynced, so it is refused rather than dropped)" if known else
                f"{reason} ({RECOVERY_POINT_CHECKPOINT} is missing or damaged, so nothing tells a torn tail "
                "from fsynced data gone bad: refused rather than cut. If the node crashed and this is its "
                "unflushed tail, remove the damaged batches by hand, or move the partition directory away "
                "to re-replicate it from the quorum)",
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
        fsutil.ftruncate(segment.file.fd, position, segment.path)
        fsutil.fsync(segment.file.fd, segment.path)

    def _drop_segments(self, bases: list[int]) -> None:
        for base in bases:
            log.warning("%s: dropped segment %020d.log after the cut", self.directory.name, base)
            for path in (self.directory / f"{base:020d}.log", self.directory / f"{base:020d}.index"):
                fsutil.unlink(path, missing_ok=True)
        if bases:
            fsutil.fsync_dir(self.directory)

    def _snapshot_ends(self) -> set[int]:
        """End offsets of the frozen snapshots beside the segments, from their names alone
        (their bytes are checked where they are loaded)."""
        ends = set()
        for path in self.directory.glob("*.checkpoint"):
            try:
                ends.add(parse_snapshot_file_name(path.name).end_offset)
            except SnapshotError:
                continue
        return ends

    def _settle_start_offset(self, claimed: int | None) -> None:
        """The start offset, checked against the log and the snapshots before anything acts
        on it; segments wholly below it go.

        KIP-630 moves a log's start only to a snapshot's end, and the snapshot there is kept,
        so a start above the first segment's base must name a snapshot. A checkpoint that
        does not (or is missing, or failed its checksum) is not believed: the start is the
        lowest the log and the snapshots allow, so nothing is deleted on its word.
        """
        ends = self._snapshot_ends()
        first = self._segments[0].base_offset if self._segments else None
        if first is None:
            start = claimed if claimed is not None and (claimed == 0 or claimed in ends) else 0
            if claimed is not None and start != claimed:
                log.warning("%s: %s says %d, but the log is empty and no snapshot ends there: the log starts at 0",
                            self.directory.name, LOG_START_CHECKPOINT, claimed)
        elif claimed is not None and (claimed <= first or claimed in ends):
            start = max(claimed, first)
        else:
            end = self._segments[-1].next_offset
            start = first if first == 0 or first in ends else min((e for e in ends if first <= e <= end), default=first)
            if claimed is not None:
                log.warning(
                    "%s: %s says the log starts at %d, but no snapshot ends there (snapshots end at %s): "
                    "it starts at %d, where the log and its snapshots agree, and nothing is deleted",
                    self.directory.name, LOG_START_CHECKPOINT, claimed, sorted(ends) or "none", start,
                )
        self._start_offset = start
        # The last segment stays, as the active one, even if it ends right at the start offset.
        while len(self._segments) > 1 and self._segments[0].next_offset <= start:
            self._segments.pop(0).delete()
        if self._segments and self._segments[-1].next_offset < start:
            # A crash inside truncate_fully_and_start_at: all that is left lies below the start.
            for segment in self._segments:
                segment.delete()
            self._segments = []
        if not self._segments:
            self._segments.append(self._new_segment(start))
        self._write_offset(LOG_START_CHECKPOINT, start)

    # ---------------------------------------------------------------- checkpoints

    def _read_offset(self, name: str) -> int | None:
        """A checkpoint's offset for this partition; None if it is missing or damaged (said
        once in the log), which callers take as the conservative case."""
        try:
            return read_offset_checkpoint(self.checkpoint_dir / name, self.topic, self.partition)
        except CorruptCheckpointError as e:
            log.warning("%s; not believed: %s", e, "the whole log counts as fsynced"
                        if name == RECOVERY_POINT_CHECKPOINT else "the start comes from the log and its snapshots")
            return None

    def _write_offset(self, name: str, offset: int) -> None:
        write_offset_checkpoint(self.checkpoint_dir / name, self.topic, self.partition, offset)

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
        fsutil.fsync_dir(self.directory)
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
        """Makes every append so far durable, then raises the recovery point to match (see
        the module); returns the offset below which the log is durable."""
        flushed = self.flush_data()
        self.write_recovery_point()
        return flushed

    def flush_data(self) -> int:
        """`flush` without the recovery point, which `write_recovery_point` then raises: a
        node reports the offset in between, sparing the answer that second device flush."""
        with self._flush_lock:
            target = self.end_offset
            for segment in list(self._segments):
                segment.flush()
            self._flushed = max(self._flushed, target)
            return self._flushed

    def write_recovery_point(self) -> None:
        """Raises the recovery point to what is durable, unless it was written less than
        `recovery_point_interval_ms` ago."""
        with self._flush_lock:
            due = self.clock() - self._recovery_point_written_ms >= self.recovery_point_interval_ms
            if due and self._recovery_point < self._flushed:
                self._write_recovery_point(self._flushed)

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
            fsutil.fsync_dir(self.directory)
        self._segments[i].truncate(offset)
        self._flushed = min(self._flushed, self.end_offset)

    def _restart_at(self, offset: int) -> None:
        with self._flush_lock:
            self._lower_recovery_point(offset)
            self._write_offset(LOG_START_CHECKPOINT, offset)
            for segment in self._segments:
                segment.delete()
            self._segments = [self._new_segment(offset)]
            self._start_offset = offset
            self._flushed = offset
            self._write_recovery_point(offset)

    def _advance_start_offset(self, offset: int) -> None:
        self._write_offset(LOG_START_CHECKPOINT, offset)
        self._start_offset = offset
        if self._segments[-1].next_offset <= offset and self._segments[-1].size > 0:
            self._segments.append(self._new_segment(self.end_offset))
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            self._segments.pop(0).delete()
        fsutil.fsync_dir(self.directory)

    # ---------------------------------------------------------------- reads

    def _read(self, start_offset: int, max_bytes: int, limit: int) -> LogReadInfo:
        if start_offset >= limit:
            return LogReadInfo(b"", start_offset, start_offset)
        segment = self._segments[self._segment_for(start_offset)]
        span = segment.read(start_offset, max_bytes, limit)
        if span is None:
            return LogReadInfo(b"", start_offset, start_offset)
        return LogReadInfo(FileRegion(segment.file, span.position, span.length), span.first_offset, span.next_offset)

    def close(self, flush: bool = True) -> None:
        """Flushes and closes. `flush=False` after a disk error: writes nothing more (a
        retried fsync can succeed with the data already lost) and only lets go of the files."""
        if flush:
            self.flush()
        with self._flush_lock:
            if flush and self._recovery_point < self._flushed:
                self._write_recovery_point(self._flushed)
            for segment in self._segments:
                segment.close(write_index=flush)
            if self._recovery is not None:
                self._recovery.close()
