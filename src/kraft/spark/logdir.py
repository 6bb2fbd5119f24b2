"""Reading a partition directory's files as they lie: a backup, or a stopped node's log dir.

`dir` is the partition directory (`__cluster_metadata-0`) or the `metadata.log.dir` that
holds it, as Kafka and kraft lay them out:

    <dir>/%020d.log                       segments, read
    <dir>/%020d-%010d.checkpoint          frozen snapshots, read
    anything else                         ignored: .index, .checkpoint.part, quorum-state, ...

Nothing here opens a `FileLog` or a `FileSnapshotStore`: both recover when they open (cut
torn tails, delete `.part` files), and a reader of a backup must not change it. So the files
are read directly, with the same checks the log's recovery makes: every batch's CRC, base
offsets running on without gaps inside a segment and from one segment into the next, and
for snapshots the header, epochs, offsets and footer (`SnapshotReader`). Damage raises
`CorruptLogError` / `CorruptSnapshotError`, whose message names the file and the byte.

A read is planned once (`plan_view`) as `Slice`s: byte ranges of segments, on batch
boundaries, each read on its own (a Spark task each) and each knowing the offset it must
start at and the offset the next slice starts at, so that together they check the whole
log without any task seeing another's bytes. The plan uses file sizes as they are when it
is made; a directory still being written (a live node) can be read, but what is read is
whatever was on disk, possibly a batch being appended (an incomplete-batch error) or a
segment truncated meanwhile (a short read). Copy the directory, or stop the node, for a
consistent read.

Pure Python on kraft.records and kraft.storage: the Spark sources and the metadata view
share it, and it runs in Spark's Python workers.
"""

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kraft.records import CorruptRecordError, RecordBatch, iter_file_batches
from kraft.storage.snapshot import CHECKPOINT_SUFFIX, SnapshotId, SnapshotReader, parse_snapshot_file_name
from kraft.storage.storage_errors import CorruptLogError, SnapshotError

_SEGMENT_FILE = re.compile(r"(\d{20})\.log")
DEFAULT_MAX_SLICE_BYTES = 32 << 20
METADATA_PARTITION = "__cluster_metadata-0"


class LogDirError(ValueError):
    """A directory, or a requested view of it, that cannot be read as asked (not damage:
    a missing directory, an offset outside the log, a snapshot the log does not follow)."""


@dataclass(frozen=True, slots=True)
class Slice:
    """Bytes [start, end) of one segment, on batch boundaries: the batches from
    `first_offset` up to `next_offset` (the next slice's first offset; None for the end of
    the last segment, which nothing follows). Picklable: Spark ships it to a task."""

    path: str
    start: int
    end: int
    first_offset: int
    next_offset: int | None


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    path: str
    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class View:
    """What a read covers: the snapshot it starts from (if any), then the log's batches at
    offsets in [low, high) (high None: to the log's end), read slice by slice."""

    topic: str
    partition: int
    snapshot: SnapshotFile | None
    slices: tuple[Slice, ...]
    low: int
    high: int | None

    @property
    def pieces(self) -> list["Slice | SnapshotFile"]:
        """What is read, in offset order: the snapshot, then the slices."""
        return [self.snapshot, *self.slices] if self.snapshot is not None else list(self.slices)


@dataclass(frozen=True, slots=True)
class _Segment:
    path: Path
    base_offset: int
    size: int


class LogDirectory:
    """The segments and snapshots of one partition directory, listed once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise LogDirError(f"{self.path}: no such directory")
        if (self.path / METADATA_PARTITION).is_dir():  # a metadata.log.dir
            self.path = self.path / METADATA_PARTITION
        topic, _, partition = self.path.name.rpartition("-")
        if not topic or not partition.isdigit():
            raise LogDirError(
                f"{self.path}: not a partition directory (named <topic>-<partition>, such as "
                f"{METADATA_PARTITION}), nor a metadata.log.dir holding {METADATA_PARTITION}"
            )
        self.topic, self.partition = topic, int(partition)
        segments, snapshots = [], []
        for p in self.path.iterdir():
            if (m := _SEGMENT_FILE.fullmatch(p.name)) is not None:
                segments.append(_Segment(p, int(m[1]), p.stat().st_size))
            elif p.name.endswith(CHECKPOINT_SUFFIX):
                try:
                    snapshots.append(SnapshotFile(str(p), parse_snapshot_file_name(p.name)))
                except SnapshotError:
                    pass  # as FileSnapshotStore does: not a snapshot of this log
        if not segments and not snapshots:
            raise LogDirError(
                f"{self.path}: no %020d.log segments and no .checkpoint snapshots: "
                "not a partition directory, or an empty one"
            )
        self.segments = sorted(segments, key=lambda s: s.base_offset)
        self.snapshots = sorted(snapshots, key=lambda s: s.snapshot_id)

    @property
    def start_offset(self) -> int | None:
        """The first segment's base offset (None without segments)."""
        return self.segments[0].base_offset if self.segments else None

    def latest_snapshot(self, at_or_before: int | None = None) -> SnapshotFile | None:
        """The latest snapshot ending at or before `at_or_before` (any, if None)."""
        fitting = [s for s in self.snapshots if at_or_before is None or s.snapshot_id.end_offset <= at_or_before]
        return fitting[-1] if fitting else None

    def earliest_snapshot(self, high: int | None) -> SnapshotFile | None:
        """The snapshot an "earliest" view starts from: none for a log that starts at offset
        0 (it holds every state itself); for a log that starts later, the snapshot ending
        where it starts, the only place the state below its start is kept (none if there is
        no such snapshot); without any log, the latest snapshot ending at or before `high`."""
        start = self.start_offset
        if start is None:
            return self.latest_snapshot(high)
        fitting = [s for s in self.snapshots if s.snapshot_id.end_offset == start != 0]
        return fitting[-1] if fitting and (high is None or start <= high) else None

    def plan_view(
        self, *, from_snapshot: bool, high: int | None = None, max_slice_bytes: int = DEFAULT_MAX_SLICE_BYTES
    ) -> View:
        """The log's batches below `high`; with `from_snapshot`, preceded by the latest
        snapshot ending at or before `high`, and the log only from that snapshot's end.

        Without `from_snapshot` the view is everything the directory holds from its earliest
        state on: `earliest_snapshot`, then every batch. With it, the view is one consistent
        state, so without a snapshot it starts at the first segment, which must then be
        offset 0: a log starting later has lost the state below its start.
        """
        if high is not None and high < 0:
            raise LogDirError(f"{self.path}: end offset {high} is negative")
        start = self.start_offset
        if not from_snapshot:
            snapshot = self.earliest_snapshot(high)
            low = snapshot.snapshot_id.end_offset if snapshot is not None else start or 0
        elif (snapshot := self.latest_snapshot(high)) is not None:
            low = snapshot.snapshot_id.end_offset
            if start is not None and start > low and low != high:
                raise LogDirError(
                    f"{self.path}: the snapshot {Path(snapshot.path).name} ends at offset {low}, but the log "
                    f"starts at {start}: offsets {low}..{start - 1} are in neither"
                )
        elif start:
            raise LogDirError(
                f"{self.path}: the log starts at offset {start} and no snapshot ends "
                f"{'here' if high is None else f'at or before {high}'}: the state below offset {start} is lost"
            )
        else:
            low = 0
        slices = tuple(self._slices(low, high, max_slice_bytes))
        if not slices and high is not None and high > low:  # with slices, read_slice finds it
            raise LogDirError(f"{self.path}: end offset {high} is past the end of the log ({low})")
        return View(self.topic, self.partition, snapshot, slices, low, high)

    def _slices(self, low: int, high: int | None, max_bytes: int) -> Iterator[Slice]:
        """Slices of the segments that may hold offsets in [low, high); large segments are
        split at batch boundaries about every `max_bytes` (one header walk, no CRC)."""
        segments = self.segments
        for i, segment in enumerate(segments):
            after = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if after is not None and after <= low:
                continue
            if high is not None and segment.base_offset >= high:
                break
            if segment.size <= max_bytes:
                yield Slice(str(segment.path), 0, segment.size, segment.base_offset, after)
                continue
            yield from _split(segment, after, max_bytes)


def _split(segment: _Segment, after: int | None, max_bytes: int) -> Iterator[Slice]:
    """The segment in ceil(size / max_bytes) slices of about equal size (tasks of equal
    length finish together), cut at the first batch boundary past each share."""
    path = str(segment.path)
    share = segment.size / -(-segment.size // max_bytes)
    cut = share
    start, first = 0, segment.base_offset
    with _open(path) as fd:
        for h in iter_file_batches(fd, 0, segment.size, verify_crc=False, partial_tail="stop"):
            if h.position >= cut:
                yield Slice(path, start, h.position, first, h.base_offset)
                start, first = h.position, h.base_offset
                cut = (h.position // share + 1) * share
    yield Slice(path, start, segment.size, first, after)


@contextmanager
def named(path: str) -> Iterator[None]:
    """Record errors inside the block as CorruptLogError naming `path`. Reading records of
    a batch whose CRC holds can still fail (a writer wrote it so): refused like damage."""
    try:
        yield
    except CorruptRecordError as e:
        raise CorruptLogError(path, e.position, e.reason) from None


@contextmanager
def _open(path: str) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        with named(path):
            yield fd
    finally:
        os.close(fd)


def read_slice(s: Slice, low: int = 0, high: int | None = None) -> Iterator[RecordBatch]:
    """The slice's batches with offsets in [low, high), each CRC-checked, in order.

    Batches below `low` are still walked and checked (the slice must hold whole, valid
    batches), only not handed out. `low` and `high` must fall on batch boundaries: a view
    that starts or ends inside a batch would hold part of a write, which no replica ever
    applies. At the slice's end its last batch must reach the next slice's first offset,
    and a `high` past the log's end is refused.
    """
    expected = s.first_offset
    with _open(s.path) as fd:
        for h in iter_file_batches(fd, s.start, s.end, expected_offset=s.first_offset):
            if high is not None and h.next_offset > high:
                if h.base_offset < high:
                    raise _inside_batch(s.path, h.position, "end", high, h.base_offset, h.last_offset)
                return
            expected = h.next_offset
            if h.next_offset <= low:
                continue
            if h.base_offset < low:
                raise _inside_batch(s.path, h.position, "start", low, h.base_offset, h.last_offset)
            data = os.pread(fd, h.size, h.position)
            if len(data) != h.size:
                shrank = f"the file shrank while it was read ({len(data)} of {h.size} bytes)"
                raise CorruptLogError(s.path, h.position, shrank)
            yield RecordBatch(h, data)
    if s.next_offset is not None and expected != s.next_offset:
        raise CorruptLogError(
            s.path,
            s.end,
            f"the batches end at offset {expected}, but the next segment starts at {s.next_offset}: "
            f"{'a gap' if expected < s.next_offset else 'an overlap'} in the log",
        )
    if s.next_offset is None and high is not None and expected < high:
        raise LogDirError(f"{s.path}: end offset {high} is past the end of the log ({expected})")


def _inside_batch(path: str, position: int, which: str, offset: int, base: int, last: int) -> LogDirError:
    return LogDirError(
        f"{path}: the view's {which} offset {offset} falls inside the batch at offsets {base}..{last} "
        f"(position {position}); a view starts and ends at batch boundaries ({base} or {last + 1})"
    )


def open_snapshot(snapshot: SnapshotFile) -> SnapshotReader:
    """A reader whose `batches()` and `records()` check every batch (CRC, offset, epoch,
    header first, footer last) as they are read; CorruptSnapshotError names the file."""
    return SnapshotReader.open(Path(snapshot.path), snapshot.snapshot_id)
