"""The replica's place in the quorum: epoch, leader, vote and role, changed only durably.

Every transition writes the quorum-state file first (durable when `write` returns) and
switches only then, so a vote granted or an epoch entered survives any crash that follows.
Transitions Raft does not allow are refused with InvariantViolation before anything is
written: the core asking for one is a bug, and the replica stops rather than act on it.

Allowed, into the same epoch (Kafka's QuorumState has the same table):

    unattached  <- follower           an observer gives up on a leader that stopped answering
    voted       <- unattached         a vote granted
    leader      <- candidate          an election won
    follower    <- unattached, voted, candidate
    resigned    <- leader             a graceful or forced step down

and into a newer epoch: unattached or follower from any role, candidate (the next epoch
only, voters only) from any role but leader. The epoch never goes back.
"""

import logging

from kraft.raft.errors import InvariantViolation
from kraft.raft.roles import Role, RoleState, Unattached
from kraft.storage import ElectionState, QuorumStateStore

log = logging.getLogger("kraft.raft")

_SAME_EPOCH: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: frozenset({Role.FOLLOWER}),
    Role.VOTED: frozenset({Role.UNATTACHED}),
    Role.LEADER: frozenset({Role.CANDIDATE}),
    Role.FOLLOWER: frozenset({Role.UNATTACHED, Role.VOTED, Role.CANDIDATE}),
    Role.RESIGNED: frozenset({Role.LEADER}),
    Role.CANDIDATE: frozenset(),
}
_NEWER_EPOCH: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: frozenset(Role),
    Role.FOLLOWER: frozenset(Role),
    Role.CANDIDATE: frozenset(Role) - {Role.LEADER},
    Role.VOTED: frozenset(),
    Role.LEADER: frozenset(),
    Role.RESIGNED: frozenset(),
}


class QuorumState:
    def __init__(self, node_id: int, voters: tuple[int, ...], store: QuorumStateStore) -> None:
        self.node_id = node_id
        self.voters = voters
        self.store = store
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_id: int | None = None
        self.state: RoleState = Unattached(election_deadline=None)
        self._restored = False

    @property
    def role(self) -> Role:
        return self.state.role

    def read(self) -> ElectionState | None:
        """What the file held at start (None: nothing yet)."""
        return self.store.read()

    def restore(self, state: RoleState, epoch: int, leader_id: int | None, voted_id: int | None,
                force_write: bool = False) -> None:
        """The role taken at start from what the file held: any role, once."""
        if self._restored:
            raise InvariantViolation(f"node {self.node_id}: quorum state restored twice")
        self._restored = True
        self._switch(state, epoch, leader_id, voted_id, force_write)

    def transition(self, state: RoleState, epoch: int, leader_id: int | None, voted_id: int | None) -> RoleState:
        """Enters `state`; returns the role object left. Refuses what Raft does not allow."""
        if epoch < self.epoch:
            raise InvariantViolation(f"node {self.node_id}: epoch would go back from {self.epoch} to {epoch}")
        to, now_in = state.role, self.role
        allowed = _SAME_EPOCH[to] if epoch == self.epoch else _NEWER_EPOCH[to]
        if now_in not in allowed or (to == Role.CANDIDATE and epoch != self.epoch + 1):
            raise InvariantViolation(f"node {self.node_id}: {now_in.value} in epoch {self.epoch} "
                                     f"cannot become {to.value} in epoch {epoch}")
        if to in (Role.CANDIDATE, Role.VOTED, Role.LEADER, Role.RESIGNED) and self.node_id not in self.voters:
            raise InvariantViolation(f"node {self.node_id}: an observer cannot become {to.value}")
        return self._switch(state, epoch, leader_id, voted_id, force_write=False)

    def _switch(self, state: RoleState, epoch: int, leader_id: int | None, voted_id: int | None,
                force_write: bool) -> RoleState:
        if force_write or (epoch, leader_id, voted_id) != (self.epoch, self.leader_id, self.voted_id):
            self.store.write(ElectionState(epoch, leader_id, voted_id, self.voters))
        if epoch != self.epoch or state.role != self.role:
            log.info(
                "node %d: %s in epoch %d%s",
                self.node_id,
                state.role.value,
                epoch,
                f" (leader {leader_id})" if leader_id is not None and state.role != Role.LEADER else "",
            )
        previous = self.state
        self.state, self.epoch, self.leader_id, self.voted_id = state, epoch, leader_id, voted_id
        return previous
