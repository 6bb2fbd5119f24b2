"""The metadata state machine on the Raft core: results at commit, failures on leader change,
refusals that write nothing, snapshots written and loaded."""

import gc
import random

import pytest

from kraft.controller import NotControllerError, QuorumController
from kraft.metadata import ControllerError, Errors, OperationTooLargeError
from kraft.metadata import operations as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.image import ConfigResource, ConfigResourceType
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import UnfenceBrokerRecord
from kraft.raft import messages as m
from kraft.raft.commits import CommitDelivery
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from tests.raft.conftest import Node, leader_node


def controller_node(voters=(1, 2, 3), policy=None, **config):
    node = Node(1, voters, **config)
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


def snapshot_now(qc, now):
    """Starts, writes and finishes a snapshot in one go, if one is due (a node's step loop
    writes it on a worker thread between steps)."""
    job = qc.start_snapshot(now)
    if job is not None:
        job.run()
        qc.finish_snapshot(job)
    return job


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
    job = snapshot_now(qc, node.now)
    assert job is not None and node.snapshots.latest().end_offset == qc.cache.image.end_offset
    assert qc.cache.changed_ratio == 0.0
    digest = qc.cache.image.digest()
    fresh = QuorumController()
    node.listener = fresh
    node.restart()
    assert fresh.cache.image.digest() == digest and fresh.cache.offset == qc.cache.offset


@pytest.mark.parametrize("freeze", [True, False])
def test_a_server_keeps_a_loaded_image_out_of_the_collectors_walks(freeze):
    node, qc = controller_node(policy=SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.0, max_interval_ms=0))
    commit_all(node)
    register(qc, node, 1)
    commit_all(node)
    assert snapshot_now(qc, node.now) is not None
    fresh = QuorumController(freeze_loaded_images=freeze)
    node.listener = fresh
    gc.unfreeze()
    try:
        node.restart()
        broker = fresh.cache.image.broker(1)
        assert broker is not None and gc.is_tracked(broker)
        frozen = gc.get_freeze_count()
        assert (frozen > 0) is freeze
        gc.collect()
        assert any(o is broker for o in gc.get_objects()) is not freeze, "the collector walks only what is not frozen"
        assert gc.isenabled()
    finally:
        gc.unfreeze()



# ---------------------------------------------------------------- answers without records


def registered(qc, node, broker=1):
    """Registers a broker and commits it; its epoch."""
    pending = register(qc, node, broker)
    commit_all(node)
    return pending.result()


def unfence(qc, node, broker, epoch):
    return qc.submit(lambda im: ctl.unfence_broker(im, broker, epoch), node.now)


def test_an_answer_without_records_waits_for_the_operation_it_read():
    """The second UnfenceBroker writes nothing because the first is in the working image;
    "unfenced" is only true once that first one commits."""
    node, qc = controller_node()
    commit_all(node)
    epoch = registered(qc, node)
    first = unfence(qc, node, 1, epoch)
    second = unfence(qc, node, 1, epoch)
    assert node.core.next_offset == first.last_offset + 1, "the second wrote nothing"
    assert not second.done, "answered before what it depends on is committed"
    commit_all(node)
    assert first.done and second.done and second.error is None
    assert qc.cache.image.broker(1).fenced is False
    again = unfence(qc, node, 1, epoch)
    assert again.done and again.result() is None, "nothing waiting: answered at once"


def test_an_answer_without_records_fails_with_the_operation_it_read():
    node, qc = controller_node()
    commit_all(node)
    epoch = registered(qc, node)
    first = unfence(qc, node, 1, epoch)
    second = unfence(qc, node, 1, epoch)
    node.advance(0)
    node.request(m.begin_quorum_request("c", 2, 5))  # node 2 leads epoch 5: the unfencing may be lost
    for pending in (first, second):
        assert pending.done and isinstance(pending.error, NotControllerError)


# ---------------------------------------------------------------- refused before anything is queued


def test_records_the_working_image_refuses_are_never_appended():
    """An operation whose records contradict the image (a controller bug) is refused; the
    log and the working image stay as they were."""
    node, qc = controller_node()
    commit_all(node)
    end = node.core.next_offset
    bogus = ControllerResult((UnfenceBrokerRecord(id=7, epoch=3),), None)  # broker 7 is not registered
    with pytest.raises(ControllerError) as err:
        qc.submit(lambda im: bogus, node.now)
    assert err.value.error == Errors.UNKNOWN_SERVER_ERROR and "broker 7 is not registered" in err.value.message
    assert node.core.next_offset == end
    register(qc, node, 1)  # the controller goes on
    assert node.core.next_offset == end + 1


@pytest.mark.parametrize(("kwargs", "field", "why"), [
    ({"rack": "r" * 32768}, "RegisterBrokerRecord.rack", "string of 32768 bytes is longer than 32767"),
    ({"broker_epoch": 2**63}, "RegisterBrokerRecord.broker_epoch", "not a valid int64"),
])
def test_a_record_that_cannot_be_encoded_is_a_clear_controller_error(kwargs, field, why):
    node, qc = controller_node()
    commit_all(node)
    end = node.core.next_offset
    args = {"incarnation_id": bytes(16), "broker_epoch": 5, **kwargs}
    with pytest.raises(ControllerError) as err:
        qc.submit(lambda im: ctl.register_broker(im, 1, **args), node.now)
    assert err.value.error == Errors.INVALID_REQUEST
    assert f"{field}: {why}" in err.value.message
    assert node.core.next_offset == end and qc.working_image.broker(1) is None


# ---------------------------------------------------------------- one operation, one batch


def recording_batches(qc):
    """(base, last) of every data batch the controller is handed, in order."""
    seen = []
    handle = qc.handle_commit

    def record(batch):
        if not batch.control:
            seen.append((batch.base_offset, batch.last_offset))
        handle(batch)

    qc.handle_commit = record
    return seen


def with_brokers(qc, node, *ids):
    for b in ids:
        unfence(qc, node, b, registered(qc, node, b))
        commit_all(node)


def test_an_operation_of_kafkas_10000_records_commits_as_one_batch():
    node, qc = controller_node()
    commit_all(node)
    with_brokers(qc, node, 1)
    batches = recording_batches(qc)
    pending = qc.submit(lambda im: ctl.create_topic(im, ctl.NewTopic("big", 9_999, 1), random.Random(1)), node.now)
    commit_all(node)
    assert pending.result().name == "big"
    assert batches == [(pending.last_offset - 9_999, pending.last_offset)]


def test_an_operation_over_the_record_cap_or_the_batch_size_is_refused_whole():
    node, qc = controller_node(max_batch_bytes=64 * 1024)
    commit_all(node)
    with_brokers(qc, node, 1)
    end = node.core.next_offset
    for topics, limit in (
        ([ctl.NewTopic("t", 10_000, 1)], "10000"),  # 10 001 records with its TopicRecord
        ([ctl.NewTopic("t", 5_000, 1)], "65536"),  # fewer records, but more bytes than a batch holds
    ):
        with pytest.raises(OperationTooLargeError) as err:
            qc.submit(lambda im, topics=topics: ctl.create_topics(im, topics, random.Random(1)), node.now)
        assert err.value.error == Errors.POLICY_VIOLATION and limit in err.value.message
        assert node.core.next_offset == end, "nothing appended"
    batches = recording_batches(qc)
    pending = qc.submit(lambda im: ctl.create_topic(im, ctl.NewTopic("t", 500, 1), random.Random(1)), node.now)
    commit_all(node)
    assert pending.result().name == "t" and batches == [(end, end + 500)]


# ---------------------------------------------------------------- snapshots while committing


def test_commits_made_while_a_snapshot_is_written_still_count_after_it():
    """The snapshot holds the image at its start; the batches committed while it is written
    are not in it, so their bytes and their age count towards the next one."""
    node, qc = controller_node(policy=SnapshotPolicy(max_bytes_between=10**9, min_changed_ratio=0.0,
                                                     max_interval_ms=1_000))
    batches = []
    handle = qc.handle_commit
    qc.handle_commit = lambda batch: (batches.append(batch), handle(batch))
    commit_all(node)
    registered(qc, node, 1)
    node.advance(1_000)
    job = qc.start_snapshot(node.now)
    assert job is not None and "ms old" in job.reason
    assert qc.start_snapshot(node.now) is None, "one at a time"
    during = len(batches)
    registered(qc, node, 2)  # committed while the job runs
    job.run()
    qc.finish_snapshot(job)
    after = batches[during:]
    assert qc.policy.bytes_since == sum(b.size_in_bytes for b in after) > 0
    assert qc.policy.oldest_unsnapshotted_ms == after[0].append_timestamp
    assert qc.policy.due(after[0].append_timestamp + 999, 0.0) is None
    assert "ms old" in qc.policy.due(after[0].append_timestamp + 1_000, 0.0), "not late by the job's run"


def test_a_failed_snapshot_is_retried_after_a_delay_not_on_every_step():
    node, qc = controller_node(policy=SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.0, max_interval_ms=0,
                                                     retry_backoff_ms=5_000))
    commit_all(node)
    registered(qc, node, 1)
    job = qc.start_snapshot(node.now)
    job.writer.abort()  # the disk went away: appending to the writer fails
    with pytest.raises(Exception) as err:
        job.run()
    qc.finish_snapshot(job, err.value)
    assert node.snapshots.latest() is None
    assert qc.start_snapshot(node.now) is None
    node.advance(4_999)
    assert qc.start_snapshot(node.now) is None, "still backing off"
    node.advance(1)
    retry = snapshot_now(qc, node.now)
    assert retry is not None and node.snapshots.latest().end_offset == qc.cache.image.end_offset


def test_the_active_controller_takes_the_images_it_built_which_a_replay_of_its_log_makes_too():
    """At commit the active controller takes the working image it built when it appended (as
    Kafka's controller does not replay its own records), several appends in one batch
    included; a replica replaying the log from the start has the same image."""
    node, qc = controller_node()
    commit_all(node)
    for broker in (1, 2, 3):
        register(qc, node, broker)
    commit_all(node)
    for broker in (1, 2, 3):  # appended before any commits: the core may put them in one batch
        epoch = qc.cache.image.brokers[broker].epoch
        qc.submit(lambda im, b=broker, e=epoch: ControllerResult((UnfenceBrokerRecord(id=b, epoch=e),), None), node.now)
    qc.submit(lambda im: ctl.create_topics(im, [ctl.NewTopic("t", 3, 3)], random.Random(1)), node.now)
    topic = ConfigResource(ConfigResourceType.TOPIC, "t")
    qc.submit(lambda im: ctl.alter_configs(im, topic, [AlterConfigOp("retention.ms", OpType.SET, "1000")]), node.now)
    built = qc.working_image
    commit_all(node)
    assert qc.cache.image is built
    assert qc.cache.image.configs_of(topic)["retention.ms"] == "1000"

    replica = QuorumController()
    CommitDelivery(node.log, replica, 1 << 20).deliver(node.core.high_watermark)
    assert replica.cache.image == qc.cache.image
