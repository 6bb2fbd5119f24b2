"""A state machine's own snapshots: when one starts, the job that writes it, and what it resets.

The QuorumController and every GroupCoordinator snapshot the same way (KIP-630, "When to
Snapshot"): at most one snapshot at a time, of the committed image, started on the core's
thread only when the SnapshotPolicy says one is due, only at an offset that is committed and
still in the log, and only past the latest snapshot. The job then writes the image on a worker
thread while commits go on (an image is immutable, so the thread sees one consistent state),
handing records to the writer in chunks so a large image never sits in memory twice. Its end
tells the policy, and through `finish`'s caller the state machine's `ChangedRecords`, what
the snapshot now covers. This module is that procedure, once, for every state machine.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage.snapshot import SnapshotId, SnapshotWriter

log = logging.getLogger("kraft.raft")

SNAPSHOT_CHUNK = 10_000  # records handed to the snapshot writer at a time


class SnapshotImage(Protocol):
    """A state machine's committed image as far as snapshotting goes."""

    @property
    def offset(self) -> int:
        """The last offset applied (-1 before any)."""
        ...

    @property
    def end_offset(self) -> int:
        """The offset after the last one applied: a snapshot of this image's id."""
        ...


class _Snapshots(Protocol):
    def latest(self) -> SnapshotId | None: ...


class _Log(Protocol):
    @property
    def start_offset(self) -> int: ...


class SnapshotSource(Protocol):
    """What starting a snapshot needs of the partition's Raft core."""

    @property
    def high_watermark(self) -> int | None: ...

    @property
    def log(self) -> _Log: ...

    @property
    def snapshots(self) -> _Snapshots: ...

    def snapshot_id_at(self, end_offset: int) -> SnapshotId: ...

    def create_snapshot(self, snapshot_id: SnapshotId, last_contained_log_time: int) -> SnapshotWriter: ...


Records = Iterable[tuple[bytes | None, bytes]]


@dataclass
class SnapshotJob:
    """A snapshot being written: `run` it on a worker thread, then `Snapshotter.finish` it."""

    image: Any
    writer: SnapshotWriter
    reason: str
    records: Callable[[], Records]  # the image's records, in the order a load replays them

    def run(self) -> None:
        """Writes and freezes the snapshot; a failure discards the unfinished file."""
        with self.writer:
            items = iter(self.records())
            while chunk := list(islice(items, SNAPSHOT_CHUNK)):
                self.writer.append(chunk)
            self.writer.freeze()


class Snapshotter:
    """One state machine's snapshots: started by its policy, one at a time."""

    def __init__(self, policy: SnapshotPolicy, name: str) -> None:
        self.policy = policy
        self.name = name  # the partition, for the log lines
        self.writing = False

    def start(self, core: SnapshotSource | None, image: SnapshotImage, records: Callable[[], Records], *,
              changed_ratio: float, last_commit_time: int, now: int) -> SnapshotJob | None:
        """A job for a snapshot of `image` if one is due and none is being written; call on
        the core's thread, with the image the state machine has committed."""
        if core is None or self.writing or image.offset < 0:
            return None
        reason = self.policy.due(now, changed_ratio)
        latest = core.snapshots.latest()
        if reason is None or (latest is not None and latest.end_offset >= image.end_offset):
            return None
        if image.end_offset < core.log.start_offset or image.end_offset > (core.high_watermark or 0):
            return None
        writer = core.create_snapshot(core.snapshot_id_at(image.end_offset), last_commit_time)
        self.writing = True
        self.policy.snapshot_started(image.end_offset)
        log.info("%s: snapshot at offset %d started: %s", self.name, image.end_offset, reason)
        return SnapshotJob(image, writer, reason, records)

    def finish(self, job: SnapshotJob, error: BaseException | None = None) -> bool:
        """Whether the job's snapshot was written (a failure is retried after the policy's
        backoff: a failing disk would only fail again at once)."""
        self.writing = False
        if error is not None:
            log.error("%s: snapshot at offset %d failed (retried in %d ms): %s", self.name, job.image.end_offset,
                      self.policy.retry_backoff_ms, error)
            self.policy.snapshot_failed()
            return False
        self.policy.snapshot_finished(job.image.end_offset)
        return True
