"""Replaying records on an image: sharing, fencing derived by every replica (in a log with
the kraft.derived.fencing feature), bad records. Kafka's own rules: test_kafka_replay.py."""

import pytest

from kraft.metadata import ConfigResource, ConfigResourceType, InvalidRecordError, MetadataDelta, apply_records
from kraft.metadata import operations as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.image import DERIVED_FENCING
from kraft.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from tests.metadata.cluster import Cluster, index_of, recomputed_index

T1 = bytes([1]) * 16
T2 = bytes([2]) * 16


def brokers(*ids, fenced=False):
    return [RegisterBrokerRecord(broker_id=b, incarnation_id=bytes(16), broker_epoch=10 + b, fenced=fenced) for b in ids]


def partition(pid, replicas, isr=None, leader=None, topic_id=T1):
    isr = replicas if isr is None else isr
    return PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=replicas, isr=isr,
                           leader=isr[0] if leader is None else leader, leader_epoch=0, partition_epoch=0)


def image_with(*records):
    """An image of a log that asked for derived fencing, then `records`."""
    records = (FeatureLevelRecord(name=DERIVED_FENCING, feature_level=1), *records)
    return apply_records(Cluster().image, records, offset=len(records) - 1, epoch=1)


def test_applying_shares_what_the_batch_did_not_touch_and_leaves_the_old_image_alone():
    c = Cluster()
    c.add_brokers(1, 2, 3)
    c.create("a")
    c.create("b")
    before = c.image
    c.commit(ctl.alter_configs(c.image, ConfigResource(ConfigResourceType.TOPIC, "a"),
                               [AlterConfigOp("retention.ms", OpType.SET, "5")]))
    c.create("c")
    assert c.image.topic("a") is before.topic("a") and c.image.topic("b") is before.topic("b")
    assert before.topic("c") is None and dict(before.configs_of(ConfigResource(ConfigResourceType.TOPIC, "a"))) == {}
    assert c.image.offset == before.offset + 1 + 1 + 3
    # a million partitions share a handful of replica lists
    assert c.image.topic("c").partitions[0].isr is c.image.topic("c").partitions[0].replicas


def test_fencing_moves_leaders_shrinks_isrs_and_bumps_epochs_and_touches_nothing_else():
    image = image_with(
        *brokers(1, 2, 3, 4),
        TopicRecord(name="t", topic_id=T1),
        partition(0, (1, 2, 3)),  # led by 1: leadership goes to 2
        partition(1, (2, 1, 3)),  # 1 only leaves the ISR
        partition(2, (3, 4, 2)),  # does not host 1: untouched
        partition(3, (4, 3, 1), isr=(3, 1), leader=3),  # 4 out of the ISR; 1 leaves
    )
    fenced = apply_records(image, [FenceBrokerRecord(id=1, epoch=11)], offset=image.offset + 1, epoch=1)
    p = fenced.topic("t").partitions
    assert (p[0].leader, p[0].isr, p[0].leader_epoch, p[0].partition_epoch) == (2, (2, 3), 1, 1)
    assert (p[1].leader, p[1].isr, p[1].leader_epoch, p[1].partition_epoch) == (2, (2, 3), 1, 1)
    assert p[2] is image.topic("t").partitions[2]
    assert (p[3].leader, p[3].isr) == (3, (3,))
    assert fenced.broker(1).fenced and 1 not in fenced.brokers_to_isrs
    assert index_of(fenced) == recomputed_index(fenced)


def test_the_next_leader_is_the_first_unfenced_isr_replica_in_replica_order():
    image = image_with(*brokers(1, 2, 3, 4), *brokers(5, fenced=True), TopicRecord(name="t", topic_id=T1),
                       partition(0, (1, 5, 4, 3), isr=(1, 3, 4, 5)))
    fenced = apply_records(image, [FenceBrokerRecord(id=1, epoch=11)], offset=99, epoch=1)
    assert fenced.topic("t").partitions[0].leader == 4  # 5 is fenced; 4 comes before 3 in replica order


def test_the_last_isr_member_stays_and_the_partition_waits_for_it():
    image = image_with(*brokers(1, 2), TopicRecord(name="t", topic_id=T1), partition(0, (1, 2), isr=(1,)))
    fenced = apply_records(image, [FenceBrokerRecord(id=1, epoch=11)], offset=99, epoch=1)
    p = fenced.topic("t").partitions[0]
    assert (p.leader, p.isr, p.leader_epoch) == (-1, (1,), 1)  # 2 is not in the ISR: no unclean election
    assert index_of(fenced) == recomputed_index(fenced) == {1: {T1: (0,)}}
    back = apply_records(fenced, [UnfenceBrokerRecord(id=1, epoch=11)], offset=100, epoch=1)
    p = back.topic("t").partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1,), 2, 2)
    unrelated = apply_records(fenced, [UnfenceBrokerRecord(id=2, epoch=12)], offset=100, epoch=1)
    assert unrelated.topic("t").partitions[0] is fenced.topic("t").partitions[0]


def test_unregistering_an_unfenced_broker_fences_it_first():
    image = image_with(*brokers(1, 2), TopicRecord(name="t", topic_id=T1), partition(0, (1, 2)))
    gone = apply_records(image, [UnregisterBrokerRecord(broker_id=1, broker_epoch=11)], offset=99, epoch=1)
    assert gone.broker(1) is None and gone.topic("t").partitions[0].leader == 2


def test_fencing_sees_partitions_created_earlier_in_the_same_batch():
    image = image_with(*brokers(1, 2, 3))
    after = apply_records(
        image,
        [TopicRecord(name="t", topic_id=T1), partition(0, (1, 2, 3)), partition(1, (3, 1)),
         FenceBrokerRecord(id=1, epoch=11), partition(2, (1, 2), isr=(2,))],
        offset=99, epoch=1,
    )
    assert [p.leader for p in after.topic("t").partitions] == [2, 3, 2]
    assert index_of(after) == recomputed_index(after)


def test_partition_change_updates_only_the_fields_it_sets():
    image = image_with(*brokers(1, 2, 3), TopicRecord(name="t", topic_id=T1), partition(0, (1, 2, 3), isr=(1, 2)))
    isr_only = apply_records(image, [PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2, 3))], offset=9, epoch=1)
    p = isr_only.topic("t").partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2, 3), 0, 1)
    leader = apply_records(isr_only, [PartitionChangeRecord(partition_id=0, topic_id=T1, leader=3)], offset=10, epoch=1)
    p = leader.topic("t").partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (3, (1, 2, 3), 1, 2)
    assert index_of(leader) == recomputed_index(leader)


@pytest.mark.parametrize(
    "records, message",
    [
        ([partition(0, (1,), topic_id=T2)], "unknown topic id"),
        ([TopicRecord(name="t", topic_id=T2)], "a topic named 't' already exists"),
        ([TopicRecord(name="u", topic_id=T1)], "already in use"),
        ([partition(2, (1, 2))], "partition ids are contiguous"),
        ([partition(1, (1, 2), isr=(2,), leader=1)], "leader 1 is not in the ISR"),
        ([partition(1, (1, 1))], "must be distinct"),
        ([partition(1, (1, 2), isr=(3,))], "must be distinct replicas of"),
        ([PartitionChangeRecord(partition_id=5, topic_id=T1, leader=1)], "no such partition"),
        ([FenceBrokerRecord(id=1, epoch=99)], "broker 1 has epoch 11, not 99"),
        ([UnfenceBrokerRecord(id=7, epoch=1)], "broker 7 is not registered"),
        ([ConfigRecord(resource_type=3, resource_name="x", name="k", value="v")], "unknown resource type 3"),
        ([RemoveTopicRecord(topic_id=T1), partition(1, (1,))], "was removed"),
    ],
)
def test_a_bad_record_fails_its_whole_batch_and_changes_nothing(records, message):
    image = image_with(*brokers(1, 2), TopicRecord(name="t", topic_id=T1), partition(0, (1, 2)))
    digest = image.digest()
    good_first = [TopicRecord(name="other", topic_id=bytes([9]) * 16)]
    with pytest.raises(InvalidRecordError, match=message):
        apply_records(image, good_first + records, offset=image.offset + 5, epoch=1)
    assert image.digest() == digest and image.topic("other") is None


def test_removing_a_topic_drops_its_partitions_configs_and_index_entries_and_frees_its_name():
    c = Cluster()
    c.add_brokers(1, 2, 3)
    c.create("t", configs={"retention.ms": "10"})
    old_id = c.image.topic("t").id
    delete = ctl.delete_topic(c.image, "t")
    create = ctl.create_topic(apply_records(c.image, delete.records, offset=0, epoch=0), ctl.NewTopic("t", 1, 1), c.rng)
    after = apply_records(c.image, delete.records + create.records, offset=c.image.offset + 5, epoch=1)
    assert after.topic("t").id != old_id and old_id not in after.topics_by_id
    assert dict(after.configs_of(ConfigResource(ConfigResourceType.TOPIC, "t"))) == {}
    assert index_of(after) == recomputed_index(after)


def test_the_delta_names_the_snapshot_records_a_batch_modified_or_deleted_but_not_those_it_added():
    image = image_with(*brokers(1, 2), TopicRecord(name="t", topic_id=T1), partition(0, (1, 2)),
                       ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1"))
    delta = MetadataDelta(image).replay_all([
        TopicRecord(name="u", topic_id=T2), partition(0, (2,), topic_id=T2),  # added: not counted
        PartitionChangeRecord(partition_id=0, topic_id=T2, isr=(2,), leader=2),  # added in this batch, then changed
        FenceBrokerRecord(id=1, epoch=11),  # broker 1 and t-0 change
        ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value=None),
        ConfigRecord(resource_type=2, resource_name="t", name="segment.ms", value="9"),  # added
    ])
    assert delta.changed == {("broker", 1), ("partition", T1, 0), ("config", 2, "t", "retention.ms")}
