"""The cluster-metadata state machine on Raft: one object per node.

On every node it is the Raft listener feeding a MetadataCache: committed batches in order,
control batches as offsets to step over, snapshots at boot and after a fetch. On the leader
it is also the active controller: an admin operation is validated against the committed
image plus the records appended but not yet committed, its records appended, and its
answer resolved only when they commit in the same epoch. A leadership change fails every
operation still waiting with NOT_CONTROLLER, which clients retry.

Snapshots follow the SnapshotPolicy (bytes since the last snapshot and the cache's
changed-records ratio, or time). Making one is split in two so the writing can leave the
core's thread: `start_snapshot` (on the core's thread) picks the image and opens the
writer; `SnapshotJob.run` writes and freezes it from that immutable image while commits
go on; `finish_snapshot` tells the cache and the policy.
"""

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraft.controller.pending import NotControllerError, Pending
from kraft.metadata import MetadataCache, MetadataImage, apply_records, encode_record, snapshot_records
from kraft.metadata.controller import ControllerResult
from kraft.raft import CommittedBatch, LeaderAndEpoch, RaftCore
from kraft.raft.snapshot_policy import SnapshotPolicy
from kraft.storage import SnapshotReader, SnapshotWriter

log = logging.getLogger("kraft.controller")

SNAPSHOT_CHUNK = 10_000  # records handed to the snapshot writer at a time


@dataclass
class SnapshotJob:
    image: MetadataImage
    writer: SnapshotWriter
    reason: str

    def run(self) -> None:
        """Writes and freezes the snapshot; safe on another thread (the image is immutable)."""
        chunk: list[tuple[None, bytes]] = []
        for record in snapshot_records(self.image):
            chunk.append(record)
            if len(chunk) >= SNAPSHOT_CHUNK:
                self.writer.append(chunk)
                chunk = []
        if chunk:
            self.writer.append(chunk)
        self.writer.freeze()


class QuorumController:
    def __init__(self, policy: SnapshotPolicy | None = None) -> None:
        self.cache = MetadataCache()
        self.policy = policy or SnapshotPolicy()
        self.core: RaftCore | None = None  # attached once the core exists (it takes us as listener)
        self._pending: deque[Pending] = deque()
        self._working: MetadataImage | None = None  # committed image + appended, uncommitted records
        self._epoch = -1
        self._last_commit_time = 0
        self._snapshotting = False

    # ---------------------------------------------------------------- the Raft listener

    def handle_commit(self, batch: CommittedBatch) -> None:
        if batch.control:
            self.cache.advance(base_offset=batch.base_offset, last_offset=batch.last_offset, epoch=batch.epoch)
        else:
            self.cache.apply_batch(batch.records, base_offset=batch.base_offset, last_offset=batch.last_offset,
                                   epoch=batch.epoch)
        self._last_commit_time = batch.append_timestamp
        self.policy.record_commit(batch)
        while self._pending and self._pending[0].last_offset <= batch.last_offset:
            pending = self._pending.popleft()
            if batch.epoch == pending.epoch:
                pending.commit()
            else:
                pending.fail(NotControllerError(None, batch.epoch, ": its records were replaced by a new leader's"))
        if not self._pending:
            self._working = None

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        if leader.epoch != self._epoch:
            self._epoch = leader.epoch
            self._fail_pending(NotControllerError(leader.leader_id, leader.epoch, ": leadership changed"))

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        sid = reader.snapshot_id
        self.cache.load_snapshot(reader.records(), end_offset=sid.end_offset, epoch=sid.epoch)
        self.policy.reset()
        self._working = None

    def _fail_pending(self, error: Exception) -> None:
        while self._pending:
            self._pending.popleft().fail(error)
        self._working = None

    # ---------------------------------------------------------------- the active controller

    @property
    def working_image(self) -> MetadataImage:
        """What the next operation is validated against: committed, plus what is on its way."""
        return self._working if self._working is not None else self.cache.image

    def submit(self, operation: Callable[[MetadataImage], ControllerResult], now: int) -> Pending:
        """Runs `operation` against the working image and appends its records.

        Raises ControllerError (nothing appended) if the operation is refused, and
        NotControllerError on a node that is not the leader.
        """
        self._check_active()
        core = self.core
        assert core is not None
        result = operation(self.working_image)
        if not result.records:
            return Pending.resolved(result.response)
        epoch, last = core.append([(None, encode_record(r)) for r in result.records], now)
        self._working = apply_records(self.working_image, result.records, offset=last, epoch=epoch)
        pending = Pending(epoch, last, result.response)
        self._pending.append(pending)
        return pending

    def next_offset(self) -> int:
        """The offset the next appended record will get (Kafka's broker epoch is it)."""
        self._check_active()
        assert self.core is not None
        return self.core.next_offset

    @property
    def active(self) -> bool:
        """Leader, and caught up: every record before this epoch's LeaderChange is applied.

        A new leader's log may hold records of earlier epochs that are not committed yet;
        they commit with its LeaderChange. Until they are applied the committed image is
        not the whole truth, so operations validated against it could contradict them
        (allocate the same producer ids twice, say). Kafka's controller waits the same way.
        """
        core = self.core
        leader = core.leader_state if core is not None else None
        return leader is not None and self.cache.offset >= leader.epoch_start_offset

    def _check_active(self) -> None:
        if not self.active:
            core = self.core
            detail = "" if core is None or not core.is_leader else ": catching up with the previous epochs"
            raise NotControllerError(core.leader_id if core else None, core.epoch if core else -1, detail)

    # ---------------------------------------------------------------- snapshots

    def start_snapshot(self, now: int) -> SnapshotJob | None:
        """A snapshot of the committed image, if the policy says one is due and none is being
        written; call on the core's thread, then run the job anywhere and finish it here."""
        core = self.core
        image = self.cache.image
        if core is None or self._snapshotting or image.offset < 0:
            return None
        reason = self.policy.due(now, self.cache.changed_ratio)
        latest = core.snapshots.latest()
        if reason is None or (latest is not None and latest.end_offset >= image.end_offset):
            return None
        if image.end_offset < core.log.start_offset or image.end_offset > (core.high_watermark or 0):
            return None
        writer = core.create_snapshot(core.snapshot_id_at(image.end_offset), self._last_commit_time)
        self._snapshotting = True
        log.info("snapshot at offset %d started: %s", image.end_offset, reason)
        return SnapshotJob(image, writer, reason)

    def finish_snapshot(self, job: SnapshotJob, error: BaseException | None = None) -> None:
        self._snapshotting = False
        if error is not None:
            log.error("snapshot at offset %d failed: %s", job.image.end_offset, error)
            return
        self.cache.snapshot_written(job.image)
        self.policy.reset()

    def snapshot_now(self, now: int) -> Any:
        """start, run and finish in one go (the simulator; small images)."""
        job = self.start_snapshot(now)
        if job is not None:
            try:
                job.run()
            except BaseException as e:
                self.finish_snapshot(job, e)
                raise
            self.finish_snapshot(job)
        return job
