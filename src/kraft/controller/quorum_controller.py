"""The cluster-metadata state machine on Raft: one object per node.

On every node it is the Raft listener feeding a MetadataCache: committed batches in order,
control batches as offsets to step over, snapshots at boot and after a fetch. On the leader
it is also the active controller: an admin operation is validated against the committed
image plus the records appended but not yet committed (the working image), its records
replayed on the working image and then appended in one call, so they go out as one batch,
and its answer resolved only when they commit in the same epoch. A record the working image
refuses, or that cannot be encoded, is never appended. An operation that writes nothing
still read the working image, so its answer waits for the operation before it (Kafka ties
it to the last written offset the same way): "already unfenced" is only true once the
unfencing commits. A leadership change fails every operation still waiting with
NOT_CONTROLLER, which clients retry.

The active controller also writes what Kafka's writes on its own (`poll`): the bootstrap
records when the log holds no metadata.version yet (that feature level,
`kraft.derived.fencing` if the log is to use KIP-630's fencing events, and what `kraft storage
format` left in bootstrap.checkpoint: `bootstrap`, the first SCRAM users), and a NoOpRecord
when nothing was appended for `metadata.max.idle.interval.ms`, so that an idle log still
moves: followers' lag is measured against it, and readers see the leader is alive.

Snapshots follow the SnapshotPolicy (bytes since the last snapshot and the cache's
changed-records ratio, or time). Making one is split in two so the writing can leave the
core's thread: `start_snapshot` (on the core's thread) picks the image and opens the
writer; `SnapshotJob.run` writes and freezes it from that immutable image while commits
go on; `finish_snapshot` tells the cache and the policy, which keeps counting what was
committed meanwhile. The procedure is the raft layer's `Snapshotter`, which each group
coordinator uses too.
"""

import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from kraft.controller.pending import NotControllerError, Pending
from kraft.metadata import (
    ControllerError,
    Errors,
    InvalidRecordError,
    MetadataCache,
    MetadataImage,
    MetadataRecord,
    OperationTooLargeError,
    RecordEncodeError,
    encode_record,
    snapshot_records,
)
from kraft.metadata.collector import frozen_when_built
from kraft.metadata.image import DERIVED_FENCING, METADATA_VERSION
from kraft.metadata.operations import ControllerResult, check_record_count
from kraft.metadata.records import FeatureLevelRecord, NoOpRecord
from kraft.raft import CommittedBatch, LeaderAndEpoch, RaftCore
from kraft.raft.messages import METADATA
from kraft.statemachine.own_batches import OwnBatches
from kraft.statemachine.snapshot_jobs import SnapshotJob, Snapshotter
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage import SnapshotReader

log = logging.getLogger("kraft.controller")

# A bound on what a batch adds to its records' values: the batch header (61 bytes) and, per
# record, its length, attributes, timestamp and offset deltas, null key, value length and
# header count as varints (at most 5+1+10+5+1+5+1 bytes).
_BATCH_OVERHEAD, _RECORD_OVERHEAD = 61, 28
# The metadata.version a new log starts at: 3.3-IV3, the first production KRaft level, whose
# record versions are the ones kraft writes (it writes the lowest version holding a record).
BOOTSTRAP_METADATA_VERSION = 7
BOOTSTRAP_RELEASE = "3.3-IV3"  # that level's name, as kafka-storage prints it
DEFAULT_IDLE_INTERVAL_MS = 500  # Kafka's metadata.max.idle.interval.ms


class QuorumController:
    def __init__(
        self,
        policy: SnapshotPolicy | None = None,
        freeze_loaded_images: bool = False,
        *,
        idle_interval_ms: int = DEFAULT_IDLE_INTERVAL_MS,
        derived_fencing: bool = False,
    ) -> None:
        """`freeze_loaded_images`: a long-running process (a server) keeps each image a
        snapshot load gives it out of the collector's walks (`frozen_when_built`).
        `idle_interval_ms`: 0 writes no NoOps. `derived_fencing`: a new log (bootstrapped
        here) fences by KIP-630's events; an existing log keeps the rules it started with."""
        self.cache = MetadataCache()
        self.policy = policy or SnapshotPolicy()
        self.idle_interval_ms = idle_interval_ms
        self.derived_fencing = derived_fencing
        self._last_append = 0
        self._loading = frozen_when_built if freeze_loaded_images else contextlib.nullcontext
        self.core: RaftCore | None = None  # attached once the core exists (it takes us as listener)
        self._pending: deque[Pending] = deque()
        self._working: MetadataImage | None = None  # committed image + appended, uncommitted records
        self._built: OwnBatches[MetadataImage] = OwnBatches()  # taken at commit (statemachine/own_batches.py)
        self._epoch = -1
        self._last_commit_time = 0
        self.snapshots = Snapshotter(self.policy, str(METADATA))
        self.bootstrap: tuple[MetadataRecord, ...] = ()  # bootstrap.checkpoint's records (the node sets them)

    # ---------------------------------------------------------------- the Raft listener

    def handle_commit(self, batch: CommittedBatch) -> None:
        built = self._built.committed(batch)
        if batch.control:
            self.cache.advance(base_offset=batch.base_offset, last_offset=batch.last_offset, epoch=batch.epoch)
        elif built is not None and not self.cache.in_transaction:
            self.cache.adopt(*built, base_offset=batch.base_offset)
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
        with self._loading():
            self.cache.load_snapshot(reader.records(), end_offset=sid.end_offset, epoch=sid.epoch)
        self.policy.reset()
        self._working = None
        self._built.clear()

    def _fail_pending(self, error: Exception) -> None:
        while self._pending:
            self._pending.popleft().fail(error)
        self._working = None
        self._built.clear()

    # ---------------------------------------------------------------- the active controller

    @property
    def working_image(self) -> MetadataImage:
        """What the next operation is validated against: committed, plus what is on its way."""
        return self._working if self._working is not None else self.cache.image

    def submit(self, operation: Callable[[MetadataImage], ControllerResult], now: int) -> Pending:
        """Runs `operation` against the working image and appends its records in one batch.

        Raises ControllerError (nothing appended) if the operation is refused: by its own
        validation, for writing more records or bytes than one batch may hold, or for a
        record that cannot be encoded or replayed. Raises NotControllerError on a node that
        is not the active controller.
        """
        self._check_active()
        core = self.core
        assert core is not None
        result = operation(self.working_image)
        records = result.records
        if not records:
            return self._after_last(result.response)
        check_record_count(len(records))
        try:
            values = [(None, encode_record(r)) for r in records]
        except RecordEncodeError as e:
            raise ControllerError(Errors.INVALID_REQUEST, f"A record of this request cannot be written: {e}") from None
        size = _BATCH_OVERHEAD + sum(_RECORD_OVERHEAD + len(v) for _, v in values)
        if size > core.config.max_batch_bytes:
            raise OperationTooLargeError(
                Errors.POLICY_VIOLATION,
                f"Unable to perform excessively large batch operation: its {len(records)} records take up to "
                f"{size} bytes, more than the {core.config.max_batch_bytes} of one batch",
            )
        last = core.next_offset + len(records) - 1
        try:
            working, changed = result.applied_to(self.working_image, offset=last, epoch=core.epoch)
        except InvalidRecordError as e:  # the operation contradicts the image it validated against: a bug
            log.error("controller operation refused by its own working image: %s", e)
            raise ControllerError(Errors.UNKNOWN_SERVER_ERROR, f"The operation's records do not apply: {e}") from None
        epoch, appended = core.append(values, now)
        self._last_append = now
        assert appended == last, f"the core put the records at {appended}, not {last}"
        self._working = working
        self._built.appended(last - len(records) + 1, last, epoch, working, changed)
        pending = Pending(epoch, last, result.response)
        self._pending.append(pending)
        return pending

    def poll(self, now: int) -> None:
        """What the active controller writes unasked: the bootstrap records of a new log, and
        a NoOpRecord when the log was idle for idle_interval_ms. Call after every core step."""
        if not self.active:
            self._last_append = now  # the idle clock starts when this node becomes active
            return
        if METADATA_VERSION not in self.working_image.features:
            if not self._pending:  # once: the records on their way are seen by the working image
                self.submit(lambda _: ControllerResult(self._bootstrap_records(), None), now)
        elif self.idle_interval_ms > 0 and now - self._last_append >= self.idle_interval_ms:
            self.submit(lambda _: ControllerResult((NoOpRecord(),), None), now)

    def _bootstrap_records(self) -> tuple[MetadataRecord, ...]:
        records: list[MetadataRecord] = [
            FeatureLevelRecord(name=METADATA_VERSION, feature_level=BOOTSTRAP_METADATA_VERSION)]
        if self.derived_fencing:
            records.append(FeatureLevelRecord(name=DERIVED_FENCING, feature_level=1))
        records += [r for r in self.bootstrap  # the file's metadata.version is the one above
                    if not (isinstance(r, FeatureLevelRecord) and r.name == METADATA_VERSION)]
        return tuple(records)

    def next_deadline(self, now: int) -> int | None:
        """When `poll` next has something to do on its own (None: nothing planned)."""
        if not self.active or self.idle_interval_ms <= 0:
            return None
        return self._last_append + self.idle_interval_ms

    def _after_last(self, response: Any) -> Pending:
        """The answer of an operation that writes nothing: it read the working image, so it
        holds once the last operation still waiting commits, and fails with it."""
        if not self._pending:
            return Pending.resolved(response)
        last = self._pending[-1]
        pending = Pending(last.epoch, last.last_offset, response)
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
        """A snapshot of the committed image if one is due (see kraft.statemachine.snapshot_jobs);
        never of an image that ends inside a batch (an open transaction's Begin)."""
        image = self.cache.image
        if not self.cache.batch_aligned:
            return None
        return self.snapshots.start(self.core, image, lambda: snapshot_records(image),
                                    changed_ratio=self.cache.changed_ratio, last_commit_time=self._last_commit_time,
                                    now=now)

    def finish_snapshot(self, job: SnapshotJob, error: BaseException | None = None) -> None:
        if self.snapshots.finish(job, error):
            self.cache.snapshot_written(job.image)
