"""The metadata image: the whole cluster metadata at one offset, immutable and shared.

An image is never changed. Applying a committed batch (`MetadataDelta`) builds the next
image, which shares with the previous one every broker, topic and partition the batch did
not touch: the maps are HAMTs (`immutables.Map`), so replacing one topic among 100 000
copies a few tree nodes, not the map. That is what lets a snapshot be written from image N,
from another thread if need be, while image N+1 is built, with no lock and no copy.

At KIP-630's scale (a million partitions) memory per partition decides whether the image
fits, so the entries are NamedTuples (a tuple's memory, no per-object dict), a topic holds
its partitions as a tuple indexed by partition id, and replica and ISR lists are interned:
a cluster has few distinct lists, and a million partitions share them.

`brokers_to_isrs` (Kafka's BrokersToIsrs) maps a broker id to the topics and partitions
whose ISR holds it. In a log that asks for derived fencing (the `kraft.derived.fencing`
feature), FenceBroker and UnfenceBroker are events that every replica expands into
partition changes (KIP-630's "Amount of Data Replicated"); this index keeps that work
proportional to the partitions the broker hosts, not to the image.

Besides brokers, topics and configs, the image holds every other part of Kafka's: features
(metadata.version among them), controllers, ACLs, client quotas, SCRAM credentials (salted
hashes only: the password is never in the log), delegation tokens, the producer-id block and
the ZooKeeper migration state.
"""

import enum
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

import immutables

from kraft.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    ControllerFeature,
    EntityData,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from kraft.metadata.serde import encode_record

NO_LEADER = -1
METADATA_VERSION = "metadata.version"  # Kafka writes this feature first: readers decode by it
# A feature only kraft writes: its log fences by events every replica expands (KIP-630)
# rather than by the partition changes Kafka's controller writes. Readers replay by it.
DERIVED_FENCING = "kraft.derived.fencing"
# The Raft layer's feature (KIP-853): finalized by KRaftVersionRecord, not in the image.
KRAFT_VERSION = "kraft.version"

QuotaEntity = tuple[tuple[str, str | None], ...]  # (entity type, name) pairs, sorted by type


class ConfigResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids, as ConfigRecord.resource_type carries them."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigResource(NamedTuple):
    type: ConfigResourceType
    name: str


class PartitionRegistration(NamedTuple):
    """One partition's state (Kafka's PartitionRegistration), without its topic and id.

    The fields are PartitionRecord's fields after the partition and topic ids, in the same
    order: `PartitionRecord(partition_id, topic_id, *registration)` writes it. Directories
    are () when unassigned (Kafka's all-MIGRATING), and the eligible leader replicas (KIP-966)
    None when there are none, which are those fields' defaults in the record: a partition
    that has neither is written as version 0."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: tuple[bytes, ...] = ()
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


class TopicImage(NamedTuple):
    name: str
    id: bytes
    partitions: tuple[PartitionRegistration, ...]  # indexed by partition id


def kafka_uuid_order(uuids: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """`uuids` in Kafka's Uuid.compareTo order, as its BrokerRegistration keeps log
    directories: by the most significant long, then the least, each signed (so a Uuid whose
    first byte is 0x80 or above sorts before 0x00...)."""
    return tuple(sorted(uuids, key=lambda u: (int.from_bytes(u[:8], "big", signed=True),
                                              int.from_bytes(u[8:], "big", signed=True))))


class BrokerRegistration(NamedTuple):
    id: int
    epoch: int
    incarnation_id: bytes
    endpoints: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[bytes, ...] = ()


class ControllerRegistration(NamedTuple):
    id: int
    incarnation_id: bytes
    zk_migration_ready: bool
    endpoints: tuple[ControllerEndpoint, ...]
    features: tuple[ControllerFeature, ...]


class ScramCredential(NamedTuple):
    """A user's credential for one mechanism: salted hashes, never the password (KIP-554)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


_INTERNED: dict[tuple, tuple] = {}
_INTERN_LIMIT = 1 << 18
_Id = TypeVar("_Id", int, bytes)


def intern_ids(ids: tuple[_Id, ...]) -> tuple[_Id, ...]:
    """The one shared copy of a list of broker ids (or of directory ids, which never equal
    one). The table is only a cache: once it grows past its limit (a cluster with very many
    distinct assignments) it starts over, and lists interned before simply stay as they are."""
    shared: tuple[_Id, ...] | None = _INTERNED.get(ids)
    if shared is None:
        if len(_INTERNED) >= _INTERN_LIMIT:
            _INTERNED.clear()
        shared = _INTERNED[ids] = ids
    return shared


EMPTY_MAP: immutables.Map = immutables.Map()  # one, shared by every empty map of every image


def merged(base: immutables.Map, changes: dict) -> immutables.Map:
    """`base` with `changes` applied (None deletes), sharing everything else: how a delta
    makes each map of the next image."""
    if not changes:
        return base
    if not base:  # a snapshot load: build the map in one go
        return immutables.Map({k: v for k, v in changes.items() if v is not None})
    m = base.mutate()
    for key, value in changes.items():
        if value is None:
            m.pop(key, None)
        else:
            m[key] = value
    return m.finish()


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The cluster metadata as of `offset` (the last record applied; -1 for none), in `epoch`."""

    offset: int = -1
    epoch: int = -1
    features: immutables.Map = field(default=EMPTY_MAP)  # name -> finalized level
    brokers: immutables.Map = field(default=EMPTY_MAP)  # id -> BrokerRegistration
    topics_by_id: immutables.Map = field(default=EMPTY_MAP)  # 16-byte id -> TopicImage
    topics_by_name: immutables.Map = field(default=EMPTY_MAP)  # name -> TopicImage
    brokers_to_isrs: immutables.Map = field(default=EMPTY_MAP)  # broker -> topic id -> partition ids
    configs: immutables.Map = field(default=EMPTY_MAP)  # ConfigResource -> Map(name -> value)
    next_producer_id: int = -1  # first id of the next block; -1 before any allocation
    controllers: immutables.Map = field(default=EMPTY_MAP)  # id -> ControllerRegistration
    acls: immutables.Map = field(default=EMPTY_MAP)  # 16-byte id -> AccessControlEntryRecord
    client_quotas: immutables.Map = field(default=EMPTY_MAP)  # QuotaEntity -> Map(key -> value)
    scram_credentials: immutables.Map = field(default=EMPTY_MAP)  # (user, mechanism) -> ScramCredential
    delegation_tokens: immutables.Map = field(default=EMPTY_MAP)  # token id -> DelegationTokenRecord
    zk_migration_state: int = -1  # ZkMigrationStateRecord's value; -1 if none was written

    @property
    def end_offset(self) -> int:
        """Where a snapshot of this image ends (exclusive), and where the log continues."""
        return self.offset + 1

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def unfenced_brokers(self) -> list[int]:
        """Ids of the registered, unfenced brokers, ascending."""
        return sorted(b.id for b in self.brokers.values() if not b.fenced)

    def configs_of(self, resource: ConfigResource) -> Mapping[str, str]:
        return self.configs.get(resource, EMPTY_MAP)

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics_by_id.values())

    def record_count(self) -> int:
        """How many records a snapshot of this image holds (`image_to_records`), without
        building them: the denominator of the changed-records ratio."""
        return (
            len(self.features)
            + len(self.brokers)
            + len(self.controllers)
            + len(self.topics_by_id)
            + self.partition_count()
            + sum(len(c) for c in self.configs.values())
            + sum(len(q) for q in self.client_quotas.values())
            + (1 if self.next_producer_id >= 0 else 0)
            + len(self.acls)
            + len(self.scram_credentials)
            + len(self.delegation_tokens)
            + (1 if self.zk_migration_state >= 0 else 0)
        )

    def digest(self) -> str:
        """SHA-256 over the image's snapshot records: equal on two nodes exactly when their
        images hold the same metadata (the offset and epoch are not part of it)."""
        h = hashlib.sha256()
        for record in image_to_records(self):
            value = encode_record(record)
            h.update(len(value).to_bytes(4, "big"))
            h.update(value)
        return h.hexdigest()


def image_to_records(image: MetadataImage) -> Iterator[MetadataRecord]:
    """The records a snapshot of `image` holds, in a fixed order, so one image always makes
    the same snapshot bytes, and in the order of Kafka's MetadataImage.write: features
    (metadata.version first) and the migration state, brokers then controllers by id, topics
    by name each followed by its partitions, configs, client quotas, the producer-id block,
    ACLs, SCRAM credentials, delegation tokens. Brokers precede partitions, so loading never
    derives fencing effects from them."""
    features = sorted(image.features.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0]))
    for name, level in features:
        yield FeatureLevelRecord(name=name, feature_level=level)
    if image.zk_migration_state >= 0:
        yield ZkMigrationStateRecord(zk_migration_state=image.zk_migration_state)
    for broker_id in sorted(image.brokers.keys()):
        b = image.brokers[broker_id]
        yield RegisterBrokerRecord(
            broker_id=b.id,
            is_migrating_zk_broker=b.is_migrating_zk_broker,
            incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch,
            end_points=b.endpoints,
            features=b.features,
            rack=b.rack,
            fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=b.log_dirs,
        )
    for controller_id in sorted(image.controllers.keys()):
        c = image.controllers[controller_id]
        yield RegisterControllerRecord(
            controller_id=c.id, incarnation_id=c.incarnation_id, zk_migration_ready=c.zk_migration_ready,
            end_points=c.endpoints, features=c.features,
        )
    for name in sorted(image.topics_by_name.keys()):
        topic = image.topics_by_name[name]
        yield TopicRecord(name=name, topic_id=topic.id)
        for pid, p in enumerate(topic.partitions):
            yield PartitionRecord(pid, topic.id, *p)
    for resource in sorted(image.configs.keys()):
        entries = image.configs[resource]
        for key in sorted(entries.keys()):
            yield ConfigRecord(
                resource_type=resource.type, resource_name=resource.name, name=key, value=entries[key]
            )
    for entity in sorted(image.client_quotas.keys(), key=_entity_order):
        quotas = image.client_quotas[entity]
        data = tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity)
        for key in sorted(quotas.keys()):
            yield ClientQuotaRecord(entity=data, key=key, value=quotas[key], remove=False)
    if image.next_producer_id >= 0:
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id)
    for acl_id in sorted(image.acls.keys()):
        yield image.acls[acl_id]
    for user, mechanism in sorted(image.scram_credentials.keys()):
        c = image.scram_credentials[(user, mechanism)]
        yield UserScramCredentialRecord(name=user, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key,
                                        server_key=c.server_key, iterations=c.iterations)
    for token_id in sorted(image.delegation_tokens.keys()):
        yield image.delegation_tokens[token_id]


def _entity_order(entity: QuotaEntity) -> tuple:
    """Entities sorted with None (the default entity) before any name."""
    return tuple((t, n is not None, n or "") for t, n in entity)
