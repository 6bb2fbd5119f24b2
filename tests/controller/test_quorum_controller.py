"""The metadata state machine on the Raft core: results at commit, failures on leader change,
refusals that write nothing, snapshots written and loaded."""

import random

import pytest

from kraft.controller import NotControllerError, QuorumController
from kraft.metadata import ControllerError, Errors
from kraft.metadata import controller as ctl
from kraft.raft import messages as m
from kraft.raft.snapshot_policy import SnapshotPolicy
from tests.raft.conftest import Node, leader_node


def controller_node(voters=(1, 2, 3), policy=None):
    node = Node(1, voters)
    qc = QuorumController(policy)
    node.listener = qc
    node.restart()
    qc.core = node.core
    leader_node(voters, node=node)
    return node, qc


def commit_all(node):
    node.advance(0)
    node.flush()
    for voter in node.config.voters:
        if voter != node.core.node_id:
            node.request(m.fetch_request("c", voter, node.core.epoch, node.log.end_offset, node.core.epoch, 0, 0, 1 << 20))


def register(qc, node, broker=1):
    return qc.submit(lambda im: ctl.register_broker(im, broker, incarnation_id=bytes(16), broker_epoch=qc.next_offset()), node.now)


def test_a_result_is_returned_only_once_its_records_commit():
    node, qc = controller_node()
    commit_all(node)  # the LeaderChange: now active
    pending = register(qc, node)
    node.advance(0)
    node.flush()
    assert not pending.done, "appended and flushed on the leader, not committed yet"
    commit_all(node)
    assert pending.done and pending.result() is not None
    assert 1 in qc.cache.image.brokers


def test_the_controller_is_not_active_until_it_applied_the_previous_epochs():
    node, qc = controller_node()
    with pytest.raises(NotControllerError, match="catching up"):
        register(qc, node)
    commit_all(node)
    register(qc, node)


def test_a_leader_change_fails_waiting_operations_with_a_retriable_error():
    node, qc = controller_node()
    commit_all(node)
    pending = register(qc, node)
    node.advance(0)
    node.request(m.begin_quorum_request("c", 2, 5))  # node 2 leads epoch 5 now
    assert pending.done and isinstance(pending.error, NotControllerError)
    with pytest.raises(NotControllerError):
        register(qc, node)


def test_a_refused_operation_writes_nothing():
    node, qc = controller_node()
    commit_all(node)
    end = node.core.next_offset
    with pytest.raises(ControllerError) as err:
        qc.submit(lambda im: ctl.create_topic(im, ctl.NewTopic("t", 3, 3), random.Random(1)), node.now)
    assert err.value.error == Errors.INVALID_REPLICATION_FACTOR
    assert node.core.next_offset == end and node.log.end_offset == end


def test_operations_queued_before_a_commit_see_each_other():
    node, qc = controller_node()
    commit_all(node)
    register(qc, node, 1)
    with pytest.raises(ControllerError) as err:
        qc.submit(lambda im: ctl.register_broker(im, 1, incarnation_id=bytes([9]) * 16, broker_epoch=1), node.now)
    assert "Broker 1 is registered" in str(err.value), "the uncommitted registration is seen"
    assert 1 not in qc.cache.image.brokers, "it is not committed yet"


def test_snapshots_are_written_by_policy_and_loaded_at_boot():
    node, qc = controller_node(policy=SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.0, max_interval_ms=0))
    commit_all(node)
    for b in (1, 2, 3):
        register(qc, node, b)
        commit_all(node)
    job = qc.snapshot_now(node.now)
    assert job is not None and node.snapshots.latest().end_offset == qc.cache.image.end_offset
    assert qc.cache.changed_ratio == 0.0
    digest = qc.cache.image.digest()
    fresh = QuorumController()
    node.listener = fresh
    node.restart()
    assert fresh.cache.image.digest() == digest and fresh.cache.offset == qc.cache.offset
