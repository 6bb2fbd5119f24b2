"""The group coordinator of one `__consumer_offsets` partition, on that partition's Raft log.

It plugs into its partition's Raft core as the metadata controller plugs into the metadata
partition's: it is the core's listener (committed batches in order, leader changes,
snapshots loaded), it appends its records through the core as the leader (`core`, a
RaftPartition), and it writes snapshots of its committed state with a job that may run on
another thread. On every replica the committed image (`image`) is the partition's records
replayed, so a follower that becomes leader has every committed offset and group.

On the leader, once it has applied every record of the epochs before its own (`active`),
it serves the group APIs. An operation runs in one step of the core, against the working
image (the committed one plus what it appended) and the groups rebalancing in memory
(membership.py); its records go out as one batch in that step; its answer is held until
every record appended before the answer was given has committed, and fails with
NOT_COORDINATOR if the leadership changes first, or COORDINATOR_NOT_AVAILABLE (through
REQUEST_TIMED_OUT) if the commit takes longer than `offsets.commit.timeout.ms`. So a client
is never told of a state a new leader could lose, and a state nobody was told of may be
lost, as in Kafka. No clock is read: every operation and `poll` is handed `now`, and member
ids come from a seeded random source, so a test replays exactly.

The node's part (the interface the wiring must provide, as node.py provides the
controller's): create the core of the partition with this coordinator as its listener and
set `coordinator.core`; run each operation and `poll(now)` inside a step of that core
(after every step, as `controller.poll`); arm a timer for `next_deadline(now)`; start
`start_snapshot(now)`'s job on a worker thread and call `finish_snapshot(job, error)` on the
core's thread; treat GroupRecordError from a commit as fatal, as ReplayError.
"""

from collections import deque
from collections.abc import Callable, Sequence
from random import Random
from typing import Any, TypeVar

from kraft.groups.group_config import GroupConfig
from kraft.groups.group_messages import CommitRequest, DescribedGroup, JoinRequest, ListedGroup, SyncRequest
from kraft.groups.offsets import Offsets, TopicPartitions
from kraft.groups.offsets_records import GroupRecord, encode_record
from kraft.groups.partition import RaftPartition
from kraft.groups.partitioning import OFFSETS_TOPIC
from kraft.groups.rebalance import Membership
from kraft.groups.replies import CoordinatorError, Reply
from kraft.groups.state import GroupsCache, GroupsImage
from kraft.groups.wire import GroupRecordError
from kraft.protocol import ErrorCode
from kraft.raft import CommittedBatch, LeaderAndEpoch, RecordBatchTooLargeError
from kraft.statemachine.own_batches import OwnBatches
from kraft.statemachine.snapshot_jobs import SnapshotJob, Snapshotter
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage import SnapshotReader

T = TypeVar("T")


class GroupCoordinator:
    def __init__(self, partition: int = 0, config: GroupConfig | None = None, policy: SnapshotPolicy | None = None,
                 rng: Random | None = None) -> None:
        self.partition = partition
        self.name = f"{OFFSETS_TOPIC}-{partition}"
        self.config = config or GroupConfig()
        self.cache = GroupsCache(self.name)
        self.policy = policy or SnapshotPolicy()
        self.core: RaftPartition | None = None  # attached once the core exists (it takes us as listener)
        self.membership = Membership(self, self.config, rng if rng is not None else Random(partition))
        self.offsets = Offsets(self, self.membership, self.config)
        self._working: GroupsImage | None = None
        self._epoch = -1
        self._loaded_epoch: int | None = None  # the epoch `membership` was loaded for, as leader
        self._last_appended = -1  # the offset of the last record appended in this epoch
        self._open: dict[Reply, None] = {}  # replies not yet sent, in order of creation
        self._given: list[tuple[Reply, Any, bool]] = []  # answers of the operation under way
        self._held: deque[tuple[int, Reply]] = deque()  # (deadline, reply) waiting for their commit
        self._built: OwnBatches[GroupsImage] = OwnBatches()  # taken at commit (statemachine/own_batches.py)
        self._last_commit_time = 0
        self.snapshots = Snapshotter(self.policy, self.name)

    # ---------------------------------------------------------------- the Raft listener

    def handle_commit(self, batch: CommittedBatch) -> None:
        built = self._built.committed(batch)
        if batch.control:
            self.cache.advance(base_offset=batch.base_offset, last_offset=batch.last_offset)
        elif built is not None:
            self.cache.adopt(*built, base_offset=batch.base_offset)
        else:
            self.cache.apply_batch(batch.records, base_offset=batch.base_offset, last_offset=batch.last_offset)
        self._last_commit_time = batch.append_timestamp
        self.policy.record_commit(batch)
        while self._held and self._held[0][1].last_offset <= batch.last_offset:
            _, reply = self._held.popleft()
            if batch.epoch == reply.epoch:
                self._send(reply)
            else:
                self._fail(reply, CoordinatorError(ErrorCode.not_coordinator,
                                                   f"{self.name}: its records were replaced by a new leader's"))
        if self._working is not None and self.cache.offset >= self._last_appended:
            self._working = None

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        if leader.epoch != self._epoch:
            self._epoch = leader.epoch
            who = f"node {leader.leader_id}" if leader.leader_id is not None else "not known"
            self._reset(CoordinatorError(ErrorCode.not_coordinator,
                                         f"{self.name}: leadership changed (epoch {leader.epoch}, leader {who})"))

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        sid = reader.snapshot_id
        self.cache.load_snapshot(reader.records(), end_offset=sid.end_offset)
        self.policy.reset()
        self._reset(CoordinatorError(ErrorCode.not_coordinator, f"{self.name}: a snapshot was loaded"))

    def _reset(self, error: CoordinatorError) -> None:
        """Forgets what only the leader of an epoch held: the working image, the groups in
        memory and every reply not yet sent."""
        self.membership.clear()
        self._loaded_epoch = None
        self._working = None
        self._built.clear()
        self._last_appended = -1
        self._held.clear()
        self._given.clear()
        for reply in list(self._open):
            self._fail(reply, error)

    def _send(self, reply: Reply) -> None:
        self._open.pop(reply, None)
        reply.commit()

    def _fail(self, reply: Reply, error: CoordinatorError) -> None:
        self._open.pop(reply, None)
        if not reply.done:
            reply.fail(error)

    # ---------------------------------------------------------------- state

    @property
    def image(self) -> GroupsImage:
        """The committed state: what every replica of the partition has applied."""
        return self.cache.image

    @property
    def committed(self) -> GroupsImage:
        return self.cache.image

    @property
    def working(self) -> GroupsImage:
        """The committed state plus the records this leader appended and are not committed yet."""
        return self._working if self._working is not None else self.cache.image

    @property
    def active(self) -> bool:
        """Leader, and every record before this epoch's LeaderChange applied (until then the
        committed image is not the whole truth, and groups answered from it could be wrong)."""
        core = self.core
        leader = core.leader_state if core is not None else None
        return leader is not None and self.cache.offset >= leader.epoch_start_offset

    def _check_active(self, now: int) -> RaftPartition:
        core = self.core
        if core is None or not core.is_leader:
            who = f"node {core.leader_id}" if core is not None and core.leader_id is not None else "not known"
            raise CoordinatorError(ErrorCode.not_coordinator, f"not the leader of {self.name} (the leader is {who})")
        if not self.active:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress,
                                   f"{self.name}: still applying the records of earlier epochs")
        if self._loaded_epoch != core.epoch:
            self.membership.load(self.cache.image, now)
            self._loaded_epoch = core.epoch
        return core

    # ---------------------------------------------------------------- what membership and offsets use

    def write(self, records: Sequence[GroupRecord], now: int) -> None:
        core = self.core
        assert core is not None, "written only by an operation, on an active coordinator"
        try:
            values = [encode_record(r) for r in records]
            epoch, last = core.append(values, now)
        except (GroupRecordError, RecordBatchTooLargeError) as e:
            raise CoordinatorError(ErrorCode.unknown_server_error,
                                   f"{self.name}: the records cannot be written: {e}") from e
        self._working, changed = self.working.apply(records, last)
        self._built.appended(last - len(values) + 1, last, epoch, self._working, changed)
        self._last_appended = last

    def new_reply(self) -> Reply:
        reply = Reply()
        self._open[reply] = None
        return reply

    def answer(self, reply: Reply, value: Any, wait: bool = True) -> None:
        """Given at the end of the operation, when its own records are appended too."""
        self._given.append((reply, value, wait))

    def _give_answers(self, now: int) -> None:
        core = self.core
        epoch = core.epoch if core is not None else -1
        committed = self.cache.offset >= self._last_appended
        deadline = now + self.config.commit_timeout_ms
        for reply, value, wait in self._given:
            if not wait or committed:
                reply.answer(value, -1, -1)
                self._send(reply)
            else:
                reply.answer(value, epoch, self._last_appended)
                self._held.append((deadline, reply))
        self._given.clear()

    # ---------------------------------------------------------------- operations (the leader's)

    def _operation(self, now: int, action: Callable[[], T]) -> T:
        """Runs one operation (or the timers) on the active coordinator; raises
        CoordinatorError if it is not."""
        self._check_active(now)
        try:
            return action()
        finally:
            self._give_answers(now)

    def join_group(self, request: JoinRequest, now: int) -> Reply:
        return self._operation(now, lambda: self.membership.join(request, now))

    def sync_group(self, request: SyncRequest, now: int) -> Reply:
        return self._operation(now, lambda: self.membership.sync(request, now))

    def heartbeat(self, group_id: str, member_id: str, generation: int, group_instance_id: str | None,
                  now: int) -> Reply:
        return self._operation(now, lambda: self.membership.heartbeat(group_id, member_id, generation,
                                                                      group_instance_id, now))

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]], now: int) -> Reply:
        return self._operation(now, lambda: self.membership.leave(group_id, members, now))

    def commit_offsets(self, request: CommitRequest, now: int) -> Reply:
        return self._operation(now, lambda: self.offsets.commit(request, now))

    def fetch_offsets(self, group_id: str, topics: TopicPartitions | None, now: int,
                      require_stable: bool = False) -> Reply:
        return self._operation(now, lambda: self.offsets.fetch(group_id, topics, require_stable, now))

    def delete_offsets(self, group_id: str, topics: TopicPartitions, now: int) -> Reply:
        return self._operation(now, lambda: self.offsets.delete(group_id, topics, now))

    def delete_groups(self, group_ids: Sequence[str], now: int) -> Reply:
        return self._operation(now, lambda: self.offsets.delete_groups(group_ids, now))

    def describe_groups(self, group_ids: Sequence[str], now: int) -> Reply:
        def describe() -> Reply:
            reply = self.new_reply()
            described: list[DescribedGroup] = [self.membership.describe(g, now) for g in group_ids]
            self.answer(reply, described)
            return reply

        return self._operation(now, describe)

    def list_groups(self, now: int, states: Sequence[str] = (), types: Sequence[str] = ()) -> Reply:
        def listing() -> Reply:
            reply = self.new_reply()
            listed: list[ListedGroup] = self.membership.list_groups(states, types)
            self.answer(reply, listed)
            return reply

        return self._operation(now, listing)

    # ---------------------------------------------------------------- time

    def poll(self, now: int) -> None:
        """Runs the timeouts that are due (sessions, join and sync phases) and fails answers
        whose records did not commit in time. Call after every step of the partition's core."""
        if self.active:
            self._operation(now, lambda: self.membership.run_due(now))
        while self._held and self._held[0][0] <= now:
            _, reply = self._held.popleft()
            self._fail(reply, CoordinatorError(
                ErrorCode.request_timed_out,
                f"{self.name}: the records were not committed within {self.config.commit_timeout_ms} ms"))

    def next_deadline(self, now: int) -> int | None:
        """When `poll` next has something to do (None: nothing planned). `now` is not needed
        here; the node's driver asks every state machine so (the controller's idle NoOp)."""
        deadlines = [d for d in (self.membership.next_deadline(), self._held[0][0] if self._held else None)
                     if d is not None]
        return min(deadlines, default=None)

    # ---------------------------------------------------------------- snapshots

    def start_snapshot(self, now: int) -> SnapshotJob | None:
        """A snapshot of the committed image if one is due (see kraft.statemachine.snapshot_jobs)."""
        image = self.cache.image
        return self.snapshots.start(self.core, image, image.snapshot_records, changed_ratio=self.cache.changed_ratio,
                                    last_commit_time=self._last_commit_time, now=now)

    def finish_snapshot(self, job: SnapshotJob, error: BaseException | None = None) -> None:
        if self.snapshots.finish(job, error):
            self.cache.snapshot_written(job.image)
