"""The controller: what it accepts, the records it makes, and its refusals in Kafka's codes."""

import random

import pytest

from kraft.metadata import ConfigResource, ConfigResourceType, ControllerError, Errors, apply_records, uuid_str
from kraft.metadata import operations as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.placement import RESERVED_TOPIC_IDS, assign_replicas
from kraft.metadata.records import PartitionRecord, TopicRecord
from kraft.protocol import ErrorCode
from tests.metadata.cluster import Cluster

TOPIC = ConfigResourceType.TOPIC


def topic_resource(name):
    return ConfigResource(TOPIC, name)


@pytest.fixture
def cluster():
    c = Cluster(seed=7)
    c.add_brokers(1, 2, 3, 4)
    return c


def test_error_codes_are_kafkas():
    for error in Errors:
        assert ErrorCode[error.name.lower()].value == error.value, error


def test_create_topic_spreads_replicas_over_unfenced_brokers_and_leads_with_the_first(cluster):
    cluster.commit(ctl.fence_broker(cluster.image, 4))
    result = ctl.create_topic(cluster.image, ctl.NewTopic("orders", 6, 2, {"cleanup.policy": "compact"}), cluster.rng)
    records = result.records
    assert records[0] == TopicRecord(name="orders", topic_id=result.response.topic_id)
    assert records[1].name == "cleanup.policy" and records[1].value == "compact"
    partitions = [r for r in records if isinstance(r, PartitionRecord)]
    assert [p.partition_id for p in partitions] == list(range(6))
    for p in partitions:
        assert len(set(p.replicas)) == 2 and set(p.replicas) <= {1, 2, 3}
        assert p.isr == p.replicas and p.leader == p.replicas[0] and (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert sorted(p.leader for p in partitions) == [1, 1, 2, 2, 3, 3]  # leaders round-robin
    assert result.response.topic_id not in RESERVED_TOPIC_IDS and not uuid_str(result.response.topic_id).startswith("-")


def test_assignment_is_deterministic_in_the_random_source():
    a = assign_replicas([1, 2, 3, 4, 5], 20, 3, random.Random(3))
    assert a == assign_replicas([1, 2, 3, 4, 5], 20, 3, random.Random(3))
    assert all(len(set(r)) == 3 for r in a)
    assert {b for r in a for b in r} == {1, 2, 3, 4, 5}


@pytest.mark.parametrize(
    "topic, error, message",
    [
        (ctl.NewTopic("t", 1, 1), Errors.TOPIC_ALREADY_EXISTS, "Topic 't' already exists"),
        (ctl.NewTopic("", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "can't be empty"),
        (ctl.NewTopic("..", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, 'cannot be "." or ".."'),
        (ctl.NewTopic("x" * 250, 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "longer than 249"),
        (ctl.NewTopic("a/b", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "character other than ASCII alphanumerics"),
        (ctl.NewTopic("__cluster_metadata", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "reserved"),
        (ctl.NewTopic("u", 0, 1), Errors.INVALID_PARTITIONS, "invalid value: 0"),
        (ctl.NewTopic("u", 1, 0), Errors.INVALID_REPLICATION_FACTOR, "larger than 0"),
        (ctl.NewTopic("u", 1, 5), Errors.INVALID_REPLICATION_FACTOR, "only 4 broker"),
        (ctl.NewTopic("u", 1, 1, {"retention.msx": "1"}), Errors.INVALID_CONFIG, "Unknown topic config name: retention.msx"),
        (ctl.NewTopic("u", 1, 1, {"retention.ms": "soon"}), Errors.INVALID_CONFIG, "expected a long"),
        (ctl.NewTopic("u", 1, 1, {"min.insync.replicas": "0"}), Errors.INVALID_CONFIG, "must be at least 1"),
        (ctl.NewTopic("u", 1, 1, {"cleanup.policy": "snapshot"}), Errors.INVALID_CONFIG, "not one of"),
    ],
)
def test_a_bad_create_is_refused_with_kafkas_code_and_writes_nothing(cluster, topic, error, message):
    cluster.create("t")
    offset, digest = cluster.image.offset, cluster.image.digest()
    with pytest.raises(ControllerError, match=message) as refused:
        cluster.commit(ctl.create_topic(cluster.image, topic, cluster.rng))
    assert refused.value.error == error
    batch = ctl.create_topics(cluster.image, [topic, ctl.NewTopic("fine", 1, 1)], cluster.rng)
    assert isinstance(batch.response[0], ControllerError) and batch.response[0].error == error
    assert {r.name for r in batch.records if isinstance(r, TopicRecord)} == {"fine"}
    assert (cluster.image.offset, cluster.image.digest()) == (offset, digest)


def test_a_manual_assignment_is_kept_and_its_isr_is_the_unfenced_replicas(cluster):
    cluster.commit(ctl.fence_broker(cluster.image, 4))
    assignments = ((0, (4, 1)), (1, (2, 3)))
    created = cluster.commit(ctl.create_topic(cluster.image, ctl.NewTopic("m", -1, -1, {}, assignments), cluster.rng))
    assert created.assignment == ((4, 1), (2, 3))
    topic = cluster.image.topic("m")
    assert [(p.replicas, p.isr, p.leader) for p in topic.partitions] == [((4, 1), (1,), 1), ((2, 3), (2, 3), 2)]


@pytest.mark.parametrize(
    "counts, assignments, error, message",
    [
        ((3, -1), ((0, (1,)),), Errors.INVALID_REQUEST, "numPartitions was not set to -1"),
        ((-1, 1), ((0, (1,)),), Errors.INVALID_REQUEST, "replication factor was not set to -1"),
        ((-1, -1), ((0, (1,)), (0, (2,))), Errors.INVALID_REPLICA_ASSIGNMENT, "multiple manual partition assignments"),
        ((-1, -1), ((0, (1, 2)), (1, (3,))), Errors.INVALID_REPLICA_ASSIGNMENT, "which have 2 replica"),
        ((-1, -1), ((0, (1, 9)),), Errors.INVALID_REPLICA_ASSIGNMENT, "broker 9, but no such broker"),
        ((-1, -1), ((0, (1, 1)),), Errors.INVALID_REPLICA_ASSIGNMENT, "broker 1 more than once"),
        ((-1, -1), ((0, (1,)), (2, (2,))), Errors.INVALID_REPLICA_ASSIGNMENT, "consecutive 0-based"),
    ],
)
def test_a_bad_manual_assignment_is_refused_with_kafkas_message(cluster, counts, assignments, error, message):
    with pytest.raises(ControllerError, match=message) as refused:
        ctl.create_topic(cluster.image, ctl.NewTopic("m", *counts, {}, assignments), cluster.rng)
    assert refused.value.error == error


def test_too_few_unfenced_brokers_counts_only_unfenced_ones(cluster):
    cluster.commit(ctl.fence_broker(cluster.image, 1))
    cluster.commit(ctl.fence_broker(cluster.image, 2))
    with pytest.raises(ControllerError) as refused:
        ctl.create_topic(cluster.image, ctl.NewTopic("u", 1, 3), cluster.rng)
    assert refused.value.error == Errors.INVALID_REPLICATION_FACTOR


def test_a_name_repeated_in_one_create_topics_is_refused_every_time_as_kafka_does(cluster):
    wanted = [ctl.NewTopic("a", 1, 1), ctl.NewTopic("b", 1, 1), ctl.NewTopic("a", 2, 1), ctl.NewTopic("a", 1, 1)]
    result = ctl.create_topics(cluster.image, wanted, cluster.rng)
    a1, b, a2, a3 = result.response
    assert isinstance(b, ctl.CreatedTopic)
    for refused in (a1, a2, a3):
        assert (refused.error, refused.message) == (Errors.INVALID_REQUEST, "Duplicate topic name.")
    assert [r.name for r in result.records if isinstance(r, TopicRecord)] == ["b"]


def test_the_records_of_a_request_of_many_items_are_replayed_once(cluster):
    """The result carries the one delta its items' records were replayed into, and the working
    image made of it (ControllerResult.applied_to) is the one replaying its records makes."""
    cluster.create("existing")
    resources = [(topic_resource("existing"), [AlterConfigOp("retention.ms", OpType.SET, "1000")]),
                 (topic_resource("missing"), [AlterConfigOp("retention.ms", OpType.SET, "1000")]),
                 (topic_resource("existing"), [AlterConfigOp("cleanup.policy", OpType.SET, "compact")])]
    image = cluster.image
    result = ctl.alter_configs_each(image, resources)
    assert result.prepared is not None and result.prepared.image is image
    applied, _ = result.applied_to(image, offset=image.offset + len(result.records), epoch=image.epoch)
    assert applied == apply_records(image, result.records, offset=image.offset + len(result.records), epoch=image.epoch)
    created = ctl.create_topics(image, [ctl.NewTopic("x", 1, 1), ctl.NewTopic("y", 1, 1)], cluster.rng)
    x, y = created.response
    assert isinstance(x, ctl.CreatedTopic) and isinstance(y, ctl.CreatedTopic) and x.topic_id != y.topic_id


def test_delete_topics(cluster):
    topic_id = cluster.create("a").topic_id
    cluster.create("b")
    result = cluster.commit(ctl.delete_topics(cluster.image, ["a", "nope", "b", "b"]))
    assert result[0] == topic_id
    assert [(e.error, e.message) for e in result[1:]] == [
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic: nope"),
        (Errors.INVALID_REQUEST, "Duplicate topic name."),
        (Errors.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert cluster.image.topic("a") is None and cluster.image.topic("b") is not None


def test_a_null_config_value_is_a_clear_invalid_config(cluster):
    with pytest.raises(ControllerError) as err:
        ctl.create_topic(cluster.image, ctl.NewTopic("t", 1, 1, {"segment.ms": None, "retention.ms": "5",
                                                                  "cleanup.policy": None}), cluster.rng)
    assert err.value.error == Errors.INVALID_CONFIG
    assert err.value.message == "Null value not supported for topic configs: cleanup.policy,segment.ms"


def test_one_operation_writes_at_most_kafkas_10000_records(cluster):
    """Kafka's QuorumController caps a user operation at 10 000 records and refuses the
    whole request with POLICY_VIOLATION, before building any record."""
    assert ctl.MAX_RECORDS_PER_USER_OP == 10_000
    fits = ctl.create_topic(cluster.image, ctl.NewTopic("t", 9_998, 1, {"retention.ms": "5"}), cluster.rng)
    assert len(fits.records) == 10_000
    for topics in (
        [ctl.NewTopic("t", 9_999, 1, {"retention.ms": "5"})],
        [ctl.NewTopic("huge", 2**31 - 1, 3)],  # refused at once: no two billion records built first
        [ctl.NewTopic("ok", 3, 1), ctl.NewTopic("t", 9_999, 1)],
        [ctl.NewTopic(f"t{i}", 2_000, 1) for i in range(5)],  # each fits, together they do not
    ):
        with pytest.raises(ctl.OperationTooLargeError) as err:
            ctl.create_topics(cluster.image, topics, cluster.rng)
        assert err.value.error == Errors.POLICY_VIOLATION
        assert "excessively large batch operation" in err.value.message and "10000" in err.value.message


def alter(cluster, name, *ops):
    return cluster.commit(ctl.alter_configs(cluster.image, topic_resource(name), [AlterConfigOp(*op) for op in ops]))


def test_incremental_alter_configs_set_delete_append_subtract(cluster):
    cluster.create("t")
    alter(cluster, "t", ("retention.ms", OpType.SET, "1000"), ("cleanup.policy", OpType.APPEND, "compact"))
    assert dict(cluster.image.configs_of(topic_resource("t"))) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    alter(cluster, "t", ("cleanup.policy", OpType.APPEND, "delete,compact"), ("retention.ms", OpType.DELETE))
    assert dict(cluster.image.configs_of(topic_resource("t"))) == {"cleanup.policy": "compact,delete"}
    alter(cluster, "t", ("cleanup.policy", OpType.SUBTRACT, "compact"))
    assert dict(cluster.image.configs_of(topic_resource("t"))) == {"cleanup.policy": "delete"}
    same = ctl.alter_configs(cluster.image, topic_resource("t"), [AlterConfigOp("cleanup.policy", OpType.SET, "delete")])
    assert same.records == ()  # nothing changes, nothing is written


@pytest.mark.parametrize(
    "resource, ops, error, message",
    [
        (topic_resource("nope"), [("retention.ms", OpType.SET, "1")], Errors.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
        (topic_resource("t"), [("retention.ms", OpType.SET, "1"), ("bogus", OpType.SET, "1")], Errors.INVALID_CONFIG,
         "Unknown topic config name: bogus"),
        (topic_resource("t"), [("segment.bytes", OpType.SET, "3")], Errors.INVALID_CONFIG, "must be at least 14"),
        (topic_resource("t"), [("segment.bytes", OpType.SET, "4294967296")], Errors.INVALID_CONFIG, "out of range for an int"),
        (topic_resource("t"), [("min.cleanable.dirty.ratio", OpType.SET, "nan")], Errors.INVALID_CONFIG, "must be"),
        (topic_resource("t"), [("preallocate", OpType.SET, "yes")], Errors.INVALID_CONFIG, "expected true or false"),
        (topic_resource("t"), [("retention.ms", OpType.APPEND, "1")], Errors.INVALID_CONFIG, "append is not allowed"),
        (topic_resource("t"), [("retention.ms", OpType.SET, None)], Errors.INVALID_REQUEST, "Null value"),
        (topic_resource("t"), [("retention.ms", OpType.SET, "1"), ("retention.ms", OpType.DELETE)],
         Errors.INVALID_REQUEST, "duplicate config keys: retention.ms"),
        (topic_resource("__cluster_metadata"), [("cleanup.policy", OpType.SET, "delete")], Errors.POLICY_VIOLATION,
         "cleanup.policy is snapshot"),
        (ConfigResource(ConfigResourceType.BROKER, "x"), [("num.io.threads", OpType.SET, "4")], Errors.INVALID_REQUEST,
         "Invalid broker name"),
        (ConfigResource(ConfigResourceType.GROUP, "g"), [], Errors.INVALID_REQUEST, "Unsupported resource type"),
    ],
)
def test_a_bad_alter_is_refused_whole(cluster, resource, ops, error, message):
    cluster.create("t")
    with pytest.raises(ControllerError, match=message) as refused:
        ctl.alter_configs(cluster.image, resource, [AlterConfigOp(*op) for op in ops])
    assert refused.value.error == error


def test_the_metadata_log_reads_as_snapshot_compacted(cluster):
    assert ctl.describe_configs(cluster.image, topic_resource("__cluster_metadata")) == {"cleanup.policy": "snapshot"}


def test_broker_configs_apply_per_broker_and_cluster_wide(cluster):
    for name in ("1", ""):
        resource = ConfigResource(ConfigResourceType.BROKER, name)
        cluster.commit(ctl.alter_configs(cluster.image, resource, [AlterConfigOp("num.io.threads", OpType.SET, "16")]))
        assert cluster.image.configs_of(resource)["num.io.threads"] == "16"


def test_broker_lifecycle_and_its_refusals(cluster):
    with pytest.raises(ControllerError) as refused:
        ctl.register_broker(cluster.image, 1, incarnation_id=bytes([9]) * 16, broker_epoch=100)
    assert refused.value.error == Errors.DUPLICATE_BROKER_REGISTRATION
    epoch = cluster.commit(ctl.register_broker(cluster.image, 9, incarnation_id=bytes([9]) * 16, broker_epoch=100))
    assert cluster.image.broker(9).fenced and 9 not in cluster.image.unfenced_brokers()
    with pytest.raises(ControllerError) as refused:
        ctl.unfence_broker(cluster.image, 9, epoch - 1)
    assert refused.value.error == Errors.STALE_BROKER_EPOCH
    cluster.commit(ctl.unfence_broker(cluster.image, 9, epoch))
    assert 9 in cluster.image.unfenced_brokers()
    assert ctl.unfence_broker(cluster.image, 9, epoch).records == ()
    cluster.commit(ctl.fence_broker(cluster.image, 9))
    assert ctl.fence_broker(cluster.image, 9).records == ()
    cluster.commit(ctl.unregister_broker(cluster.image, 9))
    for op in (lambda: ctl.fence_broker(cluster.image, 9), lambda: ctl.unregister_broker(cluster.image, 9)):
        with pytest.raises(ControllerError) as refused:
            op()
        assert refused.value.error == Errors.BROKER_ID_NOT_REGISTERED


def test_producer_id_blocks_follow_each_other(cluster):
    epoch = cluster.image.broker(2).epoch
    first = cluster.commit(ctl.allocate_producer_ids(cluster.image, 2, epoch))
    second = cluster.commit(ctl.allocate_producer_ids(cluster.image, 2, epoch))
    assert (first.first, second.first, second.size) == (0, 1000, 1000)
    assert cluster.image.next_producer_id == 2000
    with pytest.raises(ControllerError) as refused:
        ctl.allocate_producer_ids(cluster.image, 2, epoch + 1)
    assert refused.value.error == Errors.STALE_BROKER_EPOCH
