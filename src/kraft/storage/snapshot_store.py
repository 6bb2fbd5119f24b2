"""Where a partition's snapshots live: its directory, beside the segments, or memory.

`FileSnapshotStore` keeps Kafka's layout:

    <partition dir>/%020d-%010d.checkpoint           a frozen snapshot
    <partition dir>/%020d-%010d.checkpoint.part      one being written or fetched
    <partition dir>/%020d-%010d.checkpoint.deleted   one being deleted

`MemorySnapshotStore` is its twin for the simulator; both pass the same contract tests.
In both, a snapshot is listed only once frozen (durable), at most one writer exists per
id, and deleting a snapshot never disturbs readers that have it open.

`validate_snapshots_and_log` is KIP-630's "Validation of Snapshot and Log", run when a
replica opens its log and snapshots together.

Like the log, a store is used from one thread.
"""

import bisect
import builtins
import logging
import mmap
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from kraft.records import Compression, ControlMessage
from kraft.storage import fsutil
from kraft.storage.log import ReplicatedLog
from kraft.storage.snapshot import (
    CHECKPOINT_SUFFIX,
    DEFAULT_RECORDS_PER_BATCH,
    DELETED_SUFFIX,
    PART_SUFFIX,
    RawSnapshotWriter,
    SnapshotId,
    SnapshotPart,
    SnapshotReader,
    SnapshotWriter,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from kraft.storage.storage_errors import SnapshotError, SnapshotNotFoundError

log = logging.getLogger("kraft.storage")


class SnapshotStore(ABC):
    def __init__(self) -> None:
        self._ids: list[SnapshotId] = []  # frozen, sorted (`list` below is a method)
        self._writing: dict[SnapshotId, _StorePart] = {}

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the snapshots are, for messages."""

    # ---------------------------------------------------------------- listing

    def list(self) -> list[SnapshotId]:
        """The frozen snapshots, oldest first."""
        return list(self._ids)

    def latest(self) -> SnapshotId | None:
        return self._ids[-1] if self._ids else None

    def earliest(self) -> SnapshotId | None:
        return self._ids[0] if self._ids else None

    # ---------------------------------------------------------------- writing

    def create_writer(
        self,
        snapshot_id: SnapshotId,
        last_contained_log_timestamp: int,
        *,
        records_per_batch: int = DEFAULT_RECORDS_PER_BATCH,
        compression: Compression = Compression.NONE,
        raft_records: Sequence[ControlMessage] = (),
    ) -> SnapshotWriter:
        """A writer for the state machine's snapshot at `snapshot_id` (header already written,
        and the Raft layer's `raft_records` after it)."""
        return SnapshotWriter(
            self._start(snapshot_id),
            last_contained_log_timestamp,
            records_per_batch=records_per_batch,
            compression=compression,
            raft_records=raft_records,
        )

    write_behind = False  # whether a fetched chunk is written by a background thread

    def create_raw_writer(self, snapshot_id: SnapshotId) -> RawSnapshotWriter:
        """A writer for a snapshot fetched from the leader chunk by chunk."""
        return RawSnapshotWriter(self._start(snapshot_id), write_behind=self.write_behind)

    def _start(self, snapshot_id: SnapshotId) -> "_StorePart":
        if snapshot_id in self._ids:
            raise SnapshotError(f"{self.location}: snapshot {snapshot_id} already exists")
        if snapshot_id in self._writing:
            raise SnapshotError(f"{self.location}: snapshot {snapshot_id} is already being written")
        part = self._new_part(snapshot_id)
        self._writing[snapshot_id] = part
        return part

    @abstractmethod
    def _new_part(self, snapshot_id: SnapshotId) -> "_StorePart":
        """Somewhere to write the snapshot until it is frozen."""

    # ---------------------------------------------------------------- reading and deleting

    def open_reader(self, snapshot_id: SnapshotId) -> SnapshotReader:
        """A reader of a frozen snapshot; it outlives the snapshot's deletion."""
        self._require(snapshot_id)
        return self._open(snapshot_id)

    @abstractmethod
    def _open(self, snapshot_id: SnapshotId) -> SnapshotReader: ...

    def delete(self, snapshot_id: SnapshotId) -> None:
        """Deletes a frozen snapshot; readers that have it open keep reading it."""
        self._require(snapshot_id)
        self._delete(snapshot_id)
        self._ids.remove(snapshot_id)

    @abstractmethod
    def _delete(self, snapshot_id: SnapshotId) -> None: ...

    def delete_before(self, offset: int) -> builtins.list[SnapshotId]:
        """Deletes every snapshot ending below `offset` (the new log start offset: a snapshot
        ending exactly there still holds the state the log now starts from); returns them."""
        doomed = [s for s in self._ids if s.end_offset < offset]
        for snapshot_id in doomed:
            self.delete(snapshot_id)
        return doomed

    def _require(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._ids:
            raise SnapshotNotFoundError(f"{self.location}: no snapshot {snapshot_id}")


class _StorePart(SnapshotPart):
    """A part that reports to its store: once published it is listed, and once published or
    discarded its id is free for a new writer."""

    def __init__(self, store: SnapshotStore, snapshot_id: SnapshotId, name: str) -> None:
        super().__init__(snapshot_id, name)
        self._store = store

    def publish(self) -> None:
        if self._store._writing.get(self.snapshot_id) is not self:
            raise SnapshotError(f"{self.name}: lost in a crash of its store before it was frozen")
        self._persist()
        del self._store._writing[self.snapshot_id]
        bisect.insort(self._store._ids, self.snapshot_id)

    def discard(self) -> None:
        self._remove()
        if self._store._writing.get(self.snapshot_id) is self:
            del self._store._writing[self.snapshot_id]

    @abstractmethod
    def _persist(self) -> None:
        """Makes the bytes durable under the snapshot's final name."""

    @abstractmethod
    def _remove(self) -> None:
        """Drops the bytes written so far."""


# ------------------------------------------------------------------------------ files


class FileSnapshotStore(SnapshotStore):
    """Snapshots as `.checkpoint` files in a partition directory.

    A fetched snapshot's chunks are written behind the fetch (RawSnapshotWriter).

    Opening cleans up after a crash: a `.part` is a snapshot that was never frozen (its
    rename did not happen) and a `.deleted` one whose deletion was cut short; both go.
    A `.checkpoint` whose name does not parse is left alone, with a warning. Names with
    other zero padding (the KIP's example has a wider epoch) are read where they are; two
    files naming the same id are refused, since neither can be known to be the right one.
    """

    write_behind = True

    def __init__(self, directory: Path | str) -> None:
        super().__init__()
        self.directory = Path(directory)
        fsutil.make_dirs(self.directory)
        self._found: dict[SnapshotId, Path] = {}  # files whose names are not in the canonical padding
        removed = False
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith((PART_SUFFIX, DELETED_SUFFIX)):
                log.info(
                    "%s: removed %s, left by an unfinished snapshot write or delete", self.directory, path.name
                )
                fsutil.unlink(path)
                removed = True
            elif path.name.endswith(CHECKPOINT_SUFFIX):
                try:
                    snapshot_id = parse_snapshot_file_name(path.name)
                except SnapshotError as e:
                    log.warning("%s: ignored: %s", self.directory, e)
                    continue
                if snapshot_id in self._ids:
                    raise SnapshotError(
                        f"{self.directory}: two files hold snapshot {snapshot_id}: {self.path(snapshot_id).name} "
                        f"and {path.name}; remove the wrong one"
                    )
                self._ids.append(snapshot_id)
                if path.name != snapshot_file_name(snapshot_id):
                    self._found[snapshot_id] = path
        self._ids.sort()
        if removed:
            fsutil.fsync_dir(self.directory)

    @property
    def location(self) -> str:
        return str(self.directory)

    def path(self, snapshot_id: SnapshotId, suffix: str = CHECKPOINT_SUFFIX) -> Path:
        """The snapshot's file (where it was found), or the name this store writes it under."""
        found = self._found.get(snapshot_id) if suffix == CHECKPOINT_SUFFIX else None
        return found if found is not None else self.directory / snapshot_file_name(snapshot_id, suffix)

    def _new_part(self, snapshot_id: SnapshotId) -> "_StorePart":
        return _FilePart(self, snapshot_id)

    def _open(self, snapshot_id: SnapshotId) -> SnapshotReader:
        return SnapshotReader.open(self.path(snapshot_id), snapshot_id)

    def _delete(self, snapshot_id: SnapshotId) -> None:
        """Renames to `.deleted` (atomic and durable: after a crash the snapshot is either
        whole or gone, never listed half-deleted), then unlinks. Kafka unlinks later on a
        background thread; this store is single-threaded, so it unlinks at once, and a
        `.deleted` left by a crash in between is removed on the next open."""
        deleted = self.path(snapshot_id, DELETED_SUFFIX)
        fsutil.rename(self.path(snapshot_id), deleted)
        self._found.pop(snapshot_id, None)
        fsutil.fsync_dir(self.directory)
        fsutil.unlink(deleted)


class _FilePart(_StorePart):
    """`<id>.checkpoint.part`, written with pwrite at the end; frozen by fsync, then rename."""

    def __init__(self, store: FileSnapshotStore, snapshot_id: SnapshotId) -> None:
        self.path = store.path(snapshot_id, PART_SUFFIX)
        super().__init__(store, snapshot_id, str(self.path))
        self._final = store.path(snapshot_id)
        # A part left by an aborted-without-cleanup writer is only ever overwritten: the
        # store allows one writer per id, and a crash's parts are removed on open.
        with fsutil.disk("open", self.path):
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, fsutil.PRIVATE_FILE)

    def _write(self, view: memoryview) -> None:
        fsutil.pwrite_all(self._fd, view, self.size, self.path)

    def contents(self) -> bytes | mmap.mmap:
        return mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) if self.size else b""

    def _persist(self) -> None:
        fsutil.ftruncate(self._fd, self.size, self.path)  # anything a failed write left beyond the end goes
        fsutil.fsync(self._fd, self.path)
        self._close()
        fsutil.rename(self.path, self._final)
        fsutil.fsync_dir(self.path.parent)

    def _remove(self) -> None:
        self._close()
        fsutil.unlink(self.path, missing_ok=True)

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# ------------------------------------------------------------------------------ memory


def _memory_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_file_name(snapshot_id)} (in memory)"


class MemorySnapshotStore(SnapshotStore):
    """The in-memory twin for the simulator, with FileSnapshotStore's durability: a frozen
    snapshot survives `simulate_crash()` (the file store fsyncs before renaming), a snapshot
    still being written does not (the file store removes `.part` files on open)."""

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[SnapshotId, bytes] = {}

    @property
    def location(self) -> str:
        return "in-memory snapshot store"

    def _new_part(self, snapshot_id: SnapshotId) -> "_StorePart":
        return _MemoryPart(self, snapshot_id)

    def _open(self, snapshot_id: SnapshotId) -> SnapshotReader:
        return SnapshotReader(snapshot_id, self._data[snapshot_id], _memory_name(snapshot_id))

    def _delete(self, snapshot_id: SnapshotId) -> None:
        del self._data[snapshot_id]  # open readers hold their own reference to the bytes

    def simulate_crash(self) -> None:
        """A kill -9: snapshots being written are gone, and their writers can no longer freeze."""
        self._writing.clear()


class _MemoryPart(_StorePart):
    def __init__(self, store: MemorySnapshotStore, snapshot_id: SnapshotId) -> None:
        super().__init__(store, snapshot_id, _memory_name(snapshot_id))
        self._frozen = store._data
        self._buffer = bytearray()

    def _write(self, view: memoryview) -> None:
        self._buffer += view

    def contents(self) -> bytes:
        return bytes(self._buffer)

    def _persist(self) -> None:
        self._frozen[self.snapshot_id] = bytes(self._buffer)

    def _remove(self) -> None:
        self._buffer = bytearray()


# ------------------------------------------------------------------------------ with the log


def validate_snapshots_and_log(store: SnapshotStore, replicated_log: ReplicatedLog) -> SnapshotId | None:
    """KIP-630's "Validation of Snapshot and Log", applied when a replica opens both.

    * A log starting above 0 must have a snapshot ending at or after its start: the records
      below the start are gone, and only a snapshot still holds their state. Without one
      this refuses (and changes nothing) rather than start from a hole.
    * Snapshots ending below the log start offset are deleted: the records that would
      follow them are gone from the log, so nothing can be rebuilt from them.
    * If the latest snapshot ends past the log end (a follower that fetched a snapshot and
      crashed before truncating), the log is emptied and restarted at the snapshot's end,
      and the snapshots before it go. The snapshot is validated first: a damaged one must
      not cost the log its records.

    Returns the latest snapshot, if any.
    """
    start = replicated_log.start_offset
    if start > 0 and not any(s.end_offset >= start for s in store.list()):
        raise SnapshotError(
            f"{store.location}: the log starts at offset {start}, but no snapshot ends at or after it "
            f"(snapshots: {[(s.end_offset, s.epoch) for s in store.list()] or 'none'}); the state of "
            f"offsets below {start} is lost, so the replica cannot start from this log"
        )
    for deleted in store.delete_before(start):
        log.info("%s: deleted snapshot %s, below the log start offset %d", store.location, deleted, start)
    latest = store.latest()
    if latest is not None and latest.end_offset > replicated_log.end_offset:
        log.info(
            "%s: snapshot %s ends past the log end %d: the log now starts at %d",
            store.location,
            latest,
            replicated_log.end_offset,
            latest.end_offset,
        )
        try:
            store.open_reader(latest).validate()
        except SnapshotError as e:
            raise SnapshotError(
                f"{e}; it ends past the log end {replicated_log.end_offset}, so the log would be emptied for it: "
                "refusing instead (move the damaged snapshot away to start from the log)"
            ) from None
        replicated_log.truncate_fully_and_start_at(latest.end_offset, latest.epoch)
        for deleted in store.delete_before(latest.end_offset):
            log.info("%s: deleted snapshot %s, below the new log start offset", store.location, deleted)
    return latest
