"""Kafka-shaped metadata files, built byte by byte for the file tools' tests.

Nothing here goes through kraft's log or controller: batches are laid out as a Kafka 3.9/4.x
controller lays them out (a LeaderChange, then KRaftVersion and Voters control records,
then metadata records at the versions Kafka writes, transactions included), and snapshots
as Kafka's RecordsSnapshotWriter writes them (header, KRaftVersion and Voters, data,
footer, every batch in the snapshot's epoch).
"""

from pathlib import Path

from kraft.cli.metadata_files import load
from kraft.metadata import MetadataImage, encode_record, image_to_records
from kraft.metadata import records as r
from kraft.metadata.records import EntityData
from kraft.records import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    SimpleRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    build_batch,
)
from kraft.records.control import ControlMessage, control_key, control_type_of, encode_control_value

UNKNOWN_TYPE = b"\x01\x5a\x00\x03abc\x00"  # frame 1, API key 90 (unknown), version 0, a body
TIME = 1_729_827_181_123  # 2024-10-25T03:33:01.123Z: every batch's timestamp


def uuid(n: int) -> bytes:
    return bytes([n]) * 15 + b"\x07"


class LogBuilder:
    """Batches at consecutive offsets, as one segment or snapshot file holds them."""

    def __init__(self, base_offset: int = 0) -> None:
        self.next_offset = base_offset
        self.data = bytearray()

    def values(self, values: list[bytes | None], epoch: int, **batch_args: object) -> int:
        """A data batch of raw values (null keys); its base offset."""
        base = self.next_offset
        self.data += build_batch([SimpleRecord(None, v) for v in values], base_offset=base,
                                 partition_leader_epoch=epoch, timestamp=TIME, **batch_args)
        self.next_offset += len(values)
        return base

    def records(self, records: list, epoch: int, version: int | None = None, **batch_args: object) -> int:
        return self.values([encode_record(rec, version) for rec in records], epoch, **batch_args)

    def control(self, messages: list[ControlMessage], epoch: int) -> None:
        records = [SimpleRecord(control_key(control_type_of(m)), encode_control_value(m)) for m in messages]
        self.data += build_batch(records, base_offset=self.next_offset, partition_leader_epoch=epoch, timestamp=TIME,
                                 control=True)
        self.next_offset += len(messages)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(self.data))
        return path


VOTERS = VotersRecord((Voter(3000, uuid(30), (VoterEndpoint("CONTROLLER", "c1.example", 9093),), 0, 1),))
KRAFT_VERSION = KRaftVersionRecord(1)


def _endpoint(port: int) -> r.BrokerEndpoint:
    return r.BrokerEndpoint(name="PLAINTEXT", host=f"b{port % 10}.example", port=port, security_protocol=0)


MV_FEATURE = r.BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=25)


def register_broker(broker_id: int) -> r.RegisterBrokerRecord:
    return r.RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid(broker_id), broker_epoch=10 + broker_id,
        end_points=(_endpoint(9090 + broker_id),), features=(MV_FEATURE,), rack="rack-a" if broker_id == 1 else None,
        fenced=True, log_dirs=(uuid(100 + broker_id),),
    )


def partition(topic_id: bytes, pid: int, replicas: tuple[int, ...]) -> r.PartitionRecord:
    return r.PartitionRecord(
        partition_id=pid, topic_id=topic_id, replicas=replicas, isr=replicas, leader=replicas[0], leader_epoch=0,
        partition_epoch=0, directories=tuple(uuid(100 + b) for b in replicas), eligible_leader_replicas=(),
        last_known_elr=(),
    )


ORDERS, AUDIT, GHOST, TMP = uuid(1), uuid(2), uuid(3), uuid(4)
ACL_ID, ACL_GONE = uuid(50), uuid(51)


def cluster_log(builder: LogBuilder) -> None:
    """A 4.x-style log holding every metadata record type Kafka defines: bootstrap features
    and controllers, brokers registered and unfenced, topics (one created in a committed
    transaction across two batches, one in an aborted one), configs, quotas, producer ids,
    ACLs, SCRAM credentials, delegation tokens, partition changes, removals of each kind,
    a NoOpRecord and a record of a type kraft does not know."""
    e = 1
    builder.control([LeaderChangeMessage(3000, (3000,), (3000,))], e)
    builder.control([KRAFT_VERSION, VOTERS], e)
    builder.records([
        r.FeatureLevelRecord(name="metadata.version", feature_level=21),
        r.FeatureLevelRecord(name="group.version", feature_level=1),
        r.ZkMigrationStateRecord(zk_migration_state=0),
    ], e)
    controller = {"incarnation_id": uuid(31), "zk_migration_ready": False,
                  "end_points": (r.BrokerEndpoint(name="CONTROLLER", host="c1.example", port=9093, security_protocol=0),),
                  "features": (r.BrokerFeature(name="kraft.version", min_supported_version=0, max_supported_version=1),)}
    builder.records([r.RegisterControllerRecord(controller_id=3000, **controller),
                     r.RegisterControllerRecord(controller_id=3001, **controller)], e)
    builder.records([register_broker(b) for b in (1, 2, 3, 4)], e)
    builder.records([r.BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=10 + b, fenced=-1) for b in (1, 2)]
                    + [r.UnfenceBrokerRecord(id=3, epoch=13), r.UnfenceBrokerRecord(id=4, epoch=14)], e)
    builder.records([
        r.TopicRecord(name="orders", topic_id=ORDERS),
        *(partition(ORDERS, p, (1 + p % 3, 1 + (p + 1) % 3)) for p in range(3)),
        r.ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="60000"),
    ], e)
    builder.records([r.BeginTransactionRecord(name="create audit"), r.TopicRecord(name="audit", topic_id=AUDIT)], e)
    builder.records([r.PartitionRecord(partition_id=0, topic_id=AUDIT, replicas=(2,), isr=(2,), leader=2,
                                       leader_epoch=0, partition_epoch=0), r.EndTransactionRecord()], e, version=0)
    builder.records([r.BeginTransactionRecord(name="create ghost"), r.TopicRecord(name="ghost", topic_id=GHOST),
                     r.AbortTransactionRecord(reason="the controller failed over")], e)
    builder.records([
        r.ConfigRecord(resource_type=4, resource_name="", name="num.io.threads", value="8"),
        r.ConfigRecord(resource_type=4, resource_name="2", name="num.io.threads", value="4"),
        r.ClientQuotaRecord(entity=(EntityData("user", "alice"),), key="producer_byte_rate", value=10485760.0),
        r.ClientQuotaRecord(entity=(EntityData("client-id", None),), key="request_percentage", value=50.0),
        r.ClientQuotaRecord(entity=(EntityData("user", "bob"), EntityData("client-id", "app")),
                            key="consumer_byte_rate", value=1024.0),
        r.ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=5000),
        r.AccessControlEntryRecord(id=ACL_ID, resource_type=2, resource_name="orders", pattern_type=3,
                                   principal="User:alice", host="*", operation=3, permission_type=3),
        r.AccessControlEntryRecord(id=ACL_GONE, resource_type=3, resource_name="g", pattern_type=4,
                                   principal="User:bob", host="*", operation=2, permission_type=2),
        r.UserScramCredentialRecord(name="alice", mechanism=1, salt=b"\x01\x02", stored_key=b"\xaa\xbb",
                                    server_key=b"\xcc\xdd", iterations=4096),
        r.UserScramCredentialRecord(name="alice", mechanism=2, salt=b"\x03", stored_key=b"\x04", server_key=b"\x05",
                                    iterations=8192),
        r.DelegationTokenRecord(owner="User:alice", requester="User:admin", renewers=("User:bob", "User:carol"),
                                issue_timestamp=1000, max_timestamp=3000, expiration_timestamp=2000, token_id="tok-1"),
        r.DelegationTokenRecord(owner="User:bob", requester="User:bob", token_id="tok-2"),
    ], e)
    e = 2
    builder.control([LeaderChangeMessage(3000, (3000,), (3000,))], e)
    builder.records([
        r.PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2, isr=(2,)),
        r.NoOpRecord(),
    ], e)
    builder.values([UNKNOWN_TYPE, encode_record(r.NoOpRecord())], e)
    builder.records([
        r.TopicRecord(name="tmp", topic_id=TMP),
        r.PartitionRecord(partition_id=0, topic_id=TMP, replicas=(1,), isr=(1,), leader=1),
        r.ClearElrRecord(topic_name="tmp"),
        r.RemoveTopicRecord(topic_id=TMP),
        r.BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=13, fenced=1, in_controlled_shutdown=0),
        r.FenceBrokerRecord(id=4, epoch=14),
        r.UnregisterBrokerRecord(broker_id=4, broker_epoch=14),
        r.RemoveAccessControlEntryRecord(id=ACL_GONE),
        r.RemoveUserScramCredentialRecord(name="alice", mechanism=2),
        r.RemoveDelegationTokenRecord(token_id="tok-2"),
        r.UnregisterControllerRecord(controller_id=3001),
    ], e)


def write_cluster_dir(log_dir: Path) -> Path:
    """A metadata.log.dir whose __cluster_metadata-0 holds `cluster_log` as one segment;
    the partition directory."""
    builder = LogBuilder()
    cluster_log(builder)
    partition_dir = log_dir / "__cluster_metadata-0"
    builder.write(partition_dir / "00000000000000000000.log")
    return partition_dir


def write_kafka_snapshot(directory: Path, image: MetadataImage, epoch: int) -> Path:
    """A snapshot of `image` laid out as Kafka writes one: header, KRaftVersion and Voters,
    the image's records (Kafka's MetadataImage.write order) two per batch, footer."""
    builder = LogBuilder()
    builder.control([SnapshotHeaderRecord(TIME)], epoch)
    builder.control([KRAFT_VERSION, VOTERS], epoch)
    records = list(image_to_records(image))
    for i in range(0, len(records), 2):
        builder.records(records[i : i + 2], epoch)
    builder.control([SnapshotFooterRecord()], epoch)
    return builder.write(directory / f"{image.offset + 1:020d}-{epoch:010d}.checkpoint")




def cluster_image(log_dir: Path) -> MetadataImage:
    """The image `cluster_log` builds, loaded by the shell's loader from a directory it writes."""
    return load("test", None, str(write_cluster_dir(log_dir))).image
