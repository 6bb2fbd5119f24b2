"""The Raft core (KIP-595, with KIP-320 fencing): a deterministic state machine, no IO.

A driver (the asyncio server, or the simulator) owns the clock, the network and the disk
and steps the core with what happens:

    handle_request(handle, request, now)      a peer's request; the reply goes to the outbox
    handle_response(request_id, response, now) the answer to one of our requests
    handle_send_failure(request_id, now)       it could not be delivered, or timed out
    handle_flush(now)                          the driver fsynced the log (see wants_flush)
    tick(now)                                  time passed (call by next_deadline())

and after each step sends what `poll_outbox()` returns: `Send` (a request of ours, to a
node) and `Reply` (the answer to a handle it gave us). Everything else the core touches is
handed to it: the ReplicatedLog, the QuorumStateStore, and a seeded random source.

Durability rules kept here: quorum-state is written (and is durable on return) before a
vote is granted or an epoch entered; a follower fetches only from a fully flushed log, so
the FetchOffset it reports, which the leader counts toward the high watermark, is on
disk; the leader counts its own log only up to its flushed end.
"""

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from random import Random
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft import messages as m
from kraft.raft.config import RaftConfig
from kraft.raft.errors import InvariantViolation, NotLeaderError, RecordBatchTooLargeError
from kraft.raft.leader import LeaderState
from kraft.raft.listener import CommittedBatch, LeaderAndEpoch, Listener
from kraft.raft.metrics import SnapshotMetrics
from kraft.raft.retention import follower_target, leader_target, retention_target
from kraft.records import (
    HEADER_SIZE,
    LeaderChangeMessage,
    SimpleRecord,
    build_batch,
    build_control_batch,
    read_batches,
)
from kraft.storage import (
    ElectionState,
    InvalidAppendError,
    MemorySnapshotStore,
    OffsetAndEpoch,
    QuorumStateStore,
    RawSnapshotWriter,
    ReplicatedLog,
    SnapshotError,
    SnapshotId,
    SnapshotNotFoundError,
    SnapshotReader,
    SnapshotStore,
    SnapshotWriter,
    validate_snapshots_and_log,
)

log = logging.getLogger("kraft.raft")

NO_LEADER = m.NO_LEADER
_NO_WAIT = timedelta(0)
# Epochs are int32 on the wire, and each election takes the next one. A request may move a
# replica to a newer epoch, but never into the last 2^16: one request naming 2^31-1 was
# granted once, after which no voter could campaign again (the next epoch does not fit),
# and the cluster could not serve even after a restart. 2^31 - 2^16 elections do not
# happen; the core's own elections may still use the reserve, one at a time.
MAX_EPOCH = 2**31 - 1
MAX_REQUESTED_EPOCH = MAX_EPOCH - 2**16
_THROTTLE_MS = 60_000
# Bounds on a record's framing in a batch, for sizing batches without encoding them: its
# length, attributes, timestamp and offset deltas, key and value lengths and header count
# as varints (at most 5+1+10+5+5+5+5 bytes), and each header's key and value lengths.
_RECORD_BOUND = 36
_HEADER_BOUND = 10


class Role(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class Send:
    request_id: int
    destination: int
    request: Any


@dataclass(frozen=True, slots=True)
class Reply:
    handle: Any
    response: Any


@dataclass(slots=True)
class _InFlight:
    request_id: int
    destination: int
    deadline: int


@dataclass(slots=True)
class _ParkedFetch:
    handle: Any
    replica_id: int
    fetch_offset: int
    max_bytes: int
    deadline: int


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
        self.store = store
        self.snapshots = snapshots if snapshots is not None else MemorySnapshotStore()
        self.metrics = metrics
        self.rng = rng
        self.listener = listener
        self.outbox: list[Send | Reply] = []
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_id: int | None = None
        self.high_watermark: int | None = None
        self._applied = raft_log.start_offset  # next offset to hand to the listener
        self._next_request_id = 0
        self._in_flight: dict[int, _InFlight] = {}  # destination -> its one outstanding request
        self._retry_at: dict[int, int] = {}
        self._parked: list[_ParkedFetch] = []
        # Leader: the append() calls not yet in the log, each with a bound on its size in a batch.
        self._pending: list[list[SimpleRecord | tuple]] = []
        self._pending_sizes: list[int] = []
        self._pending_count = 0
        self._pending_bytes = 0
        self._pending_since: int | None = None
        self._max_batch_bytes = min(config.max_batch_bytes, raft_log.max_batch_bytes)
        self._election_deadline = 0
        self._backoff_until: int | None = None
        self._fetch_deadline = 0
        # (epoch, leader) an observer stopped following when its fetches timed out.
        self._abandoned: tuple[int, int] | None = None
        self._leader_resigned = False  # the followed leader sent EndQuorumEpoch
        self._votes_granted: set[int] = set()
        self._votes_rejected: set[int] = set()
        self._votes_unreachable: set[int] = set()  # voters whose Vote request failed to be sent
        self._leader: LeaderState | None = None
        self._end_quorum_acked: set[int] = set()
        self._successors: tuple[int, ...] = ()
        self._notified: LeaderAndEpoch | None = None
        self._foreign_clusters: set[int] = set()  # peers refusing our cluster id (logged once)
        self._refusals_logged: set[object] = set()  # hostile or broken requests already logged
        self._throttled: dict[object, int] = {}  # repeating lines: key -> when last logged
        # Snapshots (KIP-630).
        self._known_snapshots: list[SnapshotId] = []
        self._snapshot_info: dict[SnapshotId, tuple[int, int]] = {}  # size, last contained log timestamp
        self._snapshot_started: dict[SnapshotId, float] = {}  # create_snapshot() time, for GenSnapshotLatencyMs
        self._readers: dict[SnapshotId, SnapshotReader] = {}  # open for FetchSnapshot
        self._download: RawSnapshotWriter | None = None
        self._download_progress = -1  # last tenth of the download logged
        self._leader_start_offset = 0  # a follower's view of the leader's log start offset
        self._next_cleanup = 0
        self._start(now)

    # ================================================================ queries

    @property
    def is_voter(self) -> bool:
        return self.config.is_voter

    @property
    def is_leader(self) -> bool:
        return self.role == Role.LEADER

    @property
    def handing_over(self) -> bool:
        """A resigned leader whose EndQuorumEpoch has not yet reached every voter, and no
        newer epoch seen: a graceful stop waits while this holds (or a timeout passes), so
        every possible successor learns to campaign now rather than after a fetch timeout."""
        return self.role == Role.RESIGNED and not set(self.config.voters) <= self._end_quorum_acked

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
        return self._leader

    def poll_outbox(self) -> list[Send | Reply]:
        out, self.outbox = self.outbox, []
        return out

    def next_deadline(self) -> int:
        """The earliest time at which tick() has something to do."""
        deadlines = [f.deadline for f in self._in_flight.values()]
        deadlines += [p.deadline for p in self._parked]
        if self.role in (Role.UNATTACHED, Role.VOTED, Role.RESIGNED) and self.is_voter:
            deadlines.append(self._election_deadline)
        if self.role == Role.CANDIDATE:
            deadlines.append(self._backoff_until if self._backoff_until is not None else self._election_deadline)
        if self.role == Role.FOLLOWER:
            deadlines.append(self._fetch_deadline)
        if self._leader is not None:
            deadlines.append(self._leader.quorum_contact_ms(self._now_hint) + self.config.fetch_timeout_ms)
            if self._pending_since is not None:
                deadlines.append(self._pending_since + self.config.append_linger_ms)
        deadlines += [t for d, t in self._retry_at.items() if d not in self._in_flight]
        if not deadlines:
            return self._now_hint + self.config.election_timeout_ms
        # A deadline already passed is one the last step could not act on yet (a fetch
        # waiting for a flush): look again soon, never in a loop at the same instant.
        return max(min(deadlines), self._now_hint + 1)

    # ================================================================ driver entry points

    def handle_request(self, handle: Any, request: Any, now: int) -> None:
        self._now_hint = now
        handler = self._request_handlers.get(type(request))
        if handler is None:
            raise TypeError(f"the Raft core does not serve {type(request).__name__}")
        handler(self, handle, request, now)
        self._poll(now)

    def handle_response(self, request_id: int, response: Any, now: int) -> None:
        self._now_hint = now
        destination = self._complete_request(request_id)
        if destination is not None:
            handler = self._response_handlers.get(type(response))
            if handler is None:
                raise TypeError(f"unexpected response {type(response).__name__}")
            handler(self, destination, response, now)
        self._poll(now)

    def handle_send_failure(self, request_id: int, now: int) -> None:
        self._now_hint = now
        destination = self._complete_request(request_id)
        if destination is not None:
            self._retry_at[destination] = now + self.config.retry_backoff_ms
            if self.role == Role.CANDIDATE and destination in self.config.voters:
                self._votes_unreachable.add(destination)
        self._poll(now)

    def handle_flush(self, now: int) -> None:
        self._now_hint = now
        self._poll(now)

    def tick(self, now: int) -> None:
        self._now_hint = now
        for destination, f in list(self._in_flight.items()):
            if now >= f.deadline:
                del self._in_flight[destination]
                self._retry_at[destination] = now
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
        if self.role != Role.LEADER:
            raise NotLeaderError(self.leader_id, self.epoch)
        size = _size_bound(records)
        if HEADER_SIZE + size > self._max_batch_bytes:
            size = self._size_alone(records, now)
        last = self.log.end_offset + self._pending_count + len(records) - 1
        self._pending.append(list(records))
        self._pending_sizes.append(size)
        self._pending_count += len(records)
        self._pending_bytes += size
        if self._pending_since is None:
            self._pending_since = now
        return self.epoch, last

    def _size_alone(self, records: Sequence[SimpleRecord | tuple], now: int) -> int:
        """For records whose size bound passes the batch limit: encodes them to know. Too
        large, they are refused; otherwise they are sized to fill a batch on their own."""
        size = len(build_batch(records, timestamp=now))
        if size > self._max_batch_bytes:
            raise RecordBatchTooLargeError(len(records), size, self._max_batch_bytes)
        return self._max_batch_bytes - HEADER_SIZE

    @property
    def next_offset(self) -> int:
        """Leader: the offset the next appended record will get."""
        return self.log.end_offset + self._pending_count

    def resign(self, now: int) -> None:
        """Graceful shutdown of a leader: hand over at once via EndQuorumEpoch."""
        self._now_hint = now
        if self.role == Role.LEADER:
            self._become_resigned(now)
        self._poll(now)

    # ================================================================ startup

    def _start(self, now: int) -> None:
        self._now_hint = now
        latest = validate_snapshots_and_log(self.snapshots, self.log)
        self._observe_snapshots(now)
        if latest is not None:
            self._load_snapshot(latest)
        state = self.store.read()
        log_epoch = self._last_fetched_epoch()
        if state is None or state.epoch < log_epoch:
            self._become_unattached(max(log_epoch, state.epoch if state else 0), now, force_write=True)
        elif state.leader_id == self.node_id:
            # We led this epoch before a restart: we cannot know what happened since, so do
            # not lead again in it; resign and let an election pick the next epoch's leader.
            self._set_state(Role.RESIGNED, state.epoch, self.node_id, state.voted_id, now)
            self._election_deadline = now + self._random_election_timeout()
            self._successors = tuple(v for v in self.config.voters if v != self.node_id)
            self._end_quorum_acked = {self.node_id}
        elif state.leader_id is not None:
            self._become_follower(state.epoch, state.leader_id, now)
        elif state.voted_id == self.node_id and self.is_voter:
            self._set_state(Role.CANDIDATE, state.epoch, None, self.node_id, now)
            self._start_candidacy_round(now)
        elif state.voted_id is not None:
            self._set_state(Role.VOTED, state.epoch, None, state.voted_id, now)
            self._election_deadline = now + self._random_election_timeout()
        else:
            self._set_state(Role.UNATTACHED, state.epoch, None, None, now)
            self._election_deadline = now + self._random_election_timeout()
        self._poll(now)

    # ================================================================ transitions

    def _set_state(
        self, role: Role, epoch: int, leader_id: int | None, voted_id: int | None, now: int, force_write: bool = False
    ) -> None:
        """Enters a role. Quorum-state is durable before anything is done in the new state."""
        if epoch < self.epoch:
            raise InvariantViolation(f"node {self.node_id}: epoch would go back from {self.epoch} to {epoch}")
        if force_write or (epoch, leader_id, voted_id) != (self.epoch, self.leader_id, self.voted_id):
            self.store.write(ElectionState(epoch, leader_id, voted_id, self.config.voters))
        if self.role == Role.LEADER and role != Role.LEADER:
            self._stop_leading(now)
        if epoch != self.epoch or role != self.role:
            log.info(
                "node %d: %s in epoch %d%s",
                self.node_id,
                role.value,
                epoch,
                f" (leader {leader_id})" if leader_id is not None and role != Role.LEADER else "",
            )
        self.role, self.epoch, self.leader_id, self.voted_id = role, epoch, leader_id, voted_id
        self._abort_download("the replica changed state")
        self._in_flight.clear()
        self._retry_at.clear()
        self._backoff_until = None
        self._notify_leader_change()

    def _become_unattached(self, epoch: int, now: int, force_write: bool = False) -> None:
        self._set_state(Role.UNATTACHED, epoch, None, None, now, force_write)
        self._election_deadline = now + self._random_election_timeout()

    def _become_voted(self, epoch: int, candidate: int, now: int) -> None:
        self._set_state(Role.VOTED, epoch, None, candidate, now)
        self._election_deadline = now + self._random_election_timeout()

    def _become_candidate(self, now: int) -> None:
        if self.epoch >= MAX_EPOCH:
            self._log_once("exhausted", logging.CRITICAL, "node %d: cannot campaign: epoch %d is the largest an "
                           "int32 holds; the quorum needs `kraft restore` or `kraft recover`", self.node_id, self.epoch)
            self._election_deadline = now + self._random_election_timeout()
            return
        self._set_state(Role.CANDIDATE, self.epoch + 1, None, self.node_id, now)
        self._start_candidacy_round(now)

    def _start_candidacy_round(self, now: int) -> None:
        self._votes_granted = {self.node_id}
        self._votes_rejected = set()
        self._votes_unreachable = set()
        self._backoff_until = None
        self._election_deadline = now + self._random_election_timeout()
        self._maybe_win(now)

    def _maybe_win(self, now: int) -> None:
        if len(self._votes_granted) >= self.config.majority:
            self._become_leader(now)

    def _become_leader(self, now: int) -> None:
        granting = tuple(sorted(self._votes_granted))
        self._set_state(Role.LEADER, self.epoch, self.node_id, self.node_id, now)
        start = self.log.end_offset
        self._leader = LeaderState(self.epoch, self.node_id, self.config.voters, start, now, granting_voters=granting)
        batch = build_control_batch(
            LeaderChangeMessage(self.node_id, tuple(sorted(self.config.voters)), granting), timestamp=now
        )
        self.log.append_as_leader(batch, self.epoch)
        log.info("node %d: elected leader of epoch %d with votes from %s", self.node_id, self.epoch, list(granting))

    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        if leader_id == self.node_id:
            raise InvariantViolation(f"node {self.node_id}: told to follow itself in epoch {epoch}")
        if self.role == Role.LEADER and epoch == self.epoch:
            raise InvariantViolation(f"node {self.node_id}: leads epoch {epoch} but node {leader_id} claims it too")
        voted = self.voted_id if epoch == self.epoch else None
        self._abandoned = None
        self._set_state(Role.FOLLOWER, epoch, leader_id, voted, now)
        self._fetch_deadline = now + self.config.fetch_timeout_ms
        self._leader_resigned = False  # set by its EndQuorumEpoch: the deadline then comes early

    def _become_resigned(self, now: int) -> None:
        assert self._leader is not None
        self._successors = self._leader.successors()
        self._set_state(Role.RESIGNED, self.epoch, self.node_id, self.voted_id, now)
        self._end_quorum_acked = {self.node_id}
        self._election_deadline = now + self._random_election_timeout()
        log.info("node %d: resigned as leader of epoch %d; successors %s", self.node_id, self.epoch, self._successors)

    def _stop_leading(self, now: int) -> None:
        """Leaving the leader role: parked fetches are answered, queued appends dropped."""
        for parked in self._parked:
            self.outbox.append(Reply(parked.handle, self._fetch_error(ErrorCode.not_leader_or_follower)))
        self._parked.clear()
        self._clear_pending()
        self._leader = None

    def _notify_leader_change(self) -> None:
        current = LeaderAndEpoch(self.leader_id, self.epoch)
        if current != self._notified:
            self._notified = current
            if self.listener is not None:
                self.listener.handle_leader_change(current)

    def _current_timeout_deadline(self, now: int) -> int:
        """When this replica would next start an election on its own."""
        if self.role == Role.FOLLOWER:
            return self._fetch_deadline
        if self.role == Role.CANDIDATE and self._backoff_until is not None:
            return self._backoff_until
        if self.role in (Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.RESIGNED):
            return self._election_deadline
        return now + self._random_election_timeout()

    def _random_election_timeout(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self.rng.randrange(timeout)

    def _maybe_learn_leader(self, leader_id: int, epoch: int, now: int) -> bool:
        """Any message naming a newer epoch, or the leader of ours when we do not know it,
        moves this replica there. Returns True if it did."""
        if self._out_of_reach(epoch, "a response"):
            return False
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now)
            else:
                self._become_unattached(epoch, now)
            return True
        if (
            epoch == self.epoch
            and leader_id >= 0
            and leader_id != self.node_id
            and self.role in (Role.UNATTACHED, Role.VOTED, Role.CANDIDATE)
        ):
            self._become_follower(epoch, leader_id, now)
            return True
        return False

    # ================================================================ the step after every event

    def _poll(self, now: int) -> None:
        self._observe_snapshots(now)
        if now >= self._next_cleanup:
            self._next_cleanup = now + self.config.cleanup_interval_ms
            self._clean(now)
        role = self.role
        if role == Role.LEADER:
            self._poll_leader(now)
        elif role == Role.FOLLOWER:
            self._poll_follower(now)
        elif role == Role.CANDIDATE:
            self._poll_candidate(now)
        elif role == Role.RESIGNED:
            self._poll_resigned(now)
        elif self.is_voter:
            if now >= self._election_deadline:
                self._become_candidate(now)
                self._poll(now)
        else:
            self._poll_observer_discovery(now)

    def _can_send(self, destination: int, now: int) -> bool:
        return destination not in self._in_flight and now >= self._retry_at.get(destination, 0)

    def _send(self, destination: int, request: Any, now: int) -> None:
        self._next_request_id += 1
        rid = self._next_request_id
        timeout = self.config.request_timeout_ms
        if isinstance(request, m.FetchRequest):
            timeout += int(request.max_wait.total_seconds() * 1000)
        self._in_flight[destination] = _InFlight(rid, destination, now + timeout)
        self.outbox.append(Send(rid, destination, request))

    def _complete_request(self, request_id: int) -> int | None:
        for destination, f in self._in_flight.items():
            if f.request_id == request_id:
                del self._in_flight[destination]
                return destination
        return None  # stale: sent in a state we have left

    # ---------------------------------------------------------------- leader

    def _poll_leader(self, now: int) -> None:
        leader = self._leader
        assert leader is not None
        if self._pending and (
            now >= (self._pending_since or now) + self.config.append_linger_ms
            or self._pending_bytes >= self.config.max_batch_bytes
        ):
            self._drain_pending(now)
        self._answer_parked_fetches(now, force=self._advance_high_watermark())
        if now - leader.quorum_contact_ms(now) >= self.config.fetch_timeout_ms:
            log.warning(
                "node %d: resigning leadership of epoch %d: no fetch from a majority of voters in %d ms",
                self.node_id,
                self.epoch,
                self.config.fetch_timeout_ms,
            )
            self._become_resigned(now)
            self._poll(now)
            return
        for voter in self.config.voters:
            if voter not in leader.begin_quorum_acked and self._can_send(voter, now):
                self._send(voter, m.begin_quorum_request(self.config.cluster_id, self.node_id, self.epoch), now)
        leader.expire_observers(now, self.config.observer_expiry_ms)

    def _drain_pending(self, now: int) -> None:
        """Writes the queued append() calls to the log, as many whole calls per batch as fit
        in max_batch_bytes; a batch boundary never falls inside one call's records."""
        limit = self._max_batch_bytes - HEADER_SIZE
        batch: list[SimpleRecord | tuple] = []
        size = 0
        for records, bound in zip(self._pending, self._pending_sizes, strict=True):
            if batch and size + bound > limit:
                self.log.append_as_leader(build_batch(batch, timestamp=now), self.epoch)
                batch, size = [], 0
            batch.extend(records)
            size += bound
        self.log.append_as_leader(build_batch(batch, timestamp=now), self.epoch)
        self._clear_pending()

    def _clear_pending(self) -> None:
        self._pending, self._pending_sizes = [], []
        self._pending_count = self._pending_bytes = 0
        self._pending_since = None

    # ---------------------------------------------------------------- follower and observer

    def _poll_follower(self, now: int) -> None:
        if now >= self._fetch_deadline:
            if self.is_voter:
                if self._leader_resigned:
                    log.info("node %d: leader %s resigned (EndQuorumEpoch); starting an election",
                             self.node_id, self.leader_id)
                else:
                    log.info(
                        "node %d: no answer from leader %s for %d ms; starting an election",
                        self.node_id,
                        self.leader_id,
                        self.config.fetch_timeout_ms,
                    )
                self._become_candidate(now)
            else:
                assert self.leader_id is not None
                self._abandoned = (self.epoch, self.leader_id)
                self._become_unattached(self.epoch, now)
            self._poll(now)
            return
        leader_id = self.leader_id
        assert leader_id is not None
        if not self._can_send(leader_id, now):
            return
        if self._download is not None:
            sid = self._download.snapshot_id
            request = m.fetch_snapshot_request(
                self.config.cluster_id,
                self.node_id,
                self.epoch,
                (sid.end_offset, sid.epoch),
                self._download.size,
                self.config.snapshot_response_max_bytes,
            )
            self._send(leader_id, request, now)
        elif not self.wants_flush:  # fetch only from a flushed log: the offset we report must be on disk
            self._send(leader_id, self._fetch_request(), now)

    def _poll_observer_discovery(self, now: int) -> None:
        """An observer that knows no leader asks a random voter; any answer names the leader."""
        if self.wants_flush or any(d in self._in_flight for d in self.config.voters):
            return
        ready = [v for v in self.config.voters if self._can_send(v, now)]
        if ready:
            self._send(self.rng.choice(ready), self._fetch_request(), now)

    def _fetch_request(self) -> Any:
        last = self._last_fetched_epoch()
        return m.fetch_request(
            self.config.cluster_id,
            self.node_id,
            self.epoch,
            self.log.end_offset,
            last,
            self.log.start_offset,
            self.config.fetch_max_wait_ms,
            self.config.max_fetch_bytes,
        )

    def _last_fetched_epoch(self) -> int:
        """The epoch of the last record this replica holds: in its log, or, when the log is
        empty after a snapshot, the snapshot's (KIP-630)."""
        if self.log.latest_epoch is not None:
            return self.log.latest_epoch
        latest = self.snapshots.latest()
        return latest.epoch if latest is not None else 0

    def _end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self.log.end_offset_for_epoch(epoch)
        if found.epoch < 0:  # no batch in the log: its history is the snapshot's
            return OffsetAndEpoch(self.log.end_offset, self._last_fetched_epoch())
        return found

    def _end_offset_and_epoch(self) -> OffsetAndEpoch:
        """This replica's last (offset, epoch), the one elections compare."""
        return OffsetAndEpoch(self.log.end_offset, self._last_fetched_epoch())

    # ---------------------------------------------------------------- candidate and resigned

    def _poll_candidate(self, now: int) -> None:
        if self._backoff_until is not None:
            if now >= self._backoff_until:
                self._become_candidate(now)
                self._poll(now)
            return
        # Lost: the election timed out, or a majority refused or cannot be reached (a dead
        # leader's port refuses at once; with one peer refusing because it voted for itself,
        # a three-voter quorum would otherwise wait out the whole election timeout).
        lost = len(self._votes_rejected | self._votes_unreachable) >= self.config.majority
        if now >= self._election_deadline or lost:
            backoff = self.rng.randrange(self.config.election_backoff_max_ms + 1)
            self._backoff_until = now + backoff
            return
        last = self._end_offset_and_epoch()
        for voter in self.config.voters:
            if voter in self._votes_granted or voter in self._votes_rejected:
                continue
            if self._can_send(voter, now):
                request = m.vote_request(self.config.cluster_id, self.epoch, self.node_id, last.epoch, last.offset)
                self._send(voter, request, now)

    def _poll_resigned(self, now: int) -> None:
        if now >= self._election_deadline and self.is_voter:
            self._become_candidate(now)
            self._poll(now)
            return
        for voter in self.config.voters:
            if voter not in self._end_quorum_acked and self._can_send(voter, now):
                request = m.end_quorum_request(self.config.cluster_id, self.node_id, self.epoch, self._successors)
                self._send(voter, request, now)

    # ================================================================ requests

    def _cluster_ok(self, request: Any) -> bool:
        theirs = getattr(request, "cluster_id", None)
        if theirs is None or self.config.cluster_id is None or theirs == self.config.cluster_id:
            return True
        # Said once per cluster id, quoted: the id is the sender's, any bytes at all.
        self._log_once(("cluster", theirs), logging.ERROR,
                       "node %d: refusing %s from cluster %r: this is cluster %s (INCONSISTENT_CLUSTER_ID)",
                       self.node_id, type(request).__name__, theirs, self.config.cluster_id)
        return False

    def _refused_as_foreign(self, source: int, response: Any) -> bool:
        """A peer answered INCONSISTENT_CLUSTER_ID: say so once; it will never accept us."""
        if response.error_code != ErrorCode.inconsistent_cluster_id:
            return False
        if source not in self._foreign_clusters:
            self._foreign_clusters.add(source)
            log.error(
                "node %d: node %d refuses our requests with INCONSISTENT_CLUSTER_ID: this node's cluster id %s "
                "is not the cluster's (check meta.properties)", self.node_id, source, self.config.cluster_id,
            )
        return True

    def _leader_field(self) -> int:
        return self.leader_id if self.leader_id is not None else NO_LEADER

    def _reply(self, handle: Any, response: Any) -> None:
        self.outbox.append(Reply(handle, response))

    def _on_vote_request(self, handle: Any, request: Any, now: int) -> None:
        def answer(error: ErrorCode, granted: bool = False, top: ErrorCode = ErrorCode.none) -> None:
            self._reply(handle, m.vote_response(error, self._leader_field(), self.epoch, granted, top))

        if not self._cluster_ok(request):
            return answer(ErrorCode.none, top=ErrorCode.inconsistent_cluster_id)
        p = m.partition_of(request)
        if p is None:
            return answer(ErrorCode.unknown_topic_or_partition)
        # Kafka's check, before any other: a candidate bumped its epoch past every epoch in
        # its log, so a last epoch at or above the one it campaigns in is not a real log.
        if p.last_offset < 0 or p.last_offset_epoch < 0 or p.last_offset_epoch >= p.replica_epoch:
            return answer(ErrorCode.invalid_request)
        if p.replica_epoch < self.epoch:
            return answer(ErrorCode.fenced_leader_epoch)
        if p.replica_id < 0 or p.replica_id == self.node_id or self._out_of_reach(p.replica_epoch, type(request).__name__):
            return answer(ErrorCode.invalid_request)
        if not self.is_voter or p.replica_id not in self.config.voters:
            return answer(ErrorCode.inconsistent_voter_set)
        if p.replica_epoch > self.epoch:
            # A newer epoch, but not (yet) a vote: keep our election timer running rather
            # than restart it. Otherwise a candidate with a stale log, campaigning again and
            # again, would keep the voters that could win from ever timing out.
            deadline = self._current_timeout_deadline(now)
            self._become_unattached(p.replica_epoch, now)
            self._election_deadline = min(self._election_deadline, deadline)
        theirs = OffsetAndEpoch(p.last_offset, p.last_offset_epoch)
        granted = False
        if self.role == Role.UNATTACHED:
            granted = theirs >= self._end_offset_and_epoch()
            if granted:
                self._become_voted(self.epoch, p.replica_id, now)
        elif self.role == Role.VOTED:
            granted = self.voted_id == p.replica_id
        answer(ErrorCode.none, granted)

    def _leader_announcement(self, handle: Any, request: Any, response: Callable[..., Any]) -> Any:
        """The checks BeginQuorumEpoch and EndQuorumEpoch share. Returns the partition, or
        None once an error has been answered (with `response`, the API's own builder)."""

        def refuse(error: ErrorCode, top: ErrorCode = ErrorCode.none) -> None:
            self._reply(handle, response(error, self._leader_field(), self.epoch, top))

        p = m.partition_of(request)
        if not self._cluster_ok(request):
            refuse(ErrorCode.none, ErrorCode.inconsistent_cluster_id)
        elif p is None:
            refuse(ErrorCode.unknown_topic_or_partition)
        elif p.leader_epoch < self.epoch:
            refuse(ErrorCode.fenced_leader_epoch)
        elif p.leader_id < 0 or p.leader_id == self.node_id or self._out_of_reach(p.leader_epoch, type(request).__name__):
            # This replica knows whether it leads: a message naming it is not from a leader.
            refuse(ErrorCode.invalid_request)
        elif not self.is_voter or p.leader_id not in self.config.voters:
            refuse(ErrorCode.inconsistent_voter_set)
        elif p.leader_epoch == self.epoch and self.leader_id is not None and self.leader_id != p.leader_id:
            # Raft elects one leader per epoch; a second claim is refused, not followed.
            self._log_once(("claim", p.leader_epoch, p.leader_id), logging.ERROR,
                           "node %d: refusing %s: node %d claims epoch %d, whose leader is node %d",
                           self.node_id, type(request).__name__, p.leader_id, p.leader_epoch, self.leader_id)
            refuse(ErrorCode.invalid_request)
        else:
            return p
        return None

    def _out_of_reach(self, epoch: int, what: str) -> bool:
        """A newer epoch in the reserve (see MAX_REQUESTED_EPOCH): refused, said once."""
        if epoch <= self.epoch or epoch <= MAX_REQUESTED_EPOCH:
            return False
        self._log_once(("epoch", epoch), logging.ERROR,
                       "node %d: refusing %s naming epoch %d: epochs above %d are beyond what elections reach",
                       self.node_id, what, epoch, MAX_REQUESTED_EPOCH)
        return True

    def _log_throttled(self, key: object, now: int, level: int, message: str, *args: object) -> None:
        """A line that a retry loop would repeat every backoff: at most once a minute per key."""
        if now - self._throttled.get(key, -_THROTTLE_MS) >= _THROTTLE_MS:
            if len(self._throttled) > 1000:
                self._throttled.clear()
            self._throttled[key] = now
            log.log(level, message, *args)

    def _log_once(self, key: object, level: int, message: str, *args: object) -> None:
        """Hostile or broken peers repeat themselves: one line per kind of refusal."""
        if key not in self._refusals_logged:
            if len(self._refusals_logged) < 1000:
                self._refusals_logged.add(key)
            log.log(level, message, *args)

    def _on_begin_quorum_request(self, handle: Any, request: Any, now: int) -> None:
        p = self._leader_announcement(handle, request, m.begin_quorum_response)
        if p is None:
            return
        if p.leader_epoch > self.epoch or self.leader_id != p.leader_id:
            self._become_follower(p.leader_epoch, p.leader_id, now)
        self._reply(handle, m.begin_quorum_response(ErrorCode.none, self._leader_field(), self.epoch))

    def _on_end_quorum_request(self, handle: Any, request: Any, now: int) -> None:
        p = self._leader_announcement(handle, request, m.end_quorum_response)
        if p is None:
            return
        if p.leader_epoch > self.epoch:
            self._become_follower(p.leader_epoch, p.leader_id, now)
        if self.role == Role.FOLLOWER and self.leader_id == p.leader_id:
            # The leader is going: its preferred successor campaigns at once, the others
            # after a backoff that grows with their place in the list.
            successors = list(p.preferred_successors)
            position = successors.index(self.node_id) if self.node_id in successors else len(successors)
            backoff = 0 if position == 0 else min(
                self.config.election_backoff_max_ms, self.config.retry_backoff_ms * (2**position)
            )
            self._fetch_deadline = min(self._fetch_deadline, now + backoff)
            self._leader_resigned = True
        self._reply(handle, m.end_quorum_response(ErrorCode.none, self._leader_field(), self.epoch))

    def _validate_leader_epoch(self, epoch: int) -> ErrorCode:
        """KIP-320 fencing for a request that must reach the leader of `epoch`."""
        if epoch < self.epoch:
            return ErrorCode.fenced_leader_epoch
        if epoch > self.epoch:
            return ErrorCode.unknown_leader_epoch
        if self.role != Role.LEADER:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none

    def _fetch_error(self, error: ErrorCode, top: ErrorCode = ErrorCode.none) -> Any:
        return m.fetch_response(error, leader_id=self._leader_field(), epoch=self.epoch, top_error=top)

    def _on_fetch_request(self, handle: Any, request: Any, now: int) -> None:
        if not self._cluster_ok(request):
            return self._reply(handle, self._fetch_error(ErrorCode.none, ErrorCode.inconsistent_cluster_id))
        p = m.partition_of(request)
        if p is None:
            return self._reply(handle, self._fetch_error(ErrorCode.unknown_topic_or_partition))
        # As Kafka, a request that cannot be right is refused before its epoch is looked at.
        if (
            request.max_wait < _NO_WAIT
            or request.replica_id == self.node_id
            or p.fetch_offset < 0
            or p.last_fetched_epoch < 0
            or p.last_fetched_epoch > p.current_leader_epoch
        ):
            return self._reply(handle, self._fetch_error(ErrorCode.invalid_request))
        error = self._validate_leader_epoch(p.current_leader_epoch)
        if error != ErrorCode.none:
            return self._reply(handle, self._fetch_error(error))
        leader = self._leader
        assert leader is not None
        if request.replica_id >= 0:
            # A voter fetching in our epoch follows us, whatever the answer (records,
            # DivergingEpoch or SnapshotId): it counts toward check quorum.
            leader.record_contact(request.replica_id, now)
        snapshot = self._snapshot_for_fetch(p.fetch_offset, p.last_fetched_epoch)
        if snapshot is not None:
            answer = m.fetch_response(
                ErrorCode.none,
                leader_id=self.node_id,
                epoch=self.epoch,
                high_watermark=self.high_watermark if self.high_watermark is not None else -1,
                log_start_offset=self.log.start_offset,
                snapshot_id=(snapshot.end_offset, snapshot.epoch),
            )
            return self._reply(handle, answer)
        diverging = self._diverging(p.fetch_offset, p.last_fetched_epoch)
        if diverging is not None:
            return self._reply(handle, self._fetch_answer(records=None, diverging=diverging))
        hw_moved = False
        if request.replica_id >= 0:
            leader.record_fetch(request.replica_id, p.fetch_offset, self.log.end_offset, now)
            hw_moved = self._advance_high_watermark()
            if hw_moved:
                self._answer_parked_fetches(now, force=True)
        max_bytes = min(p.partition_max_bytes, request.max_bytes, self.config.max_fetch_bytes)
        wait_ms = int(request.max_wait.total_seconds() * 1000)
        parked = _ParkedFetch(handle, request.replica_id, p.fetch_offset, max_bytes, now + wait_ms)
        # Answer at once when there is data, or when this very fetch moved the high
        # watermark (the fetcher would otherwise learn it only when its wait runs out).
        if p.fetch_offset < self.log.end_offset or wait_ms <= 0 or hw_moved:
            self._answer_fetch(parked)
        else:
            self._parked.append(parked)

    def _snapshot_for_fetch(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        """KIP-630: the latest snapshot, when the fetcher cannot go on from the log.

        Its offset is below the log start; or at it with an epoch other than the earliest
        snapshot's; or its last epoch is older than the earliest snapshot's; or it starts
        from nothing (offset 0) while a snapshot exists, which is the faster way in.

        Never the empty snapshot (0, 0) (Kafka's bootstrap snapshot id): it holds nothing
        to catch up with, and a fetcher at offset 0 sent to it would load it, fetch from 0
        again and be sent to it again, forever.
        """
        latest = self.snapshots.latest()
        earliest = self.snapshots.earliest()
        if latest is None or earliest is None or latest.end_offset == 0:
            return None
        start = self.log.start_offset
        if (
            fetch_offset == 0
            or fetch_offset < start
            or (fetch_offset == start and last_fetched_epoch != earliest.epoch)
            or last_fetched_epoch < earliest.epoch
        ):
            return latest
        return None

    def _advance_high_watermark(self) -> bool:
        """Leader only: recomputes the high watermark and delivers what it commits."""
        assert self._leader is not None
        if not self._leader.update_high_watermark(self.log.last_flushed_offset):
            return False
        self.high_watermark = self._leader.high_watermark
        self._deliver_commits()
        return True

    def _diverging(self, fetch_offset: int, last_fetched_epoch: int) -> OffsetAndEpoch | None:
        """KIP-595's check: does the fetcher's log agree with ours at (offset, epoch)?

        If our history of its last epoch ends before its fetch offset, or we never had that
        epoch, answer the largest epoch we share and where it ends in our log.
        """
        if fetch_offset == 0:
            return None
        end = self._end_offset_for_epoch(last_fetched_epoch)
        if end.epoch != last_fetched_epoch or end.offset < fetch_offset:
            return end
        return None

    def _fetch_answer(self, records: Any, diverging: OffsetAndEpoch | None = None) -> Any:
        hw = self.high_watermark if self.high_watermark is not None else -1
        return m.fetch_response(
            ErrorCode.none,
            leader_id=self.node_id,
            epoch=self.epoch,
            high_watermark=hw,
            log_start_offset=self.log.start_offset,
            records=records,
            diverging=(diverging.offset, diverging.epoch) if diverging else None,
        )

    def _answer_fetch(self, parked: _ParkedFetch) -> None:
        data = None
        if parked.fetch_offset < self.log.end_offset:
            data = self.log.read(parked.fetch_offset, parked.max_bytes).data
        self._reply(parked.handle, self._fetch_answer(records=data))

    def _answer_parked_fetches(self, now: int, force: bool = False) -> None:
        """Parked fetches go out when there is data for them, when the high watermark moved
        (`force`, so followers learn it promptly), or when their wait is over."""
        if not self._parked:
            return
        end = self.log.end_offset
        keep = []
        for parked in self._parked:
            if force or now >= parked.deadline or parked.fetch_offset < end:
                self._answer_fetch(parked)
            else:
                keep.append(parked)
        self._parked = keep

    def _on_describe_quorum_request(self, handle: Any, request: Any, now: int) -> None:
        if m.partition_of(request) is None:
            return self._reply(
                handle, m.describe_quorum_response(ErrorCode.unknown_topic_or_partition, leader_id=NO_LEADER, epoch=self.epoch)
            )
        leader = self._leader
        if leader is None:
            return self._reply(
                handle,
                m.describe_quorum_response(ErrorCode.not_leader_or_follower, leader_id=self._leader_field(), epoch=self.epoch),
            )

        def states(progress: dict) -> tuple:
            # The leader reports itself at its log end, fetched and caught up as of now.
            return tuple(
                m.replica_state(p.replica_id, self.log.end_offset, now, now)
                if p.replica_id == self.node_id
                else m.replica_state(p.replica_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
                for p in sorted(progress.values(), key=lambda p: p.replica_id)
            )

        self._reply(
            handle,
            m.describe_quorum_response(
                ErrorCode.none,
                leader_id=self.node_id,
                epoch=self.epoch,
                high_watermark=self.high_watermark if self.high_watermark is not None else -1,
                voters=states(leader.voter_progress),
                observers=states(leader.observer_progress),
            ),
        )

    # ================================================================ responses

    def _election_response(self, source: int, response: Any, now: int) -> Any:
        """What Vote, BeginQuorumEpoch and EndQuorumEpoch responses share: the partition,
        or None when the request failed (retried after the backoff) or the answer named
        a newer leader (now followed)."""
        p = m.partition_of(response)
        self._refused_as_foreign(source, response)
        if response.error_code != ErrorCode.none or p is None:
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return None
        if self._maybe_learn_leader(p.leader_id, p.leader_epoch, now):
            return None
        return p

    def _on_vote_response(self, source: int, response: Any, now: int) -> None:
        p = self._election_response(source, response, now)
        if p is None:
            return
        if self.role != Role.CANDIDATE or p.leader_epoch != self.epoch:
            return
        if p.error_code != ErrorCode.none:
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return
        self._votes_unreachable.discard(source)
        if p.vote_granted:
            self._votes_granted.add(source)
            self._maybe_win(now)
        else:
            self._votes_rejected.add(source)

    def _on_begin_quorum_response(self, source: int, response: Any, now: int) -> None:
        p = self._election_response(source, response, now)
        if p is None:
            return
        if self._leader is not None and p.error_code == ErrorCode.none and p.leader_epoch == self.epoch:
            self._leader.begin_quorum_acked.add(source)
        else:
            self._retry_at[source] = now + self.config.retry_backoff_ms

    def _on_end_quorum_response(self, source: int, response: Any, now: int) -> None:
        p = self._election_response(source, response, now)
        if p is None:
            return
        if self.role == Role.RESIGNED and p.error_code == ErrorCode.none:
            self._end_quorum_acked.add(source)

    def _on_fetch_response(self, source: int, response: Any, now: int) -> None:
        p = m.partition_of(response)
        if response.error_code != ErrorCode.none or p is None:
            if not self._refused_as_foreign(source, response):
                self._log_throttled(("fetch", source, response.error_code), now, logging.WARNING,
                                    "node %d: fetch from %d failed: %s", self.node_id, source, response.error_code.name)
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return
        leader = p.current_leader
        if self._abandoned == (leader.leader_epoch, leader.leader_id) and source != leader.leader_id:
            # Hearsay about the leader this observer just gave up on: a voter that has not
            # noticed its loss yet. Following it again would wait out a whole fetch timeout;
            # ask the others until one names a newer leader, or that leader answers itself
            # (Kafka's observer keeps fetching from the bootstrap servers the same way).
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return
        if self._maybe_learn_leader(leader.leader_id, leader.leader_epoch, now):
            return
        if self.role != Role.FOLLOWER or source != self.leader_id or leader.leader_epoch != self.epoch:
            return
        if p.error_code != ErrorCode.none:
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return
        self._fetch_deadline = now + self.config.fetch_timeout_ms
        if p.log_start_offset >= 0:
            self._leader_start_offset = p.log_start_offset
        if p.snapshot_id.end_offset >= 0 and p.snapshot_id.epoch >= 0:
            self._start_download(SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch), now)
            return
        if p.diverging_epoch.end_offset >= 0 and p.diverging_epoch.epoch >= 0:
            self._truncate_to_diverging(OffsetAndEpoch(p.diverging_epoch.end_offset, p.diverging_epoch.epoch))
            return
        if p.records:
            try:
                self.log.append_as_follower(p.records)
            except InvalidAppendError as e:  # damaged on the way, or a peer that is not a real leader
                self._log_once(("append", str(e)), logging.WARNING, "node %d: refused records fetched from %d: %s",
                               self.node_id, source, e)
                self._retry_at[source] = now + self.config.retry_backoff_ms
                return
        if p.high_watermark >= 0 and (self.high_watermark is None or p.high_watermark > self.high_watermark):
            self.high_watermark = p.high_watermark
        self._deliver_commits()

    def _truncate_to_diverging(self, diverging: OffsetAndEpoch) -> None:
        end_before = self.log.end_offset
        local = self.log.end_offset_for_epoch(diverging.epoch)
        target = min(local.offset, diverging.offset) if local.epoch == diverging.epoch else local.offset
        committed = min(self.high_watermark, end_before) if self.high_watermark is not None else 0
        if 0 <= target < committed:
            raise InvariantViolation(
                f"node {self.node_id}: leader {self.leader_id} asks to truncate to {target} "
                f"(divergence at epoch {diverging.epoch}), below the high watermark {committed}"
            )
        new_end = self.log.truncate_to_end_offset(diverging)
        log.info(
            "node %d: truncated to %d because of divergence at epoch %d (leader's epoch ends at %d; log ended at %d)",
            self.node_id,
            new_end,
            diverging.epoch,
            diverging.offset,
            end_before,
        )

    # ================================================================ snapshots (KIP-630)

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        """The id a snapshot of the state up to `end_offset` must have: the epoch of the
        record just before it."""
        epoch = self.log.epoch_for_offset(end_offset - 1) if end_offset > 0 else 0
        if epoch is None:
            latest = self.snapshots.latest()
            if latest is not None and latest.end_offset == end_offset:
                epoch = latest.epoch
            else:
                raise SnapshotError(f"offset {end_offset - 1} is not in the log [{self.log.start_offset}, {self.log.end_offset})")
        return SnapshotId(end_offset, epoch)

    def create_snapshot(
        self, snapshot_id: SnapshotId, last_contained_log_time: int, **writer_options: Any
    ) -> SnapshotWriter:
        """A writer for the state machine's snapshot; the core sees it once frozen.

        Refused unless the snapshot ends at or below the high watermark, at or above the log
        start offset, on a batch boundary, with the epoch the log has there: a snapshot
        must hold exactly a committed prefix of this log.
        """
        end = snapshot_id.end_offset
        if end <= 0:
            raise SnapshotError(
                f"cannot create snapshot {snapshot_id}: a snapshot must hold at least one record "
                f"(end offset 0 is the empty bootstrap snapshot, never sent to fetchers)"
            )
        hw = self.high_watermark
        if hw is None or end > hw:
            raise SnapshotError(f"cannot snapshot up to {end}: the high watermark is {hw}")
        if end < self.log.start_offset:
            raise SnapshotError(f"cannot snapshot up to {end}: the log starts at {self.log.start_offset}")
        if end < self.log.end_offset and self.log.read(end, 1).first_offset != end:
            raise SnapshotError(f"cannot snapshot up to {end}: it is inside a batch; snapshots end on batch boundaries")
        expected = self.snapshot_id_at(end)
        if expected != snapshot_id:
            raise SnapshotError(f"cannot create snapshot {snapshot_id}: the log's epoch at offset {end - 1} is {expected.epoch}")
        writer = self.snapshots.create_writer(snapshot_id, last_contained_log_time, **writer_options)
        if self.metrics is not None:
            self._snapshot_started[snapshot_id] = self.metrics.clock()
        return writer

    def _observe_snapshots(self, now: int) -> None:
        """Learns of snapshots frozen since the last step (by the state machine, or fetched)."""
        ids = self.snapshots.list()
        if ids == self._known_snapshots:
            return
        for sid in ids:
            if sid not in self._snapshot_info:
                reader = self.snapshots.open_reader(sid)
                self._snapshot_info[sid] = (reader.size, reader.header.last_contained_log_timestamp)
                started = self._snapshot_started.pop(sid, None)
                if started is not None and self.metrics is not None:
                    self.metrics.gen_latency_ms.observe(self.metrics.since_ms(started))
        for sid in set(self._snapshot_info) - set(ids):
            del self._snapshot_info[sid]
            self._readers.pop(sid, None)
        self._known_snapshots = ids
        self._update_metrics()

    def _update_metrics(self) -> None:
        latest = self.snapshots.latest()
        if self.metrics is None or latest is None:
            return
        self.metrics.size_bytes.set(self._snapshot_info[latest][0])
        if self.high_watermark is not None:
            self.metrics.lag.set(max(0, self.high_watermark - latest.end_offset))

    def _load_snapshot(self, snapshot_id: SnapshotId) -> None:
        reader = self.snapshots.open_reader(snapshot_id)
        if self.listener is not None:
            started = self.metrics.clock() if self.metrics is not None else 0.0
            self.listener.handle_load_snapshot(reader)
            if self.metrics is not None:
                self.metrics.load_latency_ms.observe(self.metrics.since_ms(started))
        # The state is now the snapshot's, whatever was applied before: commits resume at
        # its end. (A snapshot below what was applied rolls the state back; keeping the
        # larger offset would skip the records between them.)
        self._applied = snapshot_id.end_offset

    def _set_start_offset(self, snapshot: SnapshotId, why: str) -> None:
        """Moves the log start to a snapshot's end and deletes the snapshots before it."""
        if snapshot.end_offset <= self.log.start_offset or snapshot.end_offset > self.log.end_offset:
            return
        log.info("node %d: log start offset %d -> %d (%s)", self.node_id, self.log.start_offset, snapshot.end_offset, why)
        self.log.advance_start_offset(snapshot.end_offset)
        self.snapshots.delete_before(snapshot.end_offset)

    def _clean(self, now: int) -> None:
        """Log start offset and snapshot retention; see retention.py for the rules.

        Retention decides how far the log start may move (Kafka's KafkaMetadataLog.maybeClean,
        called from every replica's poll loop); the leader holds a move back while a live
        replica still needs the records it would remove (KIP-630), and followers also follow
        the leader's log start. A replica between leaders waits for one.
        """
        ids = self.snapshots.list()
        if not ids or self.role not in (Role.LEADER, Role.FOLLOWER):
            return  # between leaders, no one knows what the replicas still need
        timestamps = {sid: info[1] for sid, info in self._snapshot_info.items()}
        if self.role == Role.FOLLOWER:
            target = follower_target(ids, self._leader_start_offset)
            if target is not None:
                self._set_start_offset(target, f"the leader's log starts at {self._leader_start_offset}")
        kept = self.snapshots.list()
        retained = retention_target(
            kept,
            {sid: info[0] for sid, info in self._snapshot_info.items()},
            timestamps,
            {sid.end_offset: self.log.bytes_from(sid.end_offset) for sid in kept},
            now,
            self.config.max_retention_bytes,
            self.config.max_retention_ms,
        )
        if retained is None:
            return
        if self._leader is not None:
            limit = min(self.high_watermark if self.high_watermark is not None else 0, self.log.end_offset)
            recent = now - self.config.fetch_timeout_ms
            young = self._leader.started_ms >= recent  # a voter not heard from yet may still come
            live = [
                p.end_offset
                for rid, p in {**self._leader.voter_progress, **self._leader.observer_progress}.items()
                if rid != self.node_id and (p.last_fetch_ms >= recent or (young and rid in self.config.voters))
            ]
            candidates = [s for s in kept if self.log.start_offset < s.end_offset <= limit]
            target = leader_target(retained, candidates, live, timestamps, now, self.config.start_offset_lag_time_max_ms)
            if target is not None:
                why = ("metadata.max.retention.bytes/ms" if all(o >= target.end_offset for o in live)
                       else "metadata.max.retention.bytes/ms; metadata.start.offset.lag.time.max.ms passed")
                self._set_start_offset(target, why)
        else:
            self._set_start_offset(retained, "metadata.max.retention.bytes/ms")

    # ---------------------------------------------------------------- FetchSnapshot, leader side

    def _on_fetch_snapshot_request(self, handle: Any, request: Any, now: int) -> None:
        if not self._cluster_ok(request):
            return self._reply(handle, m.fetch_snapshot_response([], ErrorCode.inconsistent_cluster_id))
        answers: list[tuple[str, int, Any]] = []  # topic, partition, error or (reader, position, sid)
        for topic in request.topics:
            name = topic.name
            for part in topic.partitions:
                sid = SnapshotId(max(part.snapshot_id.end_offset, 0), max(part.snapshot_id.epoch, 0))
                if not (m.is_metadata_topic(topic) and part.partition == m.METADATA_PARTITION):
                    answers.append((name, part.partition, (ErrorCode.unknown_topic_or_partition, sid)))
                    continue
                error = self._validate_leader_epoch(part.current_leader_epoch)
                reader = None
                if error == ErrorCode.none:
                    reader = self._reader(sid)
                    if reader is None:
                        error = ErrorCode.snapshot_not_found
                    elif not 0 <= part.position <= reader.size:
                        error = ErrorCode.position_out_of_range
                if error != ErrorCode.none:
                    answers.append((name, part.partition, (error, sid)))
                else:
                    answers.append((name, part.partition, (reader, part.position, sid)))
        wants = [
            min(a[2][0].size - a[2][1], self.config.snapshot_partition_max_bytes) if len(a[2]) == 3 else 0
            for a in answers
        ]
        shares = m.share_bytes(min(request.max_bytes, self.config.snapshot_response_max_bytes), wants)
        topics: dict[str, list[Any]] = {}
        for (name, index, result), share in zip(answers, shares, strict=True):
            leader_fields = {"leader_id": self._leader_field(), "epoch": self.epoch}
            if len(result) == 2:
                error, sid = result
                part = m.fetch_snapshot_partition(index, error, (sid.end_offset, sid.epoch), **leader_fields)
            else:
                reader, position, sid = result
                part = m.fetch_snapshot_partition(
                    index,
                    ErrorCode.none,
                    (sid.end_offset, sid.epoch),
                    size=reader.size,
                    position=position,
                    records=reader.read_chunk(position, share),
                    **leader_fields,
                )
            topics.setdefault(name, []).append(part)
        served = any(len(result) == 3 for _, _, result in answers)
        if self._leader is not None and request.replica_id >= 0 and served:
            self._leader.record_contact(request.replica_id, now)  # counts toward check quorum, as a Fetch
        self._reply(handle, m.fetch_snapshot_response(list(topics.items())))

    def _reader(self, sid: SnapshotId) -> SnapshotReader | None:
        if sid not in self._readers:
            try:
                self._readers[sid] = self.snapshots.open_reader(sid)
            except SnapshotNotFoundError:
                return None
        return self._readers[sid]

    # ---------------------------------------------------------------- FetchSnapshot, follower side

    def _start_download(self, sid: SnapshotId, now: int) -> None:
        """The leader says: take snapshot `sid`. Log fetching pauses until it is loaded."""
        if sid in self.snapshots.list():
            self._install(sid, "already held locally")
            return
        self._abort_download("a new snapshot was named")
        self._download = self.snapshots.create_raw_writer(sid)
        self._download_progress = -1
        log.info("node %d: fetching snapshot %d-%d from leader %s", self.node_id, sid.end_offset, sid.epoch, self.leader_id)

    def _abort_download(self, why: str) -> None:
        if self._download is not None:
            sid = self._download.snapshot_id
            self._download.abort()
            self._download = None
            log.info("node %d: dropped the download of snapshot %d-%d: %s", self.node_id, sid.end_offset, sid.epoch, why)

    def _on_fetch_snapshot_response(self, source: int, response: Any, now: int) -> None:
        p = m.partition_of(response)
        if response.error_code != ErrorCode.none or p is None:
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return
        if self._maybe_learn_leader(p.current_leader.leader_id, p.current_leader.leader_epoch, now):
            return
        download = self._download
        if self.role != Role.FOLLOWER or source != self.leader_id or download is None:
            return
        sid = download.snapshot_id
        if p.error_code in (
            ErrorCode.snapshot_not_found,
            ErrorCode.position_out_of_range,
            ErrorCode.not_leader_or_follower,
        ) or (p.snapshot_id.end_offset, p.snapshot_id.epoch) != (sid.end_offset, sid.epoch):
            self._abort_download(f"the leader answered {p.error_code.name}; asking it again with a Fetch")
            return
        if p.error_code != ErrorCode.none:
            self._retry_at[source] = now + self.config.retry_backoff_ms
            return
        self._fetch_deadline = now + self.config.fetch_timeout_ms
        if p.position != download.size:
            return  # a stale or repeated chunk
        data = p.unaligned_records
        download.append(p.position, data.read() if hasattr(data, "read") else data)
        if download.size > p.size:
            self._abort_download(f"received {download.size} bytes of a {p.size}-byte snapshot")
            return
        tenth = download.size * 10 // max(p.size, 1)
        if tenth != self._download_progress:
            self._download_progress = tenth
            log.info(
                "node %d: fetching snapshot %d-%d: %d%% (%d of %d bytes)",
                self.node_id, sid.end_offset, sid.epoch, tenth * 10, download.size, p.size,
            )
        if download.size == p.size:
            try:
                download.validate(p.size)
                download.freeze()
            except SnapshotError as e:
                log.error("node %d: fetched snapshot %d-%d is bad (%s); fetching again", self.node_id, sid.end_offset, sid.epoch, e)
                self._abort_download("it did not validate")
                return
            self._download = None
            self._observe_snapshots(now)
            self._install(sid, "fetched from the leader")

    def _install(self, sid: SnapshotId, how: str) -> None:
        """The log restarts at the snapshot's end; the state machine loads the snapshot."""
        self.log.truncate_fully_and_start_at(sid.end_offset)
        self.snapshots.delete_before(sid.end_offset)
        self._load_snapshot(sid)
        if self.high_watermark is None or self.high_watermark < sid.end_offset:
            self.high_watermark = sid.end_offset  # a snapshot holds only committed records
        log.info("node %d: loaded snapshot %d-%d (%s); fetching the log from %d",
                 self.node_id, sid.end_offset, sid.epoch, how, sid.end_offset)

    # ================================================================ commits

    def _deliver_commits(self) -> None:
        """Hands every committed batch not yet delivered to the listener, in order."""
        if self.high_watermark is None:
            return
        limit = min(self.high_watermark, self.log.end_offset)
        if self.listener is None:
            self._applied = max(self._applied, limit)
            return
        while self._applied < limit:
            info = self.log.read(self._applied, self.config.max_fetch_bytes, upper_bound=limit)
            if info.next_offset <= self._applied:
                return
            for batch in read_batches(info.tobytes(), expected_offset=info.first_offset):
                h = batch.header
                if h.next_offset <= self._applied:
                    continue
                self.listener.handle_commit(
                    CommittedBatch(
                        h.base_offset,
                        h.last_offset,
                        h.partition_leader_epoch,
                        h.max_timestamp,
                        h.size,
                        batch.records(),
                        h.is_control,
                    )
                )
            self._applied = info.next_offset

    @property
    def applied_offset(self) -> int:
        """Every offset below this has been delivered to the listener (or was a control record)."""
        return self._applied

    _request_handlers: dict[type, Callable] = {
        m.VoteRequest: _on_vote_request,
        m.BeginQuorumEpochRequest: _on_begin_quorum_request,
        m.EndQuorumEpochRequest: _on_end_quorum_request,
        m.FetchRequest: _on_fetch_request,
        m.FetchSnapshotRequest: _on_fetch_snapshot_request,
        m.DescribeQuorumRequest: _on_describe_quorum_request,
    }
    _response_handlers: dict[type, Callable] = {
        m.VoteResponse: _on_vote_response,
        m.BeginQuorumEpochResponse: _on_begin_quorum_response,
        m.EndQuorumEpochResponse: _on_end_quorum_response,
        m.FetchResponse: _on_fetch_response,
        m.FetchSnapshotResponse: _on_fetch_snapshot_response,
    }


def _size_bound(records: Sequence[SimpleRecord | tuple]) -> int:
    """An upper bound on the bytes `records` take in a batch, its header not counted."""
    size = 0
    for r in records:
        size += _RECORD_BOUND + len(r[0] or b"") + len(r[1] or b"")
        if len(r) > 2 and r[2]:
            size += sum(_HEADER_BOUND + len(key.encode()) + len(value or b"") for key, value in r[2])
    return size
