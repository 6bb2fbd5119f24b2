"""QuorumState: every transition is durable before it is made, and Raft's forbidden ones
are refused before anything is written."""

from random import Random

import pytest

from kraft.raft import RaftConfig, Role
from kraft.raft.gate import Gate
from kraft.raft.quorum_state import QuorumState
from kraft.raft.raft_errors import InvariantViolation
from kraft.raft.voters import Voters, VoterSet
from kraft.storage import ElectionState, MemoryQuorumStateStore


class Recording(MemoryQuorumStateStore):
    """Remembers every state written, and what the replica's role was at that moment."""

    def __init__(self) -> None:
        super().__init__()
        self.quorum = None
        self.seen = []

    def write(self, state: ElectionState) -> None:
        self.seen.append((state, self.quorum.role if self.quorum else None))
        super().write(state)


def quorum(node_id=1, voters=(1, 2, 3), saved=None, log_epoch=0):
    store = Recording()
    if saved is not None:
        MemoryQuorumStateStore.write(store, saved)
    config = RaftConfig(node_id=node_id, voters=voters, cluster_id="c")
    switches = []
    voters = Voters(VoterSet.static(config.voters))
    q = QuorumState(config, voters, store, Random(1), Gate(config, voters),
                    lambda old, epoch: switches.append((old.role, epoch)))
    store.quorum = q
    q.restore(store.read(), log_epoch, now=0)
    return q, store, switches


def test_the_file_is_written_before_the_role_changes():
    q, store, switches = quorum()
    q.become_candidate(now=1)
    state, role_while_writing = store.seen[-1]
    assert (state.epoch, state.voted_id) == (1, 1)
    assert role_while_writing == Role.UNATTACHED, "durable first, then switched"
    assert q.role == Role.CANDIDATE and switches[-1] == (Role.UNATTACHED, 0)


@pytest.mark.parametrize("move", [
    lambda q: q.become_voted(2, now=0),                    # candidate -> voted: no
    lambda q: q.become_unattached(q.epoch, now=0),          # candidate -> unattached in its own epoch: no
    lambda q: q.become_resigned((2, 3), now=0),             # only a leader resigns
    lambda q: q.become_unattached(q.epoch - 1, now=0),      # the epoch never goes back
])
def test_transitions_raft_forbids_are_refused_before_anything_is_written(move):
    q, store, _ = quorum()
    q.become_candidate(now=0)
    written = len(store.seen)
    with pytest.raises(InvariantViolation):
        move(q)
    assert len(store.seen) == written and q.role == Role.CANDIDATE


def test_an_observer_cannot_campaign_but_may_vote():
    """As Kafka 3.9+ (KIP-853): a replica outside its voter set may grant a vote (its set may be
    stale; the candidate counts only its own set's votes). A static quorum's gate refuses such a
    Vote before it gets here."""
    q, store, _ = quorum(node_id=9)
    with pytest.raises(InvariantViolation, match="observer"):
        q.become_candidate(now=0)
    with pytest.raises(InvariantViolation, match="observer"):
        q.become_prospective(now=0)
    assert q.state.election_deadline is None, "an observer looks for a leader instead of campaigning"
    q.become_voted(2, now=0)
    assert q.role == Role.VOTED and store.read().voted_id == 2


def test_a_replica_never_follows_itself_nor_a_second_leader_of_the_epoch_it_leads():
    q, _, _ = quorum()
    with pytest.raises(InvariantViolation, match="follow itself"):
        q.become_follower(1, 1, now=0)


@pytest.mark.parametrize("saved, log_epoch, role, epoch", [
    (None, 0, Role.UNATTACHED, 0),
    (ElectionState(3, None, None, (1, 2, 3)), 5, Role.UNATTACHED, 5),   # the log saw a newer epoch
    (ElectionState(3, 1, 1, (1, 2, 3)), 3, Role.RESIGNED, 3),           # led before the restart: never again in it
    (ElectionState(3, 2, None, (1, 2, 3)), 3, Role.FOLLOWER, 3),
    (ElectionState(3, None, 1, (1, 2, 3)), 3, Role.CANDIDATE, 3),
    (ElectionState(3, None, 2, (1, 2, 3)), 3, Role.VOTED, 3),
])
def test_the_role_at_start_comes_from_the_file(saved, log_epoch, role, epoch):
    q, _, _ = quorum(saved=saved, log_epoch=log_epoch)
    assert (q.role, q.epoch) == (role, epoch)
    with pytest.raises(InvariantViolation, match="restored twice"):
        q.restore(saved, log_epoch, now=0)


def test_a_message_naming_a_newer_epoch_moves_the_replica_there():
    q, _, _ = quorum()
    assert q.learn_leader(2, 4, now=0) and (q.role, q.epoch, q.leader_id) == (Role.FOLLOWER, 4, 2)
    assert not q.learn_leader(3, 3, now=0), "an older epoch teaches nothing"
    assert q.learn_leader(-1, 6, now=0) and (q.role, q.leader_field) == (Role.UNATTACHED, -1)
    assert not q.learn_leader(2, 2**31 - 1, now=0), "an epoch in the reserve is refused"
