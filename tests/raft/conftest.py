"""A hand-driven core: requests and responses are built and delivered by the test itself."""

from random import Random

import pytest

from kraft.raft import RaftConfig, RaftCore, Reply, Role, Send
from kraft.raft import messages as m
from kraft.records import SimpleRecord, build_batch
from kraft.storage import ElectionState, MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore


class Recorder:
    def __init__(self) -> None:
        self.batches = []
        self.leaders = []
        self.loaded = []

    def handle_commit(self, batch) -> None:
        self.batches.append(batch)

    def handle_leader_change(self, leader) -> None:
        self.leaders.append(leader)

    def handle_load_snapshot(self, reader) -> None:
        self.loaded.append((reader.snapshot_id, [r.value for r in reader.records()]))


class Node:
    """One core plus its storage; `now` is advanced by the test."""

    def __init__(
        self, node_id=1, voters=(1, 2, 3), state=None, log=None, cluster_id="c", snapshots=None, metrics=None, **config
    ) -> None:
        self.config = RaftConfig(node_id=node_id, voters=voters, cluster_id=cluster_id, **config)
        self.log = log or MemoryLog()
        self.store = MemoryQuorumStateStore()
        self.snapshots = snapshots if snapshots is not None else MemorySnapshotStore()
        if state is not None:
            self.store.write(state)
        self.listener = Recorder()
        self.now = 0
        self.metrics = metrics
        self.restart()

    def restart(self):
        self.core = RaftCore(
            self.config, self.log, self.store, Random(1), self.now, self.listener, self.snapshots, self.metrics
        )

    def request(self, request, handle="h"):
        """Delivers a request; returns the reply, if the core answered at once."""
        self.core.handle_request(handle, request, self.now)
        out = self.outbox()
        replies = [o for o in out if isinstance(o, Reply) and o.handle == handle]
        self._out = [o for o in out if o not in replies]  # the rest stays for sends()
        return replies[-1].response if replies else None

    def outbox(self):
        self._out = getattr(self, "_out", []) + self.core.poll_outbox()
        out, self._out = self._out, []
        return out

    def sends(self, kind=None):
        return [o for o in self.outbox() if isinstance(o, Send) and (kind is None or isinstance(o.request, kind))]

    def advance(self, ms):
        self.now += ms
        self.core.tick(self.now)

    def flush(self):
        self.log.flush()
        self.core.handle_flush(self.now)


def partition(message):
    return m.partition_of(message)


def grant_votes(node, voters=(2,)):
    """Answers the node's Vote requests to `voters` with a grant; returns those answered."""
    votes = [v for v in node.sends(m.VoteRequest) if v.destination in voters]
    for vote in votes:
        granted = m.vote_response(m.ErrorCode.none, -1, node.core.epoch, True)
        node.core.handle_response(vote.request_id, granted, node.now)
    return votes


def elect(node):
    """Lets `node` time out, pre-vote and campaign in the next epoch, and win with voter 2's
    pre-vote and vote; its LeaderChange flushed."""
    node.advance(3000)  # election timeout: a prospective, asking whether it could win
    (pre_vote,) = grant_votes(node)
    assert partition(pre_vote.request).pre_vote and node.core.role == Role.CANDIDATE
    (vote,) = grant_votes(node)
    assert not partition(vote.request).pre_vote
    assert node.core.role == Role.LEADER
    node.flush()
    node.announced = [o for o in node.outbox() if isinstance(o, Send)]  # BeginQuorumEpoch
    return node


def leader_node(voters=(1, 2, 3), node=None, **config):
    """Node 1 as the leader of epoch 1 (voted for by 2), its LeaderChange flushed."""
    node = elect(node or Node(1, voters, **config))
    assert node.core.epoch == 1
    return node


def leader_of_epoch_2(**config):
    """Node 1, leader of epoch 2 over a log whose offsets 0..8 are of epoch 1 (batches
    0-2, 3-4, 5-8, none committed yet) and whose LeaderChange is at offset 9."""
    node = Node(1, state=ElectionState(1, None, None, (1, 2, 3)), **config)
    for count, base in ((3, 0), (2, 3), (4, 5)):
        node.log.append_as_follower(follower_batch(count, 1, base))
    node.log.flush()
    node.restart()
    node = elect(node)
    assert node.core.epoch == 2 and node.core.leader_state.epoch_start_offset == 9
    return node


def records(n, value=b"v"):
    return [SimpleRecord(None, value + b"%d" % i) for i in range(n)]


def follower_batch(n, epoch, base_offset):
    return build_batch(records(n), base_offset=base_offset, partition_leader_epoch=epoch)


@pytest.fixture
def node():
    return Node()


__all__ = [
    "ElectionState", "Node", "elect", "leader_node", "leader_of_epoch_2", "partition", "records", "follower_batch",
]
