"""A coordinator on the real Raft core (hand-driven, as tests/raft drives it): the core takes
it as its listener, its records go through the core's append and commit when followers
fetch them, its snapshot is the core's, and after a restart a coordinator rebuilt from that
snapshot and the log takes the groups over. This is the plug the node will wire."""

import random

import pytest

from kraft.groups import CoordinatorError, GroupCoordinator
from kraft.protocol import ErrorCode
from kraft.raft import messages as m
from kraft.raft.commits import CommitDelivery
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from tests.groups.harness import CONFIG, Client, done, stable_group
from tests.raft.conftest import Node, elect


def commit_all(node) -> None:
    """Flushes the leader's log and has both followers fetch to its end: all is committed."""
    node.advance(0)
    node.flush()
    for voter in (2, 3):
        node.request(m.fetch_request("c", voter, node.core.epoch, node.log.end_offset, node.core.epoch, 0, 0, 1 << 20))


class OnCore:
    """Runs coordinator operations as steps of a real core, committing after each."""

    def __init__(self, node, coordinator) -> None:
        self.node = node
        self.coordinator = coordinator
        self.auto_commit = True

    def step(self, action, now):
        self.node.now = max(self.node.now, now)
        result = action(self.coordinator, self.node.now)
        self.coordinator.poll(self.node.now)
        if self.auto_commit:
            commit_all(self.node)
        return result


def coordinator_on_core(node=None):
    node = node or Node(1, (1, 2, 3))
    coordinator = GroupCoordinator(0, CONFIG, SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.0),
                                   rng=random.Random(1))
    node.listener = coordinator
    node.restart()
    coordinator.core = node.core
    return node, coordinator


def test_a_group_and_its_offsets_through_the_raft_core_and_over_a_restart():
    node, coordinator = coordinator_on_core()
    elect(node)
    on_core = OnCore(node, coordinator)
    with pytest.raises(CoordinatorError) as loading:
        Client(on_core).join(node.now)
    assert loading.value.error == ErrorCode.coordinator_load_in_progress  # its LeaderChange is not committed
    commit_all(node)
    assert coordinator.active
    (c0, c1), now = stable_group(on_core, 2, now=node.now)
    done(c0.commit(now, {("t", 0): (100, 1), ("t", 1): (200, 1)}))
    assert coordinator.image.offset == node.core.high_watermark - 1
    assert [m.assignment for m in coordinator.image.metadata("g").members] == [b"A0", b"A1"]

    job = coordinator.start_snapshot(node.now)
    job.run()
    coordinator.finish_snapshot(job)
    sid = job.writer.snapshot_id
    assert node.snapshots.list() == [sid] and sid.end_offset == node.core.high_watermark
    done(c1.commit(now, {("t", 1): (250, 2)}))  # after the snapshot: only in the log
    before = coordinator.image

    # The node restarts: the core loads its snapshot into a new coordinator, is elected again,
    # and hands over the batches after the snapshot as they commit.
    node, successor = coordinator_on_core(node)
    assert successor.image.end_offset == sid.end_offset
    elect(node)
    commit_all(node)
    assert successor.image.groups == before.groups and successor.image.offsets == before.offsets
    assert successor.image.offsets_of("g")[("t", 1)].leader_epoch == 2
    on_core = OnCore(node, successor)
    for client in (c0, c1):
        client.log = on_core
        assert client.heartbeat(node.now) == ErrorCode.none  # the group was taken over, Stable


def test_the_leader_adopts_the_images_it_built_which_a_replay_of_its_log_makes_too():
    """At commit the leader takes the image it built when it appended (as Kafka's coordinators
    do not replay their own records), several appends to one batch included; a replica that
    replays the log from the start has the same groups and offsets."""
    node, coordinator = coordinator_on_core()
    elect(node)
    commit_all(node)
    on_core = OnCore(node, coordinator)
    (c0, c1), now = stable_group(on_core, 2, now=node.now)
    on_core.auto_commit = False
    for i in range(3):  # appended before any commits: the core may put them in one batch
        c0.commit(now, {("t", 0): (100 + i, 1), ("t", 1): (200 + i, 1)})
    c1.commit(now, {("u", 0): (7, 2)})
    built = coordinator.working
    assert built.offset == node.core.next_offset - 1
    commit_all(node)
    assert coordinator.image is built

    replica = GroupCoordinator(0, CONFIG)
    CommitDelivery(node.log, replica, 1 << 20).deliver(node.core.high_watermark)
    assert replica.image == coordinator.image
    assert coordinator.image.offsets_of("g")[("t", 1)].offset == 202
