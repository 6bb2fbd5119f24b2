"""The replica's place in the quorum: epoch, leader, vote and role, changed only durably.

Every transition writes the quorum-state file first (durable when `write` returns) and
switches only then, so a vote granted or an epoch entered survives any crash that follows.
Transitions Raft does not allow are refused with InvariantViolation before anything is
written: the core asking for one is a bug, and the replica stops rather than act on it.

Allowed, into the same epoch (Kafka's QuorumState has the same table):

    unattached  <- follower, prospective  an observer gives up on a leader that stopped answering;
                                      a prospective that knows no leader lost its pre-vote
    voted       <- unattached, prospective          a vote granted
    prospective <- unattached, voted, follower, candidate, resigned, prospective
                                      a timeout: ask first whether it could win (KIP-996)
    leader      <- candidate          an election won
    follower    <- unattached, voted, prospective, candidate
    resigned    <- leader             a graceful or forced step down

and into a newer epoch: unattached or follower from any role, candidate (the next epoch
only, voters only) from any role but leader (from a prospective that a majority would
vote for; from the others only with pre-vote off). The epoch never goes back. At start, the role
comes from the file (`restore`), whatever it is.

Each `become_*` makes the new role's object with its timers (election timeouts are drawn
from the core's seeded random source, so a simulation replays exactly) and then calls
`on_switch(old role object, old epoch)`: the core's part of leaving a role.
"""

import logging
from collections.abc import Callable
from random import Random

from kraft.raft.gate import Gate
from kraft.raft.raft_config import RaftConfig
from kraft.raft.raft_errors import InvariantViolation
from kraft.raft.roles import (
    Campaign,
    Candidate,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Role,
    RoleState,
    Unattached,
    Voted,
)
from kraft.raft.voters import Voters
from kraft.storage import ElectionState, QuorumStateStore

log = logging.getLogger("kraft.raft")

_SAME_EPOCH: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: frozenset({Role.FOLLOWER, Role.PROSPECTIVE}),
    Role.VOTED: frozenset({Role.UNATTACHED, Role.PROSPECTIVE}),
    Role.PROSPECTIVE: frozenset({Role.UNATTACHED, Role.VOTED, Role.FOLLOWER, Role.CANDIDATE, Role.RESIGNED,
                                 Role.PROSPECTIVE}),
    Role.LEADER: frozenset({Role.CANDIDATE}),
    Role.FOLLOWER: frozenset({Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE}),
    Role.RESIGNED: frozenset({Role.LEADER}),
    Role.CANDIDATE: frozenset(),
}
_NEWER_EPOCH: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: frozenset(Role),
    Role.FOLLOWER: frozenset(Role),
    Role.CANDIDATE: frozenset(Role) - {Role.LEADER},
    Role.VOTED: frozenset(),
    Role.PROSPECTIVE: frozenset(),
    Role.LEADER: frozenset(),
    Role.RESIGNED: frozenset(),
}


class QuorumState:
    def __init__(self, config: RaftConfig, voters: Voters, store: QuorumStateStore, rng: Random, gate: Gate,
                 on_switch: Callable[[RoleState, int], None]) -> None:
        self.config = config
        self.voters = voters
        self.gate = gate
        self.node_id = config.node_id
        self.store = store
        self.rng = rng
        self.on_switch = on_switch
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_id: int | None = None
        self.state: RoleState = Unattached(election_deadline=None)
        self._restored = False
        self._vote: tuple[int, int] | None = None  # (epoch, candidate) of the last vote cast, this one's own included

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def leader_field(self) -> int:
        """The leader as responses name it: -1 when none is known."""
        return self.leader_id if self.leader_id is not None else -1

    # ---------------------------------------------------------------- timers

    def election_timer(self, now: int) -> int:
        """A randomized election deadline: the timeout plus up to as much again."""
        timeout = self.config.election_timeout_ms
        return now + timeout + self.rng.randrange(timeout)

    def timeout_deadline(self, now: int) -> int:
        """When this replica would next start an election on its own."""
        deadline = self.state.timeout_deadline()
        return deadline if deadline is not None else self.election_timer(now)

    def postpone_timeout(self, now: int) -> None:
        """The role's own timeout, pushed one election timeout on (it cannot act on it now)."""
        state = self.state
        if isinstance(state, Follower):
            state.fetch_deadline = self.election_timer(now)
        elif isinstance(state, Campaign):
            state.backoff_until, state.election_deadline = None, self.election_timer(now)
        elif isinstance(state, Voted | Resigned) or (isinstance(state, Unattached) and state.election_deadline):
            state.election_deadline = self.election_timer(now)

    def _unattached(self, now: int, abandoned: tuple[int, int] | None = None) -> Unattached:
        timer = self.election_timer(now)  # drawn for observers too: the random sequence is the same
        return Unattached(timer if self.voters.may_campaign(self.node_id) else None, abandoned)

    def _candidate(self, now: int) -> Candidate:
        return Candidate(self.election_timer(now), granted={self.node_id})

    # ---------------------------------------------------------------- transitions

    def restore(self, saved: ElectionState | None, log_epoch: int, now: int) -> None:
        """The role at start, from what the file held and the log's last epoch."""
        if self._restored:
            raise InvariantViolation(f"node {self.node_id}: quorum state restored twice")
        self._restored = True
        if saved is None or saved.epoch < log_epoch:
            epoch = max(log_epoch, saved.epoch if saved else 0)
            self._switch(self._unattached(now), epoch, None, None, force_write=True)
        elif saved.leader_id == self.node_id:
            # We led this epoch before a restart: we cannot know what happened since, so do
            # not lead again in it; resign and let an election pick the next epoch's leader.
            others = tuple(v for v in self.voters.ids if v != self.node_id)
            resigned = Resigned(self.election_timer(now), others, {self.node_id})
            self._switch(resigned, saved.epoch, self.node_id, saved.voted_id)
        elif saved.leader_id is not None:
            self._switch(Follower(now + self.config.fetch_timeout_ms), saved.epoch, saved.leader_id, None)
        elif saved.voted_id == self.node_id and self.voters.may_campaign(self.node_id):
            self._switch(self._candidate(now), saved.epoch, None, self.node_id)
        elif saved.voted_id is not None:
            self._switch(Voted(self.election_timer(now)), saved.epoch, None, saved.voted_id)
        else:
            self._switch(self._unattached(now), saved.epoch, None, None)

    def become_unattached(self, epoch: int, now: int, abandoned: tuple[int, int] | None = None) -> None:
        if abandoned is None and isinstance(self.state, Unattached):
            abandoned = self.state.abandoned  # an observer still ignores hearsay of the leader it gave up on
        voted = self.voted_id if epoch == self.epoch else None  # a vote cast stays cast for its epoch
        self._transition(self._unattached(now, abandoned), epoch, None, voted)

    def become_observer(self, now: int) -> None:
        """The voter set no longer names this replica (KIP-853): it stops timing out into
        elections. Its vote stays cast and a leader it knows stays known; a resigned leader
        removed from the set becomes an observer of its own epoch, which it can never lead
        again (elections are always for a newer one)."""
        # Straight to the new role, past _transition's table: these moves exist only because
        # the voter set changed under the role, which the table's roles cannot see.
        state = self.state
        if isinstance(state, Unattached):
            state.election_deadline = None
        elif isinstance(state, Voted | Prospective | Resigned):
            leader = self.leader_id if isinstance(state, Prospective) and self.leader_id != self.node_id else None
            if leader is not None:
                self._switch(Follower(now + self.config.fetch_timeout_ms), self.epoch, leader, self.voted_id)
            else:
                self._switch(Unattached(None), self.epoch, None, self.voted_id)

    def become_voted(self, candidate: int, now: int) -> None:
        if self._vote is not None and self._vote != (self.epoch, candidate) and self._vote[0] == self.epoch:
            raise InvariantViolation(f"node {self.node_id}: would vote for {candidate} in epoch {self.epoch}, "
                                     f"having voted for {self._vote[1]}")
        self._transition(Voted(self.election_timer(now)), self.epoch, None, candidate)

    def become_prospective(self, now: int) -> None:
        """Pre-vote in this epoch, changing nothing on disk: a follower keeps naming its
        leader, and a resigned leader itself, so that a restart still restores it as the
        leader of this epoch that resigned (and never a candidate of an epoch it led, which
        the voters that elected it would elect again); the vote cast stays cast."""
        leader = self.leader_id if isinstance(self.state, Follower | Resigned) else None
        prospective = Prospective(self.election_timer(now), granted={self.node_id})
        self._transition(prospective, self.epoch, leader, self.voted_id)

    def become_candidate(self, now: int) -> None:
        self._transition(self._candidate(now), self.epoch + 1, None, self.node_id)

    def become_leader(self, leader: Leader) -> None:
        self._transition(leader, self.epoch, self.node_id, self.node_id)

    def become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        if leader_id == self.node_id:
            raise InvariantViolation(f"node {self.node_id}: told to follow itself in epoch {epoch}")
        if self.role == Role.LEADER and epoch == self.epoch:
            raise InvariantViolation(f"node {self.node_id}: leads epoch {epoch} but node {leader_id} claims it too")
        voted = self.voted_id if epoch == self.epoch else None
        self._transition(Follower(now + self.config.fetch_timeout_ms), epoch, leader_id, voted)

    def become_resigned(self, successors: tuple[int, ...], now: int) -> None:
        resigned = Resigned(self.election_timer(now), successors, {self.node_id})
        self._transition(resigned, self.epoch, self.node_id, self.voted_id)

    def learn_leader(self, leader_id: int, epoch: int, now: int) -> bool:
        """Any message naming a newer epoch, or the leader of ours when we do not know it,
        moves this replica there. Returns True if it did."""
        if self.gate.out_of_reach(epoch, self.epoch, "a response"):
            return False
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self.become_follower(epoch, leader_id, now)
            else:
                self.become_unattached(epoch, now)
            return True
        # The leader of our epoch, when we know none: a prospective that followed one still
        # knows it (every voter it asks names it too), and must count their answers.
        if epoch == self.epoch and 0 <= leader_id != self.node_id and self.leader_id is None and self.role in (
                Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE):
            self.become_follower(epoch, leader_id, now)
            return True
        return False

    def _transition(self, state: RoleState, epoch: int, leader_id: int | None, voted_id: int | None) -> None:
        """Enters `state`, refusing what Raft does not allow."""
        if epoch < self.epoch:
            raise InvariantViolation(f"node {self.node_id}: epoch would go back from {self.epoch} to {epoch}")
        to, now_in = state.role, self.role
        allowed = _SAME_EPOCH[to] if epoch == self.epoch else _NEWER_EPOCH[to]
        if now_in not in allowed or (to == Role.CANDIDATE and epoch != self.epoch + 1):
            raise InvariantViolation(f"node {self.node_id}: {now_in.value} in epoch {self.epoch} "
                                     f"cannot become {to.value} in epoch {epoch}")
        # A replica outside its own voter set may still vote (KIP-853, as Kafka 3.9+: its set may
        # be stale, and the candidate counts only its own set's votes; a static quorum's gate
        # refuses such votes before), and a leader whose own removal committed resigns.
        voter_only = (Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER, Role.RESIGNED)
        if to in voter_only and not self.voters.may_campaign(self.node_id) and (to, now_in) != (Role.RESIGNED, Role.LEADER):
            raise InvariantViolation(f"node {self.node_id}: an observer cannot become {to.value}")
        self._switch(state, epoch, leader_id, voted_id)

    def _switch(self, state: RoleState, epoch: int, leader_id: int | None, voted_id: int | None,
                force_write: bool = False) -> None:
        if force_write or (epoch, leader_id, voted_id) != (self.epoch, self.leader_id, self.voted_id):
            self.store.write(ElectionState(epoch, leader_id, voted_id, self.voters.ids))
        if epoch != self.epoch or state.role != self.role:
            log.info(
                "node %d: %s in epoch %d%s",
                self.node_id,
                state.role.value,
                epoch,
                f" (leader {leader_id})" if leader_id is not None and state.role != Role.LEADER else "",
            )
        old, old_epoch = self.state, self.epoch
        self.state, self.epoch, self.leader_id, self.voted_id = state, epoch, leader_id, voted_id
        if voted_id is not None:
            self._vote = (epoch, voted_id)
        self.on_switch(old, old_epoch)
