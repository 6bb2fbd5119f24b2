"""Kafka-shaped logs replay as Kafka replays them (its MetadataDelta, PartitionRegistration
.merge and MetadataBatchLoader), and kraft's own log replays the same under Kafka's rules."""

import random
import re

import pytest

from kraft.metadata import MetadataCache, MetadataImage, ReplayError, apply_records, encode_record, partition_replay
from kraft.metadata import operations as ctl
from kraft.metadata.features import SUPPORTED
from kraft.metadata.image import DERIVED_FENCING, METADATA_VERSION, ScramCredential, image_to_records
from kraft.metadata.image_snapshot import image_from_records
from kraft.metadata.records import (
    NO_LEADER_CHANGE,
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ControllerEndpoint,
    DelegationTokenRecord,
    EndTransactionRecord,
    EntityData,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterControllerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from kraft.records import SimpleRecord, build_batch, read_batches
from tests.metadata.cluster import index_of, recomputed_index

T1 = bytes([1]) * 16
DIR_A, DIR_B, DIR_C = bytes([0xA]) * 16, bytes([0xB]) * 16, bytes([0xC]) * 16


class Log:
    """Batches as a Kafka controller writes them, fed to a real MetadataCache."""

    def __init__(self) -> None:
        self.cache = MetadataCache()
        self.offset = 0

    def batch(self, *records):
        data = build_batch([SimpleRecord(None, encode_record(r)) for r in records], base_offset=self.offset,
                           partition_leader_epoch=1)
        (batch,) = read_batches(data)
        self.offset += len(records)
        return self.cache.apply_batch(batch.records(), base_offset=batch.header.base_offset,
                                      last_offset=batch.header.last_offset, epoch=1)


def broker(b, fenced=True, epoch=None, **kw):
    return RegisterBrokerRecord(broker_id=b, incarnation_id=bytes([b]) * 16, broker_epoch=epoch or 10 + b,
                                fenced=fenced, **kw)


def test_kafka_3_2_unfences_a_broker_and_elects_it_in_one_batch_and_the_epoch_moves_once():
    log = Log()
    log.batch(FeatureLevelRecord(name=METADATA_VERSION, feature_level=3), broker(1), broker(2, fenced=False),
              TopicRecord(name="t", topic_id=T1),
              PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1,), leader=-1, leader_epoch=4,
                              partition_epoch=6))
    image = log.batch(UnfenceBrokerRecord(id=1, epoch=11), PartitionChangeRecord(partition_id=0, topic_id=T1, leader=1))
    p = image.topic("t").partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 5, 7), "Kafka bumps once: UnfenceBroker elects no one"
    assert not image.broker(1).fenced


def test_fencing_alone_changes_no_partition_under_kafkas_rules():
    log = Log()
    log.batch(broker(1, fenced=False), broker(2, fenced=False), TopicRecord(name="t", topic_id=T1),
              PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1, 2), leader=1))
    image = log.batch(FenceBrokerRecord(id=1, epoch=11))
    p = image.topic("t").partitions[0]
    assert image.broker(1).fenced and (p.leader, p.isr, p.leader_epoch) == (1, (1, 2), -1)


def test_partition_change_merges_directories_elr_and_recovery_state_as_kafka_does():
    log = Log()
    log.batch(broker(1, fenced=False), broker(2, fenced=False), broker(3, fenced=False),
              TopicRecord(name="t", topic_id=T1),
              PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                              leader_epoch=0, partition_epoch=0, directories=(DIR_A, DIR_B, DIR_C)))
    image = log.batch(PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(2,), leader=2, eligible_leader_replicas=(3,),
                                            last_known_elr=(1,), leader_recovery_state=1))
    p = image.topic("t").partitions[0]
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((2,), 2, 1, 1)
    assert (p.eligible_leader_replicas, p.last_known_elr, p.leader_recovery_state) == ((3,), (1,), 1)
    assert p.directories == (DIR_A, DIR_B, DIR_C), "kept when the record names none"
    # A new replica set of another size without directories: all unassigned (MIGRATING).
    image = log.batch(PartitionChangeRecord(partition_id=0, topic_id=T1, replicas=(1, 2, 3, 4)))
    assert image.topic("t").partitions[0].directories == ()
    # ClearElr: the partition loses its ELRs, with partition epoch + 1.
    image = log.batch(ClearElrRecord(topic_name="t"))
    p = image.topic("t").partitions[0]
    assert (p.eligible_leader_replicas, p.last_known_elr, p.partition_epoch) == (None, None, 3)
    # A snapshot of it writes the versions that hold it, and reads back the same.
    assert image_from_records(image_to_records(image)).topic("t") == image.topic("t")


def test_a_transaction_applies_at_its_end_across_batches_and_an_abort_drops_it():
    log = Log()
    log.batch(broker(1, fenced=False))
    before = log.batch(TopicRecord(name="kept", topic_id=bytes([9]) * 16),
                       BeginTransactionRecord(name="migration"), TopicRecord(name="t", topic_id=T1))
    assert before.topic("kept") is not None, "what came before the Begin in its batch applies on its own"
    assert before.topic("t") is None and log.cache.in_transaction and not log.cache.batch_aligned
    middle = log.batch(PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1))
    assert middle is before, "nothing of a transaction shows before its end"
    after = log.batch(EndTransactionRecord(), NoOpRecord())
    assert after.topic("t").partitions[0].leader == 1 and after.offset == log.offset - 1
    assert log.cache.batch_aligned and not log.cache.in_transaction
    log.batch(BeginTransactionRecord(), TopicRecord(name="gone", topic_id=bytes([7]) * 16))
    aborted = log.batch(AbortTransactionRecord(reason="the controller failed over"), NoOpRecord())
    assert aborted.topic("gone") is None and aborted.offset == log.offset - 1


@pytest.mark.parametrize("records, message", [
    ((BeginTransactionRecord(), BeginTransactionRecord()), "a BeginTransactionRecord inside a transaction"),
    ((EndTransactionRecord(),), "EndTransactionRecord without a BeginTransactionRecord"),
    ((FenceBrokerRecord(id=5, epoch=1),), "broker 5 is not registered"),
])
def test_a_record_that_cannot_be_replayed_stops_the_replay_naming_its_offset(records, message):
    log = Log()
    log.batch(NoOpRecord(), NoOpRecord())
    with pytest.raises(ReplayError, match=rf"record at offset \d+: .*{message}"):
        log.batch(*records)
    assert log.cache.offset == 1


def test_an_unknown_record_type_stops_the_replay_naming_its_offset():
    log = Log()
    log.batch(NoOpRecord())
    data = build_batch([SimpleRecord(None, b"\x01\x5a\x00\x00")], base_offset=1)  # API key 90
    (batch,) = read_batches(data)
    with pytest.raises(ReplayError, match="record at offset 1: unknown metadata record API key 90"):
        log.cache.apply_batch(batch.records(), base_offset=1, last_offset=1, epoch=1)


def test_a_kafka_4_style_log_builds_every_part_of_the_image_and_snapshots_it_whole():
    acl = AccessControlEntryRecord(id=bytes([5]) * 16, resource_type=2, resource_name="orders", pattern_type=3,
                                   principal="User:alice", host="*", operation=3, permission_type=3)
    token = DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=("User:bob",),
                                  issue_timestamp=1, max_timestamp=3, expiration_timestamp=2, token_id="tok")
    log = Log()
    log.batch(FeatureLevelRecord(name=METADATA_VERSION, feature_level=21),
              FeatureLevelRecord(name="group.version", feature_level=1), ZkMigrationStateRecord(zk_migration_state=0),
              *(RegisterControllerRecord(controller_id=c, incarnation_id=bytes([c]) * 16,
                                         end_points=(ControllerEndpoint(name="CONTROLLER", host="h", port=9093),))
                for c in (1, 2, 3)))
    log.batch(broker(4, log_dirs=(DIR_A,), end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),)),
              BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=14, fenced=-1),
              ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name="alice"),),
                                key="producer_byte_rate", value=1024.0),
              ClientQuotaRecord(entity=(EntityData(entity_type="client-id", entity_name=None),),
                                key="consumer_byte_rate", value=2048.0),
              acl, token,
              UserScramCredentialRecord(name="alice", mechanism=1, salt=b"salt", stored_key=b"sk", server_key=b"vk",
                                        iterations=4096))
    image = log.batch(UnregisterControllerRecord(controller_id=3),
                      BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=14, in_controlled_shutdown=1))
    assert image.features[METADATA_VERSION] == 21 and sorted(image.controllers) == [1, 2]
    assert not image.broker(4).fenced and image.broker(4).in_controlled_shutdown
    assert image.broker(4).log_dirs == (DIR_A,)
    assert dict(image.client_quotas[(("user", "alice"),)]) == {"producer_byte_rate": 1024.0}
    assert image.acls[acl.id] == acl and image.delegation_tokens["tok"] == token
    assert image.scram_credentials[("alice", 1)] == ScramCredential(b"salt", b"sk", b"vk", 4096)
    assert image.zk_migration_state == 0
    reloaded = image_from_records(image_to_records(image), offset=image.offset)
    assert reloaded.digest() == image.digest() and reloaded.record_count() == image.record_count() == 11
    image = log.batch(RemoveAccessControlEntryRecord(id=acl.id), RemoveDelegationTokenRecord(token_id="tok"),
                      RemoveUserScramCredentialRecord(name="alice", mechanism=1),
                      ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name="alice"),),
                                        key="producer_byte_rate", remove=True))
    assert not image.acls and not image.delegation_tokens and not image.scram_credentials
    assert (("user", "alice"),) not in image.client_quotas


KRAFTS_FEATURES = [BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)
                   for name, (low, high) in sorted(SUPPORTED.items())]


def operation(image: MetadataImage, kind: str, b: int, step: int, topic: ctl.NewTopic,
              rng: random.Random) -> ctl.ControllerResult:
    """One step of the random logs below: broker `b` registered, unfenced, fenced or
    unregistered, or `topic` created; ControllerError if the image refuses it."""
    if kind == "register":  # as kraft's brokers list their features: a log with derived fencing needs it
        return ctl.register_broker(image, b, incarnation_id=bytes([b]) * 16, broker_epoch=100 + step,
                                   features=KRAFTS_FEATURES)
    if kind == "unfence":
        registered = image.broker(b)
        return ctl.unfence_broker(image, b, registered.epoch if registered else 0)
    if kind == "fence":
        return ctl.fence_broker(image, b)
    if kind == "unregister":
        return ctl.unregister_broker(image, b)
    return ctl.create_topic(image, topic, rng)


@pytest.mark.parametrize("seed", range(20))
def test_kraft_controllers_log_replays_the_same_by_kafkas_rules_and_by_derived_fencing(seed):
    """The same random operations, through a controller writing Kafka's partition changes and
    through one writing KIP-630's fencing events: every image along the way is the same."""
    rng = random.Random(seed)
    images = {"kafka": MetadataImage(), "derived": apply_records(
        MetadataImage(), [FeatureLevelRecord(name=DERIVED_FENCING, feature_level=1)], offset=0, epoch=1)}
    for step in range(60):
        kind, b = rng.choice(["register", "unfence", "unfence", "fence", "create", "unregister"]), rng.randint(1, 5)
        topic = ctl.NewTopic(f"t{step}", rng.randint(1, 3), rng.randint(1, 3))
        seed_ = rng.random()
        for mode, image in images.items():
            try:
                result = operation(image, kind, b, step, topic, random.Random(seed_))
            except ctl.ControllerError:
                continue
            images[mode] = apply_records(image, result.records, offset=image.offset + len(result.records), epoch=1)
        assert images["kafka"].topics_by_name == images["derived"].topics_by_name, f"step {step}: {kind} {b}"
        assert images["kafka"].brokers == images["derived"].brokers


@pytest.mark.parametrize("seed", range(20))
def test_the_controllers_prepared_fencing_is_the_image_kafkas_replay_of_its_records_makes(seed):
    """A broker operation hands the controller the delta it derived its partition changes
    with (ControllerResult.prepared), which it applies to its working image instead of
    replaying the records: that image must be the one Kafka's replay of the records makes,
    field for field, through registrations, fences, unfences and unregistrations that move
    leaders, shrink ISRs to their last member and elect leaderless partitions again."""
    rng = random.Random(seed)
    image = MetadataImage()
    prepared = 0
    warm_up = [("register", b) for b in range(1, 7)] + [("unfence", b) for b in range(1, 7)] + [("create", 0)] * 6
    for step in range(100):
        kind, b = warm_up[step] if step < len(warm_up) else (
            rng.choice(["register", "unfence", "unfence", "fence", "fence", "create", "unregister"]), rng.randint(1, 6))
        topic = ctl.NewTopic(f"t{step}", rng.randint(1, 4), rng.randint(1, 3))
        try:
            result = operation(image, kind, b, step, topic, rng)
        except ctl.ControllerError:
            continue
        offset = image.offset + len(result.records)
        replayed = apply_records(image, result.records, offset=offset, epoch=1)
        applied, _ = result.applied_to(image, offset=offset, epoch=1)
        assert applied == replayed, f"step {step}: {kind} {b}"
        assert index_of(applied) == recomputed_index(applied), f"step {step}: {kind} {b}"
        prepared += result.prepared is not None and len(result.records) > 1
        image = replayed
    assert prepared >= 10, "the seed fenced or unfenced brokers that led or followed partitions"


@pytest.mark.parametrize("seed", range(4))
def test_a_change_of_isr_and_leader_alone_merges_as_the_whole_record_would_be_checked(seed):
    """merge takes a shorter way for a PartitionChangeRecord that sets only the ISR and the
    leader (what fencing writes: a zonal outage at a million partitions is a million of
    them): it must build the partition a PartitionRecord of the merged fields builds, keeping
    the directories and ELRs, and refuse what that refuses (duplicates, an ISR member that is
    not a replica, a leader outside the ISR)."""
    rng = random.Random(seed)
    kept = 0
    for _ in range(400):
        replicas = tuple(rng.sample(range(1, 8), rng.randint(1, 4)))
        isr = tuple(rng.sample(replicas, rng.randint(1, len(replicas))))
        p = partition_replay.from_record(PartitionRecord(
            partition_id=0, topic_id=T1, replicas=replicas, isr=isr, removing_replicas=(), adding_replicas=(),
            leader=rng.choice(isr), leader_recovery_state=rng.choice([0, 1]), leader_epoch=rng.randint(0, 9),
            partition_epoch=rng.randint(0, 9), directories=rng.choice([(), tuple(DIR_A for _ in replicas)]),
            eligible_leader_replicas=rng.choice([None, (replicas[0],)]), last_known_elr=rng.choice([None, (9,)])))
        new_isr = rng.choice([None, isr, tuple(rng.sample(replicas, rng.randint(1, len(replicas)))),
                              isr + (isr[0],), isr + (8,), ()])
        leader = rng.choice([NO_LEADER_CHANGE, -1, rng.choice(replicas), 8])
        merged_isr = p.isr if new_isr is None else new_isr
        whole = PartitionRecord(0, T1, p.replicas, merged_isr, p.removing_replicas, p.adding_replicas,
                                p.leader if leader == NO_LEADER_CHANGE else leader, p.leader_recovery_state,
                                p.leader_epoch + (leader != NO_LEADER_CHANGE), p.partition_epoch + 1, p.directories,
                                p.eligible_leader_replicas, p.last_known_elr)
        try:
            expected = partition_replay.from_record(whole)
        except ValueError as e:
            with pytest.raises(ValueError, match=re.escape(str(e))):
                partition_replay.merge(p, PartitionChangeRecord(0, T1, isr=new_isr, leader=leader))
            continue
        merged = partition_replay.merge(p, PartitionChangeRecord(0, T1, isr=new_isr, leader=leader))
        assert merged == expected and type(merged) is type(expected)
        assert merged.isr is expected.isr, "the ISR is the one interned copy"
        kept += 1
    assert 100 <= kept <= 350, "both valid and refused changes were tried"


def test_a_batch_that_fails_inside_a_transaction_leaves_the_transaction_as_it_was():
    log = Log()
    log.batch(broker(1, fenced=False))
    log.batch(BeginTransactionRecord(), TopicRecord(name="t", topic_id=T1))
    bad = PartitionChangeRecord(partition_id=5, topic_id=bytes([8]) * 16)  # a topic that does not exist
    offset = log.offset
    with pytest.raises(ReplayError, match=f"record at offset {offset + 1}: .*unknown topic id"):
        log.batch(TopicRecord(name="x", topic_id=bytes([6]) * 16), bad, EndTransactionRecord())
    log.offset = offset  # the failed batch never happened
    image = log.batch(EndTransactionRecord())
    assert image.topic("t") is not None and image.topic("x") is None
