"""Replaying committed records on an image: MetadataDelta, and the derived effect of fencing.

A delta collects the changes of one committed batch on top of a base image (copying only
the topics it touches, and each of those once), then `apply()` makes the next image. If a
record cannot be applied, `replay` raises InvalidRecordError and the delta is dropped: the
base image is untouched, so a batch applies whole or not at all.

Fencing is an event, not a list of partition changes (KIP-630, "Amount of Data Replicated").
Every replica derives the same partition changes from it, in this order and by these rules:

* A broker becomes fenced (FenceBroker, a fenced RegisterBroker, UnregisterBroker): in every
  partition whose ISR holds it, it leaves the ISR, unless it is the last member: an empty
  ISR would lose which replica has all committed data, so the last member stays as the
  "last known ISR" (the role Kafka's KIP-966 gives LastKnownElr) and waits for it to come
  back. If it led the partition, the new leader is the first replica, in replica order,
  that is still in the ISR and is registered and unfenced; if there is none, the partition
  has no leader (-1).
* A broker becomes unfenced (UnfenceBroker, an unfenced RegisterBroker): every partition
  without a leader whose ISR holds it gets a leader by the same election rule. That is a
  clean election: a replica outside the ISR is never elected (Kafka's default,
  unclean.leader.election.enable=false). An unfenced broker does not rejoin ISRs by
  itself; its partition leaders add it back (a PartitionChange) once it has caught up.
* Each partition whose leader or ISR changed gets leader epoch + 1 and partition epoch + 1.

Changed-record tracking for the snapshot ratio (KIP-630 "When to Snapshot"): `changed`
holds the key of every snapshot record that existed in the base image and that this batch
modified or deleted. Records the batch adds are not in it.
"""

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import immutables

from kraft.metadata.errors import InvalidRecordError
from kraft.metadata.image import (
    NO_LEADER,
    BrokerRegistration,
    ConfigResource,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    intern_ids,
)
from kraft.metadata.records import (
    NO_LEADER_CHANGE,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    uuid_str,
)

_EMPTY: immutables.Map = immutables.Map()
_RESOURCE_TYPES = {t.value: t for t in ConfigResourceType}
IndexChanges = dict[int, dict[bytes, tuple[int, ...] | None]]  # broker -> topic id -> partitions (None: gone)


class _TopicChange:
    """A topic being changed by the delta: its partitions as a list, copied once, and the
    ids of the partitions changed or added since (for a topic the base image has)."""

    __slots__ = ("name", "id", "partitions", "base_count", "dirty")

    def __init__(self, name: str, topic_id: bytes, partitions: list[PartitionRegistration], base_count: int) -> None:
        self.name = name
        self.id = topic_id
        self.partitions = partitions
        self.base_count = base_count  # partitions that exist in the base image
        self.dirty: set[int] = set()


class _ConfigChange:
    """A resource's configs being changed by the delta: a copy of the image's, made once, and
    the image's own (a change to a key the image holds is a changed snapshot record)."""

    __slots__ = ("resource", "entries", "base")

    def __init__(self, resource: ConfigResource, base: immutables.Map) -> None:
        self.resource = resource
        self.entries = dict(base)
        self.base = base


def _registration(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    removing: tuple[int, ...],
    adding: tuple[int, ...],
    leader: int,
    leader_recovery_state: int,
    leader_epoch: int,
    partition_epoch: int,
) -> PartitionRegistration:
    """A partition with interned id lists, checked for what every replica relies on when it
    derives fencing: distinct replicas, the ISR among them, the leader in the ISR or none.
    Raises ValueError saying what is wrong; the caller says which partition."""
    replicas, isr = intern_ids(replicas), intern_ids(isr)
    if not replicas or len(set(replicas)) != len(replicas):
        raise ValueError(f"replicas {list(replicas)} must be distinct and not empty")
    if isr is not replicas and (len(set(isr)) != len(isr) or not set(isr) <= set(replicas)):
        raise ValueError(f"ISR {list(isr)} must be distinct replicas of {list(replicas)}")
    if leader != NO_LEADER and leader not in isr:
        raise ValueError(f"leader {leader} is not in the ISR {list(isr)}")
    return PartitionRegistration(
        replicas,
        isr,
        intern_ids(removing) if removing else (),
        intern_ids(adding) if adding else (),
        leader,
        leader_recovery_state,
        leader_epoch,
        partition_epoch,
    )


def _merged(base: immutables.Map, changes: dict) -> immutables.Map:
    """`base` with `changes` applied (None deletes), sharing everything else."""
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


class MetadataDelta:
    """The changes of one batch of records on top of `image`."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.changed: set[tuple] = set()
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[bytes, _TopicChange | None] = {}  # None: removed
        self._names: dict[str, bytes | None] = {}  # topic names created (id) or removed (None)
        self._configs: dict[ConfigResource, _ConfigChange] = {}  # whole new configs per resource
        self._next_producer_id: int | None = None

    # Reads through the delta.

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def _registered(self, broker_id: int, epoch: int, what: str) -> BrokerRegistration:
        broker = self._broker(broker_id)
        if broker is None:
            raise InvalidRecordError(f"{what}: broker {broker_id} is not registered")
        if broker.epoch != epoch:
            raise InvalidRecordError(f"{what}: broker {broker_id} has epoch {broker.epoch}, not {epoch}")
        return broker

    def _is_unfenced(self, broker_id: int) -> bool:
        broker = self._broker(broker_id)
        return broker is not None and not broker.fenced

    def _topic_id(self, name: str) -> bytes | None:
        if name in self._names:
            return self._names[name]
        topic = self.image.topics_by_name.get(name)
        return None if topic is None else topic.id

    def _partitions(self, topic_id: bytes) -> list[PartitionRegistration] | tuple[PartitionRegistration, ...]:
        change = self._topics.get(topic_id)
        return change.partitions if change is not None else self.image.topics_by_id[topic_id].partitions

    def _topic_for_write(self, topic_id: bytes, what: str) -> _TopicChange:
        if topic_id in self._topics:
            change = self._topics[topic_id]
            if change is None:
                raise InvalidRecordError(f"{what}: topic {uuid_str(topic_id)} was removed")
            return change
        base = self.image.topics_by_id.get(topic_id)
        if base is None:
            raise InvalidRecordError(f"{what}: unknown topic id {uuid_str(topic_id)}")
        change = self._topics[topic_id] = _TopicChange(base.name, topic_id, list(base.partitions), len(base.partitions))
        return change

    def _set_partition(self, change: _TopicChange, pid: int, p: PartitionRegistration) -> None:
        if pid < change.base_count:
            self.changed.add(("partition", change.id, pid))
        if change.base_count:
            change.dirty.add(pid)
        change.partitions[pid] = p

    def _isr_holding(self, broker_id: int) -> list[tuple[bytes, tuple[int, ...] | list[int]]]:
        """(topic id, partition ids) of every partition whose ISR holds the broker, as of now:
        the image's index for topics this delta has not touched, a scan of those it has."""
        indexed = self.image.brokers_to_isrs.get(broker_id, _EMPTY)
        found: list[tuple[bytes, tuple[int, ...] | list[int]]] = [
            (tid, pids) for tid, pids in indexed.items() if tid not in self._topics
        ]
        for tid, change in self._topics.items():
            if change is not None:
                pids = [pid for pid, p in enumerate(change.partitions) if broker_id in p.isr]
                if pids:
                    found.append((tid, pids))
        return found

    # Fencing, derived.

    def _elect(self, replicas: tuple[int, ...], isr: tuple[int, ...]) -> int:
        """The first replica, in replica order, in the ISR and unfenced; else no leader."""
        for r in replicas:
            if r in isr and self._is_unfenced(r):
                return r
        return NO_LEADER

    def _derive(self, broker_id: int, update: Callable[[PartitionRegistration], PartitionRegistration | None]) -> None:
        """Applies `update` to every partition whose ISR holds the broker; None is no change."""
        for tid, pids in self._isr_holding(broker_id):
            partitions = self._partitions(tid)
            for pid in pids:
                new = update(partitions[pid])
                if new is not None:
                    change = self._topic_for_write(tid, "fencing")
                    self._set_partition(change, pid, new)
                    partitions = change.partitions

    def _fence_effects(self, broker_id: int) -> None:
        def update(p: PartitionRegistration) -> PartitionRegistration | None:
            isr = intern_ids(tuple(r for r in p.isr if r != broker_id)) if len(p.isr) > 1 else p.isr
            leader = self._elect(p.replicas, isr) if p.leader == broker_id else p.leader
            if isr is p.isr and leader == p.leader:
                return None
            return p._replace(
                isr=isr, leader=leader, leader_epoch=p.leader_epoch + 1, partition_epoch=p.partition_epoch + 1
            )

        self._derive(broker_id, update)

    def _unfence_effects(self, broker_id: int) -> None:
        def update(p: PartitionRegistration) -> PartitionRegistration | None:
            if p.leader != NO_LEADER:
                return None
            leader = self._elect(p.replicas, p.isr)
            if leader == NO_LEADER:
                return None
            return p._replace(leader=leader, leader_epoch=p.leader_epoch + 1, partition_epoch=p.partition_epoch + 1)

        self._derive(broker_id, update)

    def _set_broker(self, broker_id: int, registration: BrokerRegistration | None) -> None:
        if broker_id in self.image.brokers:
            self.changed.add(("broker", broker_id))
        self._brokers[broker_id] = registration
        if registration is not None:
            if registration.fenced:
                self._fence_effects(broker_id)
            else:
                self._unfence_effects(broker_id)

    # One handler per record type.

    def _register_broker(self, r: RegisterBrokerRecord) -> None:
        registration = BrokerRegistration(
            r.broker_id, r.broker_epoch, r.incarnation_id, r.end_points, r.features, r.rack, r.fenced
        )
        self._set_broker(r.broker_id, registration)

    def _unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        broker = self._registered(r.broker_id, r.broker_epoch, "UnregisterBroker")
        if not broker.fenced:
            self._set_broker(r.broker_id, broker._replace(fenced=True))
        self._set_broker(r.broker_id, None)

    def _fence_broker(self, r: FenceBrokerRecord) -> None:
        broker = self._registered(r.id, r.epoch, "FenceBroker")
        self._set_broker(r.id, broker._replace(fenced=True))

    def _unfence_broker(self, r: UnfenceBrokerRecord) -> None:
        broker = self._registered(r.id, r.epoch, "UnfenceBroker")
        self._set_broker(r.id, broker._replace(fenced=False))

    def _topic(self, r: TopicRecord) -> None:
        if self._topic_id(r.name) is not None:
            raise InvalidRecordError(f"TopicRecord: a topic named {r.name!r} already exists")
        if r.topic_id in self._topics or r.topic_id in self.image.topics_by_id:
            raise InvalidRecordError(f"TopicRecord: topic id {uuid_str(r.topic_id)} is already in use")
        self._topics[r.topic_id] = _TopicChange(r.name, r.topic_id, [], 0)
        self._names[r.name] = r.topic_id

    def _partition(self, r: PartitionRecord) -> None:
        change = self._topic_for_write(r.topic_id, "PartitionRecord")
        count = len(change.partitions)
        try:
            p = _registration(
                r.replicas,
                r.isr,
                r.removing_replicas,
                r.adding_replicas,
                r.leader,
                r.leader_recovery_state,
                r.leader_epoch,
                r.partition_epoch,
            )
            if not 0 <= r.partition_id <= count:
                raise ValueError(f"the topic has {count} partitions and partition ids are contiguous")
        except ValueError as e:
            raise InvalidRecordError(f"PartitionRecord {change.name}-{r.partition_id}: {e}") from None
        if r.partition_id == count:
            change.partitions.append(p)
            if change.base_count:
                change.dirty.add(count)
        else:
            self._set_partition(change, r.partition_id, p)

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        change = self._topic_for_write(r.topic_id, "PartitionChangeRecord")
        try:
            if not 0 <= r.partition_id < len(change.partitions):
                raise ValueError("no such partition")
            p = change.partitions[r.partition_id]
            if r.leader == NO_LEADER_CHANGE:
                leader, leader_epoch = p.leader, p.leader_epoch
            else:
                leader, leader_epoch = r.leader, p.leader_epoch + 1
            merged = _registration(
                p.replicas if r.replicas is None else r.replicas,
                p.isr if r.isr is None else r.isr,
                p.removing_replicas if r.removing_replicas is None else r.removing_replicas,
                p.adding_replicas if r.adding_replicas is None else r.adding_replicas,
                leader,
                p.leader_recovery_state if r.leader_recovery_state == -1 else r.leader_recovery_state,
                leader_epoch,
                p.partition_epoch + 1,
            )
        except ValueError as e:
            raise InvalidRecordError(f"PartitionChangeRecord {change.name}-{r.partition_id}: {e}") from None
        self._set_partition(change, r.partition_id, merged)

    def _remove_topic(self, r: RemoveTopicRecord) -> None:
        change = self._topic_for_write(r.topic_id, "RemoveTopicRecord")
        if r.topic_id in self.image.topics_by_id:
            self.changed.add(("topic", r.topic_id))
            self.changed.update(("partition", r.topic_id, pid) for pid in range(change.base_count))
            self._topics[r.topic_id] = None
        else:  # created by this same batch: as if it never was
            del self._topics[r.topic_id]
        self._names[change.name] = None
        configs = self._config_for_write(ConfigResource(ConfigResourceType.TOPIC, change.name))
        for key in list(configs.entries):
            self._set_config(configs, key, None)

    def _config_for_write(self, resource: ConfigResource) -> _ConfigChange:
        configs = self._configs.get(resource)
        if configs is None:
            configs = self._configs[resource] = _ConfigChange(resource, self.image.configs.get(resource, _EMPTY))
        return configs

    def _set_config(self, configs: _ConfigChange, key: str, value: str | None) -> None:
        if key in configs.base:
            resource = configs.resource
            self.changed.add(("config", resource.type, resource.name, key))
        if value is None:
            configs.entries.pop(key, None)
        else:
            configs.entries[key] = value

    def _config(self, r: ConfigRecord) -> None:
        # A ConfigResource equals (and hashes as) the plain tuple of its int type and name, so
        # a resource this batch already changed is found without making one: the cluster's
        # write load is a stream of ConfigRecords, most of them for the same few resources.
        configs = self._configs.get((r.resource_type, r.resource_name))
        if configs is None:
            kind = _RESOURCE_TYPES.get(r.resource_type)  # not ConfigResourceType(): 10x the cost
            if kind is None:
                raise InvalidRecordError(f"ConfigRecord: unknown resource type {r.resource_type}")
            configs = self._config_for_write(ConfigResource(kind, r.resource_name))
        self._set_config(configs, r.name, r.value)

    def _feature_level(self, r: FeatureLevelRecord) -> None:
        if r.name in self.image.features:
            self.changed.add(("feature", r.name))
        self._features[r.name] = r.feature_level if r.feature_level > 0 else None  # level 0 removes

    def _producer_ids(self, r: ProducerIdsRecord) -> None:
        current = self.image.next_producer_id if self._next_producer_id is None else self._next_producer_id
        if r.next_producer_id <= current:
            raise InvalidRecordError(
                f"ProducerIdsRecord: next producer id {r.next_producer_id} does not move past {current}"
            )
        if self.image.next_producer_id >= 0:
            self.changed.add(("producer_ids",))
        self._next_producer_id = r.next_producer_id

    _HANDLERS: ClassVar[dict[type, Callable[["MetadataDelta", Any], None]]] = {
        RegisterBrokerRecord: _register_broker,
        UnregisterBrokerRecord: _unregister_broker,
        FenceBrokerRecord: _fence_broker,
        UnfenceBrokerRecord: _unfence_broker,
        TopicRecord: _topic,
        PartitionRecord: _partition,
        PartitionChangeRecord: _partition_change,
        RemoveTopicRecord: _remove_topic,
        ConfigRecord: _config,
        FeatureLevelRecord: _feature_level,
        ProducerIdsRecord: _producer_ids,
    }

    def replay(self, record: MetadataRecord) -> None:
        """Applies one record to the delta; InvalidRecordError if it contradicts the image."""
        self.replay_all((record,))

    def replay_all(self, records: Iterable[MetadataRecord]) -> "MetadataDelta":
        """Applies records in order. The dispatch is inline, not a replay() per record: this
        loop runs for every committed record on every replica."""
        handlers = self._HANDLERS
        for record in records:
            handler = handlers.get(type(record))
            if handler is None:
                raise InvalidRecordError(f"not a metadata record: {record!r}")
            handler(self, record)
        return self

    # The next image.

    def apply(self, offset: int, epoch: int) -> MetadataImage:
        """The image with every replayed record applied, as of `offset` in `epoch`."""
        image = self.image
        by_id, by_name, isrs = self._apply_topics()
        configs = _merged(
            image.configs,
            {res: (immutables.Map(c.entries) if c.entries else None) for res, c in self._configs.items()},
        )
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            features=_merged(image.features, self._features),
            brokers=_merged(image.brokers, self._brokers),
            topics_by_id=by_id,
            topics_by_name=by_name,
            brokers_to_isrs=isrs,
            configs=configs,
            next_producer_id=image.next_producer_id if self._next_producer_id is None else self._next_producer_id,
        )

    def _apply_topics(self) -> tuple[immutables.Map, immutables.Map, immutables.Map]:
        image = self.image
        if not self._topics:
            return image.topics_by_id, image.topics_by_name, image.brokers_to_isrs
        by_id, by_name = image.topics_by_id.mutate(), image.topics_by_name.mutate()
        index: IndexChanges = {}
        for tid, change in self._topics.items():  # removals first, so a removed name can be reused
            if change is None:
                old = by_id.pop(tid)
                del by_name[old.name]
                for p in old.partitions:
                    for b in p.isr:
                        index.setdefault(b, {})[tid] = None
        new_by_id: dict[bytes, TopicImage] = {}
        for tid, change in self._topics.items():
            if change is None:
                continue
            topic = new_by_id[tid] = TopicImage(change.name, tid, tuple(change.partitions))
            if change.base_count:
                _reindex_dirty(image, change, index)
            else:
                _index_new_topic(index, tid, topic.partitions)
        by_id.update(new_by_id)
        by_name.update({topic.name: topic for topic in new_by_id.values()})
        return by_id.finish(), by_name.finish(), _apply_index(image.brokers_to_isrs, index)


def _index_new_topic(index: IndexChanges, tid: bytes, partitions: tuple) -> None:
    for pid, p in enumerate(partitions):
        for b in p.isr:
            entries = index.get(b)
            if entries is None:
                entries = index[b] = {}
            pids = entries.get(tid)
            entries[tid] = intern_ids((pid,)) if pids is None else pids + (pid,)


def _reindex_dirty(image: MetadataImage, change: _TopicChange, index: IndexChanges) -> None:
    """Index updates for the changed partitions of a topic the image has: only the brokers
    that joined or left an ISR, so fencing a broker costs what it hosts, not its topics' size."""
    tid = change.id
    base = image.topics_by_id[tid].partitions
    moves: dict[int, tuple[set[int], set[int]]] = {}  # broker -> (partitions joined, left)
    for pid in change.dirty:
        old = set(base[pid].isr) if pid < len(base) else set()
        new = set(change.partitions[pid].isr)
        for b in new - old:
            moves.setdefault(b, (set(), set()))[0].add(pid)
        for b in old - new:
            moves.setdefault(b, (set(), set()))[1].add(pid)
    for b, (joined, left) in moves.items():
        current = image.brokers_to_isrs.get(b, _EMPTY).get(tid, ())
        pids = tuple(sorted((set(current) - left) | joined))
        index.setdefault(b, {})[tid] = intern_ids(pids) if pids else None


def _apply_index(base: immutables.Map, changes: IndexChanges) -> immutables.Map:
    """`brokers_to_isrs` with per-broker changes, touching only the entries that differ."""
    out = base.mutate()
    for b, entries in changes.items():
        current = base.get(b, _EMPTY)
        if not current:  # a broker new to the index: its entries can only be additions
            out[b] = immutables.Map(entries)
            continue
        merged = _merged(current, {tid: pids for tid, pids in entries.items() if current.get(tid) != pids})
        if merged:
            out[b] = merged
        else:
            out.pop(b, None)
    return out.finish()


def apply_records(image: MetadataImage, records: Iterable[MetadataRecord], *, offset: int, epoch: int) -> MetadataImage:
    """The image after `records` (one committed batch), as of `offset` (its last offset)."""
    return MetadataDelta(image).replay_all(records).apply(offset, epoch)

