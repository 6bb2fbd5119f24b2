"""A Kafka-shaped metadata.log.dir for the Spark tests: every metadata record type at chosen
versions, written batch by batch as a Kafka 4.x controller writes them (bootstrap features
and controller registrations, brokers with log dirs, ELR, a committed and an aborted
transaction, removals), with a snapshot in the middle; and what a reader must find in it,
worked out from the records written, not by kraft's readers: Kafka's JSON of each record
(by kraft.cli.kafka_json, the per-record converter dump-log uses, against the Spark
reader's column-wise one), the typed columns, and the image by Kafka's replay rules."""

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kraft.cli.kafka_json import record_data as kafka_json
from kraft.metadata import MetadataCache, encode_record, snapshot_records, uuid_str
from kraft.metadata.image import METADATA_VERSION, image_to_records
from kraft.metadata.records import (
    NO_LEADER_CHANGE,
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    DelegationTokenRecord,
    EndTransactionRecord,
    EntityData,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UnregisterControllerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from kraft.records import LeaderChangeMessage, SimpleRecord, build_batch, build_control_batch
from kraft.storage import FileLog, FileSnapshotStore, SnapshotId

T0 = 1_700_000_000_000
PARTITION_DIR = "__cluster_metadata-0"
ORDERS, PAYMENTS, GHOST, DOOMED = (bytes([n]) * 15 + b"\x07" for n in (1, 2, 3, 4))
DIR_A, DIR_B, DIR_C = (bytes([n]) * 16 for n in (0xA, 0xB, 0xC))
ACL_READ, ACL_WRITE = bytes([5]) * 16, bytes([6]) * 16
# Values kraft cannot decode, each a row of type UNKNOWN: a newer record type (API key 30),
# a newer version of a known type, a known type and version cut short, and a value that is
# not a metadata record at all.
UNKNOWN_VALUES = (b"\x01\x1e\x00\x05hello\x00", b"\x01\x02\x07\x00", b"\x01\x02\x00\x05ab", b"not a record")


@dataclass(frozen=True)
class Expected:
    """A history row as a reader must give it (the columns checked by the tests)."""

    offset: int
    epoch: int
    timestamp_ms: int
    snapshot: tuple[int, int] | None
    control: bool
    type: str
    version: int | None
    fields: dict | None
    value: bytes | None
    topic: str | None = None
    topic_id: str | None = None
    partition: int | None = None
    leader: int | None = None
    isr: list[int] | None = None
    replicas: list[int] | None = None
    broker: int | None = None


def type_name(record) -> str:
    name = type(record).__name__
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()


def typed_columns(record, names: dict[bytes, str]) -> dict:
    """The typed columns of a record's row, by what each record type is about."""
    kind = type(record)
    if kind is TopicRecord:
        return {"topic": record.name, "topic_id": uuid_str(record.topic_id)}
    if kind in (PartitionRecord, PartitionChangeRecord):
        leader = None if record.leader == NO_LEADER_CHANGE else record.leader
        return {"topic": names.get(record.topic_id), "topic_id": uuid_str(record.topic_id),
                "partition": record.partition_id, "leader": leader,
                "isr": None if record.isr is None else list(record.isr),
                "replicas": None if record.replicas is None else list(record.replicas)}
    if kind is RemoveTopicRecord:
        return {"topic": names.get(record.topic_id), "topic_id": uuid_str(record.topic_id)}
    if kind is ConfigRecord:
        return {"topic": record.resource_name if record.resource_type == 2 else None}
    if kind is ClearElrRecord:
        return {"topic": record.topic_name or None}
    if kind in (RegisterBrokerRecord, UnregisterBrokerRecord, BrokerRegistrationChangeRecord):
        return {"broker": record.broker_id}
    if kind in (FenceBrokerRecord, UnfenceBrokerRecord):
        return {"broker": record.id}
    return {}


@dataclass
class KafkaLog:
    """A metadata.log.dir written batch by batch, each batch also applied to a MetadataCache
    (the image Kafka's rules give), with the rows a history read of the log must give."""

    root: Path
    segment_bytes: int = 1500
    rows: list[Expected] = field(default_factory=list)
    names: dict[bytes, str] = field(default_factory=dict)
    images: dict[int, object] = field(default_factory=dict)  # batch end offset -> image there
    clock: int = T0

    def __post_init__(self) -> None:
        self.path = self.root / PARTITION_DIR
        self.path.mkdir(parents=True)
        (self.root / "meta.properties").write_text("version=1\nnode.id=1\n")  # as Kafka's log dirs hold
        self.log = FileLog(self.path, segment_bytes=self.segment_bytes)
        self.cache = MetadataCache()
        self.epoch = 0

    def tick(self, ms: int = 1000) -> int:
        self.clock += ms
        return self.clock

    def leader_change(self, leader: int = 1) -> None:
        self.epoch += 1
        message = LeaderChangeMessage(leader, (1, 2, 3), (1, 2))
        info = self.log.append_as_leader(build_control_batch(message, timestamp=self.tick()), self.epoch)
        data = {"version": 0, "leaderId": leader, "voters": [{"voterId": v} for v in (1, 2, 3)],
                "grantingVoters": [{"voterId": v} for v in (1, 2)]}
        self.rows.append(Expected(info.first_offset, self.epoch, self.clock, None, True, "LEADER_CHANGE", 0, data,
                                  None))
        self.cache.advance(base_offset=info.first_offset, last_offset=info.last_offset, epoch=self.epoch)
        self._image_at(info.last_offset)

    def batch(self, *records, versions: dict[int, int] | None = None) -> None:
        """One batch; `versions` sets the version of some of its records (by index), the
        others take the lowest version that holds them, as kraft and Kafka write."""
        versions = versions or {}
        values = []
        for i, r in enumerate(records):
            version = versions.get(i, type(r).__schema__.version_for(r))
            values.append((r, version, encode_record(r, version)))
            if isinstance(r, TopicRecord):
                self.names[r.topic_id] = r.name
        timestamp = self.tick()
        info = self.log.append_as_leader(build_batch([SimpleRecord(None, v) for _, _, v in values],
                                                     timestamp=timestamp), self.epoch)
        for offset, (r, version, value) in enumerate(values, info.first_offset):
            self.rows.append(Expected(offset, self.epoch, timestamp, None, False, type_name(r), version,
                                      kafka_json(r, version), value, **typed_columns(r, self.names)))
        self.cache.apply_batch([SimpleRecord(None, v) for _, _, v in values], base_offset=info.first_offset,
                               last_offset=info.last_offset, epoch=self.epoch)
        self._image_at(info.last_offset)

    def unknown(self) -> None:
        """A batch of values kraft cannot decode: rows of type UNKNOWN. The cache (a replica)
        would stop at it, so the log's image ends before it."""
        info = self.log.append_as_leader(build_batch([SimpleRecord(None, v) for v in UNKNOWN_VALUES],
                                                     timestamp=self.tick()), self.epoch)
        for offset, value in enumerate(UNKNOWN_VALUES, info.first_offset):
            version = value[2] if value[0] == 1 else None
            self.rows.append(Expected(offset, self.epoch, self.clock, None, False, "UNKNOWN", version, None, value))

    def _image_at(self, last_offset: int) -> None:
        if self.cache.batch_aligned and not self.cache.in_transaction:
            self.images[last_offset + 1] = self.cache.image

    def snapshot(self) -> SnapshotId:
        """A snapshot of the image now, and the rows it holds (each at the snapshot's last
        offset, at the version kraft writes)."""
        image = self.cache.image
        snapshot_id = SnapshotId(image.end_offset, self.epoch)
        with FileSnapshotStore(self.path).create_writer(snapshot_id, self.clock, records_per_batch=5) as writer:
            writer.append(list(snapshot_records(image)))
            writer.freeze()
        names = {}
        for r in image_to_records(image):
            if isinstance(r, TopicRecord):
                names[r.topic_id] = r.name
        self.snapshot_rows = [
            Expected(image.offset, self.epoch, self.clock, (snapshot_id.end_offset, snapshot_id.epoch), False,
                     type_name(r), type(r).__schema__.version_for(r), kafka_json(r, type(r).__schema__.version_for(r)),
                     encode_record(r), **typed_columns(r, names))
            for r in image_to_records(image)
        ]
        return snapshot_id

    def close(self) -> None:
        self.log.close()


def kafka_log(root: Path, *, unknown: bool = False) -> KafkaLog:
    """Three leader epochs; every record type; a committed and an aborted transaction; a
    snapshot after the second epoch's start; with `unknown`, undecodable values at the end."""
    k = KafkaLog(root)
    listener = (BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092),)
    k.leader_change()
    k.batch(FeatureLevelRecord(name=METADATA_VERSION, feature_level=21),
            FeatureLevelRecord(name="group.version", feature_level=1), ZkMigrationStateRecord(zk_migration_state=0),
            *(RegisterControllerRecord(controller_id=c, incarnation_id=bytes([c]) * 16,
                                       end_points=(ControllerEndpoint(name="CONTROLLER", host="h", port=9093),))
              for c in (1, 2, 3)))
    k.batch(*(RegisterBrokerRecord(broker_id=b, incarnation_id=bytes([b + 16]) * 16, broker_epoch=10 + b,
                                   end_points=listener, rack=f"rack-{b % 2}", log_dirs=(DIR_A, DIR_B) if b < 3 else ())
              for b in (1, 2, 3, 4)),
            RegisterBrokerRecord(broker_id=5, incarnation_id=bytes([21]) * 16, broker_epoch=15, end_points=listener),
            versions={2: 2, 3: 1, 4: 0})
    k.batch(*(BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=10 + b, fenced=-1) for b in (1, 2, 3, 4)),
            BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=14, log_dirs=(DIR_C,)),
            UnregisterBrokerRecord(broker_id=5, broker_epoch=15))
    k.batch(TopicRecord(name="orders", topic_id=ORDERS),
            PartitionRecord(partition_id=0, topic_id=ORDERS, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                            leader_epoch=0, partition_epoch=0),
            PartitionRecord(partition_id=1, topic_id=ORDERS, replicas=(2, 3, 4), isr=(2, 3, 4), leader=2,
                            leader_epoch=0, partition_epoch=0, directories=(DIR_A, DIR_B, DIR_C)),
            PartitionRecord(partition_id=2, topic_id=ORDERS, replicas=(3, 4, 1), isr=(3, 4), leader=3,
                            leader_epoch=0, partition_epoch=0, directories=(DIR_A, DIR_A, DIR_B),
                            eligible_leader_replicas=(1,), last_known_elr=()),
            ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="60000"),
            ConfigRecord(resource_type=4, resource_name="1", name="log.cleaner.threads", value='4 "quoted"\n'))
    k.batch(TopicRecord(name="doomed", topic_id=DOOMED),
            PartitionRecord(partition_id=0, topic_id=DOOMED, replicas=(1,), isr=(1,), leader=1, leader_epoch=0,
                            partition_epoch=0))
    k.batch(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=(2, 3), leader=2),
            PartitionChangeRecord(partition_id=1, topic_id=ORDERS, directories=(DIR_B, DIR_B, DIR_C)),
            PartitionChangeRecord(partition_id=2, topic_id=ORDERS, isr=(3,), eligible_leader_replicas=(1, 4),
                                  last_known_elr=(1,)),
            PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=-1, isr=(2,), replicas=(2, 3, 1)),
            versions={0: 0, 1: 1, 2: 2, 3: 2})
    k.batch(ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name="alice"),),
                              key="producer_byte_rate", value=1048576.0),
            ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name=None),
                                      EntityData(entity_type="client-id", entity_name="app")),
                              key="consumer_byte_rate", value=2048.5),
            ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=1000),
            AccessControlEntryRecord(id=ACL_READ, resource_type=2, resource_name="orders", pattern_type=3,
                                     principal="User:alice", host="*", operation=3, permission_type=3),
            AccessControlEntryRecord(id=ACL_WRITE, resource_type=3, resource_name="app-", pattern_type=4,
                                     principal="User:bob", host="10.0.0.1", operation=4, permission_type=2),
            UserScramCredentialRecord(name="alice", mechanism=1, salt=b"salt", stored_key=b"stored",
                                      server_key=b"server", iterations=4096),
            UserScramCredentialRecord(name="bob", mechanism=2, salt=b"pepper", stored_key=b"s2", server_key=b"v2",
                                      iterations=8192),
            DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=("User:bob", "User:carol"),
                                  issue_timestamp=T0, max_timestamp=T0 + 7 * 86_400_000,
                                  expiration_timestamp=T0 + 86_400_000, token_id="token-1"),
            DelegationTokenRecord(owner="User:bob", requester="User:bob", renewers=(), issue_timestamp=T0,
                                  max_timestamp=T0 + 1, expiration_timestamp=T0 + 1, token_id="token-2"))
    k.leader_change(leader=2)
    k.snapshot()
    k.batch(BeginTransactionRecord(name="create payments"), TopicRecord(name="payments", topic_id=PAYMENTS),
            PartitionRecord(partition_id=0, topic_id=PAYMENTS, replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0,
                            partition_epoch=0))
    k.batch(PartitionRecord(partition_id=1, topic_id=PAYMENTS, replicas=(2, 3), isr=(2, 3), leader=2, leader_epoch=0,
                            partition_epoch=0), EndTransactionRecord())
    k.batch(BeginTransactionRecord(), TopicRecord(name="ghost", topic_id=GHOST),
            PartitionRecord(partition_id=0, topic_id=GHOST, replicas=(1,), isr=(1,), leader=1, leader_epoch=0,
                            partition_epoch=0),
            ConfigRecord(resource_type=2, resource_name="ghost", name="retention.ms", value="1"))
    k.batch(AbortTransactionRecord(reason="controller failover"))
    k.batch(RemoveAccessControlEntryRecord(id=ACL_WRITE), RemoveUserScramCredentialRecord(name="bob", mechanism=2),
            RemoveDelegationTokenRecord(token_id="token-2"), RemoveTopicRecord(topic_id=DOOMED),
            ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name="alice"),), key="producer_byte_rate",
                              remove=True),
            ClientQuotaRecord(entity=(EntityData(entity_type="user", entity_name="alice"),), key="request_percentage",
                              value=50.0))
    k.leader_change(leader=3)
    k.batch(FenceBrokerRecord(id=3, epoch=13), UnfenceBrokerRecord(id=3, epoch=13),
            BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=12, in_controlled_shutdown=1),
            ClearElrRecord(topic_name="orders"), ClearElrRecord(topic_name=""), UnregisterControllerRecord(controller_id=3),
            ProducerIdsRecord(broker_id=2, broker_epoch=12, next_producer_id=2000))
    k.batch(NoOpRecord())
    if unknown:
        k.unknown()
    k.close()
    return k


def snapshot_only(k: KafkaLog, root: Path) -> Path:
    """A copy of `k`'s metadata.log.dir holding only its snapshot (a snapshot backup)."""
    shutil.copytree(k.root, root)
    for segment in (root / PARTITION_DIR).glob("*"):
        if not segment.name.endswith(".checkpoint"):
            segment.unlink()
    return root


def check_history(rows: list[dict], expected: list[Expected]) -> None:
    """Every column of every history row (Arrow's or Spark's), against what was written."""
    assert [r["offset"] for r in rows] == [e.offset for e in expected]
    for row, want in zip(rows, expected):
        where = f"offset {want.offset} ({want.type})"
        assert (row["leaderEpoch"], row["isControl"], row["type"], row["version"]) == (
            want.epoch, want.control, want.type, want.version), where
        assert round(row["timestamp"].timestamp() * 1000) == want.timestamp_ms, where
        snapshot = row["snapshot"]
        assert (None if snapshot is None else (snapshot["endOffset"], snapshot["epoch"])) == want.snapshot, where
        assert (None if row["fields"] is None else json.loads(row["fields"])) == want.fields, where
        if not want.control:
            assert row["value"] == want.value, where
        typed = (row["topic"], row["topicId"], row["partition"], row["leader"], row["isr"], row["replicas"],
                 row["broker"])
        assert typed == (want.topic, want.topic_id, want.partition, want.leader, want.isr, want.replicas,
                         want.broker), where
