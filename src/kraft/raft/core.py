"""The Raft core (KIP-595, with KIP-320 fencing): a deterministic state machine.

It never touches a socket, a thread, a sleep or the clock; it does call the storage it is
handed, which does I/O: it appends to and truncates its log and writes quorum-state inside a
step, as Kafka's KafkaRaftClient does (not etcd's raft, which hands entries out to persist).
Only appends are left for the driver to fsync (wants_flush, then handle_flush). A driver (the
asyncio server, or the simulator) owns the clock, the network and the fsync of appends and
steps the core with what happens:

    handle_request(handle, request, now)      a peer's request; the reply goes to the outbox
    handle_response(request_id, response, now) the answer to one of our requests
    handle_send_failure(request_id, now)       it could not be delivered, or timed out
    handle_flush(now)                          the driver fsynced the log (see wants_flush)
    tick(now)                                  time passed (call by next_deadline())

and after each step sends what `poll_outbox()` returns: `Send` (a request of ours, to a
node) and `Reply` (the answer to a handle it gave us). Everything else the core touches is
handed to it: the ReplicatedLog, the QuorumStateStore, and a seeded random source.

The core keeps the dispatch, the requests' checks, Vote and Fetch, and commits. What each
role holds is its role object (roles.py), entered only through QuorumState
(quorum_state.py), which makes every transition durable first and refuses the ones Raft
forbids. The epoch rules are epochs.py's, shared with the client listener; appends queue in
accumulator.py; snapshots are seen through snapshot_catalog.py, served and fetched by
snapshot_fetch.py, a follower's download driven by follower_download.py, and retention.py
says where the log may start. Voter changes (KIP-853) are voter_changes.py's, on the rules
of voter_change_rules.py. Counting voters is quorum.py's.

Durability rules kept here: quorum-state is written (and is durable on return) before a
vote is granted or an epoch entered; a follower fetches only from a fully flushed log, so
the FetchOffset it reports, which the leader counts toward the high watermark, is on
disk; the leader counts its own log only up to its flushed end.
"""

import logging
from collections.abc import Sequence
from random import Random
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft import kraft_upgrade, membership_messages, snapshot_fetch
from kraft.raft import messages as m
from kraft.raft.accumulator import BatchAccumulator
from kraft.raft.announcements import Announcements
from kraft.raft.commits import CommitDelivery
from kraft.raft.elections import Elections
from kraft.raft.epochs import EpochHistory, fence
from kraft.raft.follower_download import FollowerDownload
from kraft.raft.gate import Gate
from kraft.raft.leader import LeaderState
from kraft.raft.outbox import Outbox, Reply, Send
from kraft.raft.parked_fetches import ParkedFetch
from kraft.raft.quorum import VoteResult, vote_result
from kraft.raft.quorum_state import QuorumState
from kraft.raft.raft_config import RaftConfig
from kraft.raft.raft_errors import InvariantViolation, NotLeaderError
from kraft.raft.retention import LogStart
from kraft.raft.roles import Campaign, Candidate, Follower, Leader, Resigned, Role, RoleState, Unattached
from kraft.raft.snapshot_catalog import SnapshotCatalog
from kraft.raft.snapshot_metrics import SnapshotMetrics
from kraft.raft.state_machine import LeaderAndEpoch, Listener
from kraft.raft.voter_changes import VoterChanges
from kraft.raft.voters import Voters, VoterSet
from kraft.records import LeaderChangeMessage, SimpleRecord, build_control_batch
from kraft.records.control import ControlMessage
from kraft.storage import (
    InvalidAppendError,
    MemorySnapshotStore,
    OffsetAndEpoch,
    QuorumStateStore,
    ReplicatedLog,
    SnapshotId,
    SnapshotStore,
    SnapshotWriter,
    validate_snapshots_and_log,
)

log = logging.getLogger("kraft.raft")

NO_LEADER = m.NO_LEADER


class RaftCore:
    def __init__(
        self,
        config: RaftConfig,
        raft_log: ReplicatedLog,
        store: QuorumStateStore,
        rng: Random,
        now: int,
        listener: Listener | None = None,
        snapshots: SnapshotStore | None = None,
        metrics: SnapshotMetrics | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log = raft_log
        self.snapshots = snapshots if snapshots is not None else MemorySnapshotStore()
        self.metrics = metrics
        self.rng = rng
        self.listener = listener
        self.voters = Voters(VoterSet.static(config.voters) if config.voters else None)
        self.gate = Gate(config, self.voters)
        self.quorum = QuorumState(config, self.voters, store, rng, self.gate, self._switched)
        self.history = EpochHistory(raft_log, self.snapshots)
        self.catalog = SnapshotCatalog(self.snapshots, metrics)
        self.outbox = Outbox(config.request_timeout_ms, config.retry_backoff_ms)
        self.high_watermark: int | None = None
        self._now_hint = now  # the time of the step in progress (or the last one)
        self.commits = CommitDelivery(raft_log, listener, config.max_fetch_bytes)
        self._max_batch_bytes = min(config.max_batch_bytes, raft_log.max_batch_bytes)
        self._notified: LeaderAndEpoch | None = None
        self.announcements = Announcements(config, self.voters, self.quorum, self.outbox, self.gate)
        self.elections = Elections(config, self.voters, self.quorum, self.outbox, self.gate, self.history, rng, self._maybe_win)
        self.log_start = LogStart(config, self.voters, raft_log, self.snapshots, self.catalog)
        self.voter_changes = VoterChanges(config, self.voters, self.quorum, self.outbox, self.gate,
                                          self._validate_leader_epoch, self._append_control)
        self.follower_download = FollowerDownload(config, self.quorum, self.outbox, self.snapshots,
                                                  self._observe_snapshots, self._install)
        self._start(now)

    # ================================================================ queries

    @property
    def role(self) -> Role:
        return self.quorum.role

    @property
    def state(self) -> RoleState:
        """The current role's object (roles.py): what only this role holds."""
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int | None:
        return self.quorum.leader_id

    @property
    def voted_id(self) -> int | None:
        return self.quorum.voted_id

    @property
    def is_voter(self) -> bool:
        return self.voters.contains(self.node_id)

    @property
    def is_leader(self) -> bool:
        return self.role == Role.LEADER

    @property
    def handing_over(self) -> bool:
        """A resigned leader whose EndQuorumEpoch has not yet reached every voter, and no
        newer epoch seen: a graceful stop waits while this holds (or a timeout passes), so
        every possible successor learns to campaign now rather than after a fetch timeout."""
        state = self.state
        return isinstance(state, Resigned) and not set(self.voters.ids) <= state.end_quorum_acked

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.leader_id, self.epoch)

    @property
    def wants_flush(self) -> bool:
        """True when the log holds appends that are not on disk: the driver should flush it
        and then call handle_flush()."""
        return self.log.end_offset > self.log.last_flushed_offset

    @property
    def leader_state(self) -> LeaderState | None:
        state = self.state
        return state.progress if isinstance(state, Leader) else None

    def poll_outbox(self) -> list[Send | Reply]:
        return self.outbox.take()

    def next_deadline(self) -> int:
        """The earliest time at which tick() has something to do."""
        now = self._now_hint
        deadlines = self.outbox.deadlines(now) + self.state.deadlines(now)
        if not deadlines:
            return now + self.config.election_timeout_ms
        # A deadline already passed is one the last step could not act on yet (a fetch
        # waiting for a flush): look again soon, never in a loop at the same instant.
        return max(min(deadlines), now + 1)

    # ================================================================ driver entry points

    def handle_request(self, handle: Any, request: m.RaftRequest, now: int) -> None:
        self._now_hint = now
        match request:
            case m.VoteRequest():
                self._on_vote_request(handle, request, now)
            case m.BeginQuorumEpochRequest():
                self.announcements.on_begin_request(handle, request, now)
            case m.EndQuorumEpochRequest():
                self.announcements.on_end_request(handle, request, now)
            case m.FetchRequest():
                self._on_fetch_request(handle, request, now)
            case m.FetchSnapshotRequest():
                self._on_fetch_snapshot_request(handle, request, now)
            case m.DescribeQuorumRequest():
                self._on_describe_quorum_request(handle, request, now)
            case (membership_messages.AddRaftVoterRequest() | membership_messages.RemoveRaftVoterRequest()
                  | membership_messages.UpdateRaftVoterRequest()):
                self.voter_changes.on_request(handle, request, now)
            case _:
                raise TypeError(f"the Raft core does not serve {type(request).__name__}")
        self._poll(now)

    def handle_response(self, request_id: int, response: m.RaftResponse, now: int) -> None:
        self._now_hint = now
        destination = self.outbox.complete(request_id)
        if destination is not None:
            match response:
                case m.VoteResponse():
                    self._on_vote_response(destination, response, now)
                case m.BeginQuorumEpochResponse():
                    self.announcements.on_begin_response(destination, response, now)
                case m.EndQuorumEpochResponse():
                    self.announcements.on_end_response(destination, response, now)
                case m.FetchResponse():
                    self._on_fetch_response(destination, response, now)
                case m.FetchSnapshotResponse():
                    self.follower_download.on_response(destination, response, now)
                case membership_messages.UpdateRaftVoterResponse():
                    self.voter_changes.on_update_response(destination, response, now)
                case membership_messages.AddRaftVoterResponse() | membership_messages.RemoveRaftVoterResponse():
                    self.voter_changes.on_join_response(destination, response, now)
                case _:
                    raise TypeError(f"unexpected response {type(response).__name__}")
        self._poll(now)

    def handle_send_failure(self, request_id: int, now: int) -> None:
        self._now_hint = now
        destination = self.outbox.complete(request_id)
        if destination is not None:
            self.outbox.back_off(destination, now)
            self.elections.on_unreachable(destination)
        self._poll(now)

    def handle_flush(self, now: int) -> None:
        self._now_hint = now
        self._poll(now)

    def complete_fetch(self, handle: Any, now: int) -> None:
        """Answers the Fetch parked as `handle` now, with what there is (nothing, if it is no
        longer parked). A node answers a Fetch naming several partitions as soon as one of them
        has something to say, as Kafka's fetch purgatory completes a request when any of its
        partitions can; the others' parts are completed so."""
        self._now_hint = now
        state = self.state
        if isinstance(state, Leader):
            parked = state.parked.take(handle)
            if parked is not None:
                self._answer_fetch(parked)

    def fetch_answer_at_end(self) -> m.FetchResponse:
        """Leader: what a Fetch at the log's end with no news is answered when it is completed:
        no records, this leader's high watermark and log start. Reads only; the node's fetch
        batching gives it to a partition it left out of a step (fetch_batch.serve_across)."""
        return self._fetch_answer()

    def tick(self, now: int) -> None:
        self._now_hint = now
        self.outbox.expire(now)
        self._poll(now)

    # ================================================================ state machine API

    def append(self, records: Sequence[SimpleRecord | tuple], now: int) -> tuple[int, int]:
        """Queues records for the log; returns (epoch, offset of the last one).

        The records of one call go into one batch, never split between batches, so they
        commit all together or not at all; calls are batched together while they fit.
        They are committed when the high watermark passes that offset in that same epoch;
        if the epoch changes first, they may never be. Raises NotLeaderError on a replica
        that is not the leader, and RecordBatchTooLargeError (nothing queued) if the
        records cannot fit in one batch.
        """
        if not records:
            raise ValueError("nothing to append")
        state = self.state
        if not isinstance(state, Leader):
            raise NotLeaderError(self.leader_id, self.epoch)
        last = self.log.end_offset + state.appends.count + len(records) - 1
        state.appends.add(records, now)
        if self._awaited(state):  # nothing in flight: no timer between a write and its replication
            self._drain(state, now)
            self._answer_parked_fetches(state, now)
        return self.epoch, last

    @property
    def next_offset(self) -> int:
        """Leader: the offset the next appended record will get."""
        state = self.state
        return self.log.end_offset + (state.appends.count if isinstance(state, Leader) else 0)

    def resign(self, now: int) -> None:
        """Graceful shutdown of a leader: hand over at once via EndQuorumEpoch."""
        self._now_hint = now
        if self.role == Role.LEADER:
            self._become_resigned(now)
        self._poll(now)

    # ================================================================ startup and transitions

    def _start(self, now: int) -> None:
        latest = validate_snapshots_and_log(self.snapshots, self.log)
        self._observe_snapshots(now)
        if latest is not None:
            self._load_snapshot(latest)
        for batch in self.log.control_batches(latest.end_offset if latest is not None else 0):
            self.voters.observe_batch(batch)
        self.voter_changes.settled()
        self.quorum.restore(self.quorum.store.read(), self.history.last_epoch(), now)
        self._maybe_win(now)  # a restored candidate of a single-voter quorum
        self._poll(now)

    def _switched(self, old: RoleState, old_epoch: int) -> None:
        """What leaving a role means, once the new one is durable (QuorumState calls this)."""
        if isinstance(old, Leader):  # its parked fetches learn the new leader and epoch, if known
            error = self._fetch_error(ErrorCode.not_leader_or_follower)
            for parked in old.parked:
                self.outbox.reply(parked.handle, error)
            self.voter_changes.abandon(old)
        if isinstance(old, Follower):
            self.follower_download.abandon(old)
        self.outbox.forget()
        self._notify_leader_change()

    def _maybe_win(self, now: int) -> None:
        """A majority's votes make a candidate the leader, and a prospective a candidate."""
        state = self.state
        if not isinstance(state, Campaign) or vote_result(self.voters.ids, state.granted, set()) != VoteResult.WON:
            return
        if isinstance(state, Candidate):
            self._become_leader(state, now)
        else:
            self.elections.campaign(now)

    def _become_leader(self, candidate: Candidate, now: int) -> None:
        granting = tuple(sorted(candidate.granted))
        progress = LeaderState(self.epoch, self.node_id, self.voters.ids, self.log.end_offset, now,
                               granting_voters=granting)
        appends = BatchAccumulator(self._max_batch_bytes, self.config.max_batch_bytes, self.config.append_linger_ms)
        leader = Leader(progress, appends, self.config.fetch_timeout_ms,
                        volatile_voters=kraft_upgrade.volatile_voters(self.voters, self.config))
        self.quorum.become_leader(leader)
        changed = LeaderChangeMessage(self.node_id, self.voters.ids, granting)
        self._append_control(leader, (changed, *self.voter_changes.own_entry_update()), now)
        log.info("node %d: elected leader of epoch %d with votes from %s", self.node_id, self.epoch, list(granting))

    def _become_resigned(self, now: int) -> None:
        state = self.state
        assert isinstance(state, Leader)
        successors = state.progress.successors()
        self.quorum.become_resigned(successors, now)
        log.info("node %d: resigned as leader of epoch %d; successors %s", self.node_id, self.epoch, successors)

    def _notify_leader_change(self) -> None:
        current = LeaderAndEpoch(self.leader_id, self.epoch)
        if current != self._notified:
            self._notified = current
            if self.listener is not None:
                self.listener.handle_leader_change(current)

    # ================================================================ the step after every event

    def _poll(self, now: int) -> None:
        self._observe_snapshots(now)
        self.log_start.maybe_clean(now, self.state, self.high_watermark)
        self.voters.forget_before(self.log.start_offset)
        self.voter_changes.poll(now)
        state = self.state
        if isinstance(state, Leader):
            self._poll_leader(state, now)
        elif isinstance(state, Follower):
            self._poll_follower(state, now)
        elif isinstance(state, Campaign):
            if self.elections.poll(state, now):
                self._poll(now)
        elif isinstance(state, Resigned):
            self._poll_resigned(state, now)
        elif state.election_deadline is None:
            self._poll_observer_discovery(now)
        elif now >= state.election_deadline:
            self.elections.start(now)
            self._poll(now)

    # ---------------------------------------------------------------- leader

    def _poll_leader(self, leader: Leader, now: int) -> None:
        self._leader_commit(leader)
        if leader.appends.ready(now, self._awaited(leader)):
            self._drain(leader, now)
        self._answer_parked_fetches(leader, now)
        self.voter_changes.expire(leader, now)
        if self.state is not leader:
            return  # the committed removal of this leader made it resign
        if now - leader.progress.quorum_contact_ms(now) >= leader.check_quorum_ms:
            log.warning("node %d: resigning leadership of epoch %d: no fetch from a majority of voters in %d ms",
                        self.node_id, self.epoch, leader.check_quorum_ms)
            self._become_resigned(now)
            self._poll(now)
            return
        self.announcements.announce(leader, now)

    # ---------------------------------------------------------------- follower and observer

    def _poll_follower(self, follower: Follower, now: int) -> None:
        leader_id = self.leader_id
        assert leader_id is not None
        if now >= follower.fetch_deadline:
            if self.voters.may_campaign(self.node_id):
                if follower.leader_resigned:
                    log.info("node %d: leader %s resigned (EndQuorumEpoch); starting an election",
                             self.node_id, leader_id)
                else:
                    log.info("node %d: no answer from leader %s for %d ms; starting an election",
                             self.node_id, leader_id, self.config.fetch_timeout_ms)
                self.elections.start(now)
            else:
                self.quorum.become_unattached(self.epoch, now, abandoned=(self.epoch, leader_id))
            self._poll(now)
            return
        if (not self.outbox.can_send(leader_id, now)
                or self.voter_changes.ask_to_update(follower, leader_id, self.high_watermark, now)
                or self.voter_changes.ask_to_join(follower, leader_id, now)
                or self.follower_download.ask_for_chunk(follower, leader_id, now)):
            return
        if not self.wants_flush:  # fetch only from a flushed log: the offset we report must be on disk
            self.outbox.send(leader_id, self._fetch_request(), now)

    def _poll_observer_discovery(self, now: int) -> None:
        """An observer that knows no leader asks a random voter; any answer names the leader."""
        # Kafka's observers ask controller.quorum.bootstrap.servers when it is set.
        askable = self.config.bootstrap_ids or tuple(v for v in self.voters.ids if v != self.node_id)
        if self.wants_flush or any(self.outbox.waiting_on(d) for d in askable):
            return
        ready = [v for v in askable if self.outbox.can_send(v, now)]
        if ready:
            self.outbox.send(self.rng.choice(ready), self._fetch_request(), now)

    def _fetch_request(self) -> m.FetchRequest:
        config, log_ = self.config, self.log
        hw = self.high_watermark if self.high_watermark is not None else -1
        return m.fetch_request(config.cluster_id, self.node_id, self.epoch, log_.end_offset, self.history.last_epoch(),
                               log_.start_offset, config.fetch_max_wait_ms, config.max_fetch_bytes, config.partition,
                               high_watermark=hw)

    # ---------------------------------------------------------------- candidate and resigned

    def _poll_resigned(self, resigned: Resigned, now: int) -> None:
        if now >= resigned.election_deadline:
            self.elections.start(now)
            self._poll(now)
            return
        self.announcements.hand_over(resigned, now)

    # ================================================================ requests

    def _reply(self, handle: Any, response: m.RaftResponse) -> None:
        self.outbox.reply(handle, response)

    def _on_vote_request(self, handle: Any, request: m.VoteRequest, now: int) -> None:
        error, granted, top = self.elections.on_request(request, now)
        self._reply(handle, m.vote_response(error, self.quorum.leader_field, self.epoch, granted, top,
                                                   where=self.config.partition))

    def _validate_leader_epoch(self, epoch: int) -> ErrorCode:
        """KIP-320 fencing for a request that must reach the leader of `epoch`."""
        return fence(epoch, self.epoch, self.is_leader)

    def _fetch_error(self, error: ErrorCode, top: ErrorCode = ErrorCode.none) -> m.FetchResponse:
        return m.fetch_response(error, leader_id=self.quorum.leader_field, epoch=self.epoch, top_error=top,
                                where=self.config.partition)

    def _on_fetch_request(self, handle: Any, request: m.FetchRequest, now: int) -> None:
        if not self.gate.cluster_ok(request):
            return self._reply(handle, self._fetch_error(ErrorCode.none, ErrorCode.inconsistent_cluster_id))
        p = m.partition_of(request, self.config.partition)
        if p is None:
            return self._reply(handle, self._fetch_error(ErrorCode.unknown_topic_or_partition))
        if not self.gate.fetch_is_valid(request, p):
            return self._reply(handle, self._fetch_error(ErrorCode.invalid_request))
        error = self._validate_leader_epoch(p.current_leader_epoch)
        if error != ErrorCode.none:
            return self._reply(handle, self._fetch_error(error))
        leader = self.state
        assert isinstance(leader, Leader)
        replica_id = request.replica_state.replica_id
        if replica_id >= 0:
            # A voter fetching in our epoch follows us, whatever the answer (records,
            # DivergingEpoch or SnapshotId): it counts toward check quorum.
            leader.progress.record_contact(replica_id, now)
        snapshot = self.catalog.for_fetcher(p.fetch_offset, p.last_fetched_epoch, self.log.start_offset)
        if snapshot is not None:
            return self._reply(handle, self._fetch_answer(snapshot=snapshot))
        diverging = self.history.diverging(p.fetch_offset, p.last_fetched_epoch)
        if diverging is not None:
            return self._reply(handle, self._fetch_answer(diverging=diverging))
        if replica_id >= 0:
            leader.progress.record_fetch(replica_id, p.fetch_offset, self.log.end_offset, now)
            hw_moved = self._leader_commit(leader)
            drained = leader.appends.count > 0 and self._awaited(leader)
            if drained:
                self._drain(leader, now)  # the last batch committed: what gathered goes, in this answer too
            if hw_moved or drained:
                self._answer_parked_fetches(leader, now)
        max_bytes = min(p.partition_max_bytes, request.max_bytes, self.config.max_fetch_bytes)
        wait_ms = int(request.max_wait.total_seconds() * 1000)
        parked = ParkedFetch(handle, replica_id, p.fetch_offset, max_bytes, now + wait_ms, p.high_watermark)
        if wait_ms <= 0 or self.has_news(p.fetch_offset, p.high_watermark):
            self._answer_fetch(parked)
        else:
            leader.parked.park(parked)

    def _leader_commit(self, leader: Leader) -> bool:
        """Recomputes the leader's high watermark from its voters' positions and delivers what
        it commits; True if it moved."""
        if not leader.progress.update_high_watermark(self.log.last_flushed_offset):
            return False
        hw = leader.progress.high_watermark
        assert hw is not None
        self._advance_high_watermark(hw)
        self.voter_changes.committed(leader, hw)
        if not self.is_voter and hw > self.voters.latest_offset:
            log.info("node %d: its removal from the voters committed; resigning", self.node_id)
            self._become_resigned(self._now_hint)
        return True

    def _advance_high_watermark(self, offset: int) -> None:
        """The one place the high watermark moves (the leader's count of its voters, the
        leader's word to a follower, a snapshot installed): forward only, and never past
        this log's end, so that nothing committed is ever appended again or truncated."""
        if self.high_watermark is not None and offset < self.high_watermark:
            raise InvariantViolation(f"node {self.node_id}: the high watermark would move back from "
                                     f"{self.high_watermark} to {offset} in epoch {self.epoch}")
        if offset > self.log.end_offset:
            raise InvariantViolation(f"node {self.node_id}: the high watermark would pass the log's end "
                                     f"({offset} > {self.log.end_offset}) in epoch {self.epoch}")
        self.high_watermark = offset
        self.voters.committed_offset = offset
        self.commits.deliver(offset)

    def _check_append_at(self, offset: int) -> None:
        """An append lands at the log's end; below the high watermark it would rewrite what
        was committed."""
        if self.high_watermark is not None and offset < self.high_watermark:
            raise InvariantViolation(f"node {self.node_id}: append at {offset}, below the high watermark "
                                     f"{self.high_watermark}, in epoch {self.epoch}")

    def _awaited(self, leader: Leader) -> bool:
        """Whether the queued appends go to the log now rather than after the linger: when
        everything this leader appended is committed (its high watermark at the log's end).
        A write to an idle log so has no timer between it and its replication; under load,
        what comes while one batch replicates gathers into the next, which goes when that
        one commits (Nagle's rule), at most controller.quorum.append.linger.ms later or when
        a batch is full."""
        hw = self.high_watermark
        return hw is not None and hw >= self.log.end_offset

    def _drain(self, leader: Leader, now: int) -> None:
        self._check_append_at(self.log.end_offset)
        for batch in leader.appends.drain(now):
            self.log.append_as_leader(batch, self.epoch)

    def _append_control(self, leader: Leader, messages: tuple[ControlMessage, ...], now: int) -> int:
        """One control batch of `messages` after what is queued (which stays before it); the
        voter records in it count from now, as KIP-853 has them. Returns its base offset."""
        if leader.appends.count:
            self._drain(leader, now)
        offset = self.log.end_offset
        self._check_append_at(offset)
        self.log.append_as_leader(build_control_batch(*messages, timestamp=now), self.epoch)
        for i, message in enumerate(messages):
            self.voters.observe(offset + i, message)
        return offset

    def upgrade_kraft_version(self, version: int, validate_only: bool, now: int) -> bool:
        """Raises kraft.version (the controller's UpdateFeatures, Kafka 4.1): True if records
        were (or, `validate_only`, would be) appended; False if it already is `version`.
        Raises NotLeaderError, or kraft_upgrade.UpgradeRefused with Kafka's message."""
        state = self.state
        if not isinstance(state, Leader):
            raise NotLeaderError(self.leader_id, self.epoch)
        messages = kraft_upgrade.upgrade(state, self.voters, version)
        if messages and not validate_only:
            offset = self._append_control(state, messages, now)
            state.volatile_voters = None  # written: the log's from now on, as Kafka clears it
            log.info("node %d: kraft.version upgraded to %d at offset %d; voters %s", self.node_id, version, offset,
                     list(self.voters.ids))
        return bool(messages)

    def _fetch_answer(self, records: Any = None, diverging: OffsetAndEpoch | None = None,
                      snapshot: SnapshotId | None = None) -> m.FetchResponse:
        """The leader's answer: records, or where the fetcher diverges, or the snapshot to fetch."""
        hw = self.high_watermark if self.high_watermark is not None else -1
        return m.fetch_response(
            ErrorCode.none, leader_id=self.node_id, epoch=self.epoch, high_watermark=hw,
            log_start_offset=self.log.start_offset, records=records,
            diverging=(diverging.offset, diverging.epoch) if diverging else None,
            snapshot_id=(snapshot.end_offset, snapshot.epoch) if snapshot else None, where=self.config.partition,
        )

    def _answer_fetch(self, parked: ParkedFetch) -> None:
        data = None
        if parked.fetch_offset < self.log.end_offset:
            data = self.log.read(parked.fetch_offset, parked.max_bytes).data
        self._reply(parked.handle, self._fetch_answer(records=data))

    def _answer_parked_fetches(self, leader: Leader, now: int) -> None:
        woken_below = self.high_watermark if self.config.answer_behind_high_watermark else None
        for parked in leader.parked.take_due(now, woken_below, self.log.end_offset):
            self._answer_fetch(parked)

    def has_news(self, fetch_offset: int, fetcher_high_watermark: int) -> bool:
        """Leader: whether a Fetch from this position is answered at once rather than parked:
        there are records past it, or (KIP-1166, unless `answer_behind_high_watermark` is off)
        the high watermark it carries is behind ours. A Fetch that moved the high watermark
        itself learns the new one so; one older than v18 carries none, and waits."""
        if fetch_offset < self.log.end_offset:
            return True
        hw = self.high_watermark
        return self.config.answer_behind_high_watermark and hw is not None and fetcher_high_watermark < hw

    def _on_describe_quorum_request(self, handle: Any, request: m.DescribeQuorumRequest, now: int) -> None:
        leader = self.leader_state
        if m.partition_of(request, self.config.partition) is None:
            answer = m.describe_quorum_response(ErrorCode.unknown_topic_or_partition, leader_id=NO_LEADER,
                                                epoch=self.epoch, where=self.config.partition)
        elif leader is None:
            answer = m.describe_quorum_response(ErrorCode.not_leader_or_follower, leader_id=self.quorum.leader_field,
                                                epoch=self.epoch, where=self.config.partition)
        else:
            # As Kafka's LeaderState: observers not heard from in a while are dropped when
            # asked for, not at every step (a step would walk the whole fleet).
            leader.expire_observers(now, self.config.observer_expiry_ms)
            voters, observers = leader.replica_states(self.log.end_offset, now)
            hw = self.high_watermark if self.high_watermark is not None else -1
            answer = m.describe_quorum_response(ErrorCode.none, leader_id=self.node_id, epoch=self.epoch,
                                                high_watermark=hw, voters=voters, observers=observers,
                                                where=self.config.partition)
        self._reply(handle, answer)

    # ================================================================ responses

    def _on_vote_response(self, source: int, response: m.VoteResponse, now: int) -> None:
        p = self.announcements.read_response(source, response, now)
        if p is not None:
            self.elections.on_response(p, source, now)

    def _on_fetch_response(self, source: int, response: m.FetchResponse, now: int) -> None:
        p = m.partition_of(response, self.config.partition)
        if response.error_code != ErrorCode.none or p is None:
            if not self.gate.refused_as_foreign(source, response):
                self.gate.throttled(("fetch", source, response.error_code), now, logging.WARNING,
                                    "node %d: fetch from %d failed: %s", self.node_id, source, response.error_code.name)
            self.outbox.back_off(source, now)
            return
        leader = p.current_leader
        state = self.state
        abandoned = state.abandoned if isinstance(state, Unattached) else None
        if abandoned == (leader.leader_epoch, leader.leader_id) and 0 <= source != leader.leader_id:
            # Hearsay about the leader this observer just gave up on: a voter that has not
            # noticed its loss yet (a bootstrap server's answer may be the leader's own: -2, -3...
            # name addresses, not nodes, so it is followed again). Following it again would wait out a whole fetch timeout;
            # ask the others until one names a newer leader, or that leader answers itself
            # (Kafka's observer keeps fetching from the bootstrap servers the same way).
            self.outbox.back_off(source, now)
            return
        if self.quorum.learn_leader(leader.leader_id, leader.leader_epoch, now):
            return
        follower = self.state
        if not isinstance(follower, Follower) or source != self.leader_id or leader.leader_epoch != self.epoch:
            return
        if p.error_code != ErrorCode.none:
            self.outbox.back_off(source, now)
            return
        names_snapshot = p.snapshot_id.end_offset >= 0 or p.snapshot_id.epoch >= 0
        if names_snapshot and (p.snapshot_id.end_offset < 0 or p.snapshot_id.epoch < 0):
            # As Kafka: a broken answer, retried; it does not count as the leader's word
            # (the fetch timer runs on).
            self.gate.once(("snapshot id", source), logging.ERROR, "node %d: leader %d named snapshot %d-%d, "
                           "which is not a snapshot id", self.node_id, source, p.snapshot_id.end_offset,
                           p.snapshot_id.epoch)
            self.outbox.back_off(source, now)
            return
        follower.fetch_deadline = now + self.config.fetch_timeout_ms
        follower.fetched = True
        if p.log_start_offset >= 0:
            follower.leader_start_offset = p.log_start_offset
        if names_snapshot:
            self.follower_download.start(follower, SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch))
            return
        if p.diverging_epoch.end_offset >= 0 and p.diverging_epoch.epoch >= 0:
            diverging = OffsetAndEpoch(p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
            self.history.truncate_to(diverging, self.high_watermark, self.node_id, self.leader_id)
            self.voters.truncate(self.log.end_offset)
            return
        if p.records:
            self._check_append_at(self.log.end_offset)
            try:
                appended = self.log.append_as_follower(p.records)
            except InvalidAppendError as e:  # damaged on the way, or a peer that is not a real leader
                self.gate.once(("append", str(e)), logging.WARNING, "node %d: refused records fetched from %d: %s",
                               self.node_id, source, e)
                self.outbox.back_off(source, now)
                return
            if appended.control:
                self.voters.observe_control(p.records)
        # As Kafka's follower: the leader's high watermark, as far as this log reaches.
        hw = min(p.high_watermark, self.log.end_offset)
        if p.high_watermark >= 0 and (self.high_watermark is None or hw > self.high_watermark):
            self._advance_high_watermark(hw)

    # ================================================================ snapshots (KIP-630)

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        """The id a snapshot of the state up to `end_offset` must have: the epoch of the
        record just before it."""
        return self.history.snapshot_id_at(end_offset)

    def create_snapshot(
        self, snapshot_id: SnapshotId, last_contained_log_time: int, **writer_options: Any
    ) -> SnapshotWriter:
        """A writer for the state machine's snapshot; the core sees it once frozen.

        Refused unless the snapshot ends at or below the high watermark, at or above the log
        start offset, on a batch boundary, with the epoch the log has there: a snapshot
        must hold exactly a committed prefix of this log.
        """
        self.catalog.check_creatable(snapshot_id, self.high_watermark, self.history)
        raft_records = self.voters.records_at(snapshot_id.end_offset - 1)
        writer = self.snapshots.create_writer(snapshot_id, last_contained_log_time, raft_records=raft_records,
                                              **writer_options)
        self.catalog.creating(snapshot_id)
        return writer

    def _observe_snapshots(self, now: int) -> None:
        """Learns of snapshots frozen since the last step (by the state machine, or fetched)."""
        self.catalog.observe(self.high_watermark)

    def _load_snapshot(self, snapshot_id: SnapshotId) -> None:
        self.voters.restart(snapshot_id.end_offset, self.snapshots.open_reader(snapshot_id).raft_messages())
        if self.listener is not None:
            self.catalog.load(snapshot_id, self.listener)
        self.commits.restart_at(snapshot_id.end_offset)

    def _on_fetch_snapshot_request(self, handle: Any, request: m.FetchSnapshotRequest, now: int) -> None:
        if not self.gate.cluster_ok(request):
            return self._reply(handle, m.fetch_snapshot_response([], ErrorCode.inconsistent_cluster_id))
        response, served = snapshot_fetch.serve(
            request, self._validate_leader_epoch, self.catalog, self.config, self.quorum.leader_field, self.epoch
        )
        leader = self.leader_state
        if leader is not None and request.replica_id >= 0 and served:
            leader.record_contact(request.replica_id, now)  # counts toward check quorum, as a Fetch
        self._reply(handle, response)

    def _install(self, sid: SnapshotId, how: str) -> None:
        """The log restarts at the snapshot's end; the state machine loads the snapshot.

        Not a snapshot ending below the high watermark: the log already holds committed
        records past it, which are never dropped (Kafka's follower truncates its log only
        to a snapshot past its end; one a leader names below it is "already stored")."""
        if self.high_watermark is not None and sid.end_offset < self.high_watermark:
            log.info("node %d: snapshot %d-%d (%s) ends below the high watermark %d; keeping the log",
                     self.node_id, sid.end_offset, sid.epoch, how, self.high_watermark)
            return
        self.log.truncate_fully_and_start_at(sid.end_offset, sid.epoch)
        self.snapshots.delete_before(sid.end_offset)
        self._load_snapshot(sid)
        if self.high_watermark is None or self.high_watermark < sid.end_offset:
            self._advance_high_watermark(sid.end_offset)  # a snapshot holds only committed records
        log.info("node %d: loaded snapshot %d-%d (%s); fetching the log from %d",
                 self.node_id, sid.end_offset, sid.epoch, how, sid.end_offset)

    # ================================================================ commits

    @property
    def applied_offset(self) -> int:
        """Every offset below this has been delivered to the listener (or was a control record)."""
        return self.commits.applied
