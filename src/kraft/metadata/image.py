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
whose ISR holds it. FenceBroker and UnfenceBroker are events that every replica expands
into partition changes (KIP-630's "Amount of Data Replicated"); this index keeps that work
proportional to the partitions the broker hosts, not to the image.
"""

import enum
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import immutables

from kraft.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kraft.metadata.serde import encode_record

NO_LEADER = -1
METADATA_VERSION = "metadata.version"  # Kafka writes this feature first: readers decode by it


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

    The fields are PartitionRecord's version 0 fields after the partition and topic ids, in
    the same order: `PartitionRecord(partition_id, topic_id, *registration)` writes it."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int


class TopicImage(NamedTuple):
    name: str
    id: bytes
    partitions: tuple[PartitionRegistration, ...]  # indexed by partition id


class BrokerRegistration(NamedTuple):
    id: int
    epoch: int
    incarnation_id: bytes
    endpoints: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...]
    rack: str | None
    fenced: bool


_INTERNED: dict[tuple[int, ...], tuple[int, ...]] = {}
_INTERN_LIMIT = 1 << 18


def intern_ids(ids: tuple[int, ...]) -> tuple[int, ...]:
    """The one shared copy of a broker-id list. The table is only a cache: once it grows
    past its limit (a cluster with very many distinct assignments) it starts over, and lists
    interned before simply stay as they are."""
    shared = _INTERNED.get(ids)
    if shared is None:
        if len(_INTERNED) >= _INTERN_LIMIT:
            _INTERNED.clear()
        shared = _INTERNED[ids] = ids
    return shared


_EMPTY: immutables.Map = immutables.Map()


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The cluster metadata as of `offset` (the last record applied; -1 for none), in `epoch`."""

    offset: int = -1
    epoch: int = -1
    features: immutables.Map = field(default=_EMPTY)  # name -> finalized level
    brokers: immutables.Map = field(default=_EMPTY)  # id -> BrokerRegistration
    topics_by_id: immutables.Map = field(default=_EMPTY)  # 16-byte id -> TopicImage
    topics_by_name: immutables.Map = field(default=_EMPTY)  # name -> TopicImage
    brokers_to_isrs: immutables.Map = field(default=_EMPTY)  # broker -> topic id -> partition ids
    configs: immutables.Map = field(default=_EMPTY)  # ConfigResource -> Map(name -> value)
    next_producer_id: int = -1  # first id of the next block; -1 before any allocation

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
        return self.configs.get(resource, _EMPTY)

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics_by_id.values())

    def record_count(self) -> int:
        """How many records a snapshot of this image holds (`image_to_records`), without
        building them: the denominator of the changed-records ratio."""
        return (
            len(self.features)
            + len(self.brokers)
            + len(self.topics_by_id)
            + self.partition_count()
            + sum(len(c) for c in self.configs.values())
            + (1 if self.next_producer_id >= 0 else 0)
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
    the same snapshot bytes: features (metadata.version first), brokers by id, topics by name
    each followed by its partitions, configs by resource and name, then the producer-id block.
    Brokers precede partitions, so loading never derives fencing effects from them."""
    features = sorted(image.features.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0]))
    for name, level in features:
        yield FeatureLevelRecord(name=name, feature_level=level)
    for broker_id in sorted(image.brokers.keys()):
        b = image.brokers[broker_id]
        yield RegisterBrokerRecord(
            broker_id=b.id,
            incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch,
            end_points=b.endpoints,
            features=b.features,
            rack=b.rack,
            fenced=b.fenced,
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
    if image.next_producer_id >= 0:
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id)
