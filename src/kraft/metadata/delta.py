"""Replaying committed records on an image: MetadataDelta, and the derived effect of fencing.

A delta collects the changes of one committed batch on top of a base image (copying only
the topics it touches, and each of those once), then `apply()` makes the next image. If a
record cannot be applied, `replay` raises InvalidRecordError and the delta is dropped: the
base image is untouched, so a batch applies whole or not at all.

Records replay by Kafka's rules (its MetadataDelta and PartitionRegistration.merge), so a
replica of a Kafka cluster's log builds the image Kafka builds: fencing, unfencing and
registering a broker change that broker only, and the partition changes they cause come as
PartitionChangeRecords the controller wrote beside them. A PartitionChangeRecord merges as
Kafka's does: leader epoch + 1 when it names a leader, partition epoch + 1 always
(`partition_replay` builds and merges partitions; `isr_index` keeps the image's index of
which ISRs hold each broker).

A log that starts with the `kraft.derived.fencing` feature (the controller's option
`kraft.metadata.derived.fencing`) asks for the other way, KIP-630's: fencing is an event,
not a list of partition changes ("Amount of Data Replicated"), and every replica derives
the same partition changes from it, in this order and by these rules:

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

import kraft.metadata.isr_index as isr_index
import kraft.metadata.partition_replay as partition_replay
from kraft.metadata._collector import untracked
from kraft.metadata.image import (
    DERIVED_FENCING,
    EMPTY_MAP,
    NO_LEADER,
    BrokerRegistration,
    ConfigResource,
    ConfigResourceType,
    ControllerRegistration,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    ScramCredential,
    TopicImage,
    intern_ids,
    kafka_uuid_order,
    merged,
)
from kraft.metadata.metadata_errors import InvalidRecordError
from kraft.metadata.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
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
    uuid_str,
)

# The image's keyed maps a delta changes by put and remove: (image attribute, changed-key tag).
_MAPS = {"controllers": "controller", "acls": "acl", "scram_credentials": "scram", "delegation_tokens": "token"}
_RESOURCE_TYPES = {t.value: t for t in ConfigResourceType}


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


class MetadataDelta:
    """The changes of one batch of records on top of `image`. `derive_fencing` replays by
    KIP-630's rules whatever the log asks (what a controller uses to work out the partition
    changes it writes for Kafka's)."""

    def __init__(self, image: MetadataImage, derive_fencing: bool = False) -> None:
        self.image = image
        self._derive_fencing = derive_fencing
        self.changed: set[tuple] = set()
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[bytes, _TopicChange | None] = {}  # None: removed
        self._names: dict[str, bytes | None] = {}  # topic names created (id) or removed (None)
        # Whole new configs per resource. Keyed by ConfigResource, which also answers to the
        # plain (type, name) tuple it equals (see _config), hence the key type.
        self._configs: dict[tuple[int, str], _ConfigChange] = {}
        self._next_producer_id: int | None = None
        self._maps: dict[str, dict[Any, Any]] = {name: {} for name in _MAPS}  # key -> value, None removes
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}  # whole new quotas per entity
        self._zk_migration_state: int | None = None

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
        change.partitions[pid] = untracked(p)

    def _isr_holding(self, broker_id: int) -> list[tuple[bytes, tuple[int, ...] | list[int]]]:
        """(topic id, partition ids) of every partition whose ISR holds the broker, as of now:
        the image's index for topics this delta has not touched, a scan of those it has."""
        indexed = self.image.brokers_to_isrs.get(broker_id, EMPTY_MAP)
        found: list[tuple[bytes, tuple[int, ...] | list[int]]] = [
            (tid, pids) for tid, pids in indexed.items() if tid not in self._topics
        ]
        for tid, change in self._topics.items():
            if change is not None:
                pids = [pid for pid, p in enumerate(change.partitions) if broker_id in p.isr]
                if pids:
                    found.append((tid, pids))
        return found

    def _feature(self, name: str) -> int:
        level = self._features[name] if name in self._features else self.image.features.get(name)
        return level or 0

    # Fencing, derived (only in a log with the kraft.derived.fencing feature).

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
            change = None
            for pid in pids:
                new = update(partitions[pid])
                if new is not None:
                    if change is None:
                        change = self._topic_for_write(tid, "fencing")
                        partitions = change.partitions
                    self._set_partition(change, pid, new)

    def _fence_effects(self, broker_id: int) -> None:
        def update(p: PartitionRegistration) -> PartitionRegistration | None:
            isr = intern_ids(tuple([r for r in p.isr if r != broker_id])) if len(p.isr) > 1 else p.isr
            leader = self._elect(p.replicas, isr) if p.leader == broker_id else p.leader
            if isr is p.isr and leader == p.leader:
                return None
            return partition_replay.with_leader_and_isr(p, isr, leader, p.leader_epoch + 1)

        self._derive(broker_id, update)

    def _unfence_effects(self, broker_id: int) -> None:
        def update(p: PartitionRegistration) -> PartitionRegistration | None:
            if p.leader != NO_LEADER:
                return None
            leader = self._elect(p.replicas, p.isr)
            if leader == NO_LEADER:
                return None
            return partition_replay.with_leader_and_isr(p, p.isr, leader, p.leader_epoch + 1)

        self._derive(broker_id, update)

    def _set_broker(self, broker_id: int, registration: BrokerRegistration | None) -> None:
        if broker_id in self.image.brokers:
            self.changed.add(("broker", broker_id))
        self._brokers[broker_id] = registration
        if registration is not None and (self._derive_fencing or self._feature(DERIVED_FENCING) >= 1):
            if registration.fenced:
                self._fence_effects(broker_id)
            else:
                self._unfence_effects(broker_id)

    # One handler per record type.

    def _register_broker(self, r: RegisterBrokerRecord) -> None:
        registration = BrokerRegistration(
            r.broker_id, r.broker_epoch, r.incarnation_id, r.end_points, r.features, r.rack, r.fenced,
            r.in_controlled_shutdown, r.is_migrating_zk_broker, kafka_uuid_order(r.log_dirs),
        )
        self._set_broker(r.broker_id, registration)

    def _broker_registration_change(self, r: BrokerRegistrationChangeRecord) -> None:
        broker = self._registered(r.broker_id, r.broker_epoch, "BrokerRegistrationChange")
        changes: dict[str, Any] = {}
        if r.fenced in (1, -1):  # Kafka's BrokerRegistrationFencingChange: FENCE, UNFENCE
            changes["fenced"] = r.fenced == 1
        elif r.fenced != 0:
            raise InvalidRecordError(f"BrokerRegistrationChange: fenced value {r.fenced} is not -1, 0 or 1")
        if r.in_controlled_shutdown == 1:
            changes["in_controlled_shutdown"] = True
        elif r.in_controlled_shutdown != 0:
            raise InvalidRecordError(
                f"BrokerRegistrationChange: in_controlled_shutdown value {r.in_controlled_shutdown} is not 0 or 1")
        if r.log_dirs:
            changes["log_dirs"] = kafka_uuid_order(r.log_dirs)
        if changes:
            self._set_broker(r.broker_id, broker._replace(**changes))

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
            p = partition_replay.from_record(r)
            if not 0 <= r.partition_id <= count:
                raise ValueError(f"the topic has {count} partitions and partition ids are contiguous")
        except ValueError as e:
            raise InvalidRecordError(f"PartitionRecord {change.name}-{r.partition_id}: {e}") from None
        if r.partition_id == count:
            change.partitions.append(untracked(p))
            if change.base_count:
                change.dirty.add(count)
        else:
            self._set_partition(change, r.partition_id, p)

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        """Kafka's PartitionRegistration.merge (see partition_replay.merge)."""
        change = self._topic_for_write(r.topic_id, "PartitionChangeRecord")
        try:
            if not 0 <= r.partition_id < len(change.partitions):
                raise ValueError("no such partition")
            updated = partition_replay.merge(change.partitions[r.partition_id], r)
        except ValueError as e:
            raise InvalidRecordError(f"PartitionChangeRecord {change.name}-{r.partition_id}: {e}") from None
        self._set_partition(change, r.partition_id, updated)

    def _clear_elr(self, r: ClearElrRecord) -> None:
        """Kafka's TopicsDelta: every partition of the topic (of all topics, for an empty
        name) that has eligible leader replicas loses them, with partition epoch + 1."""
        if r.topic_name:
            topic_id = self._topic_id(r.topic_name)
            if topic_id is None:
                raise InvalidRecordError(f"ClearElrRecord: unknown topic {r.topic_name!r}")
            topic_ids = [topic_id]
        else:
            topic_ids = [tid for tid in {*self.image.topics_by_id.keys(), *self._topics} if self._topics.get(tid, 1)]
        for tid in topic_ids:
            for pid, p in enumerate(self._partitions(tid)):
                if p.eligible_leader_replicas is not None or p.last_known_elr is not None:
                    change = self._topic_for_write(tid, "ClearElrRecord")
                    cleared = p._replace(eligible_leader_replicas=None, last_known_elr=None,
                                         partition_epoch=p.partition_epoch + 1)
                    self._set_partition(change, pid, cleared)

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
            configs = self._configs[resource] = _ConfigChange(resource, self.image.configs.get(resource, EMPTY_MAP))
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

    def _client_quota(self, r: ClientQuotaRecord) -> None:
        entity: QuotaEntity = tuple(sorted((e.entity_type, e.entity_name) for e in r.entity))
        quotas = self._quotas.get(entity)
        if quotas is None:
            quotas = self._quotas[entity] = dict(self.image.client_quotas.get(entity, EMPTY_MAP))
        if r.key in self.image.client_quotas.get(entity, EMPTY_MAP):
            self.changed.add(("quota", entity, r.key))
        if r.remove:
            quotas.pop(r.key, None)
        else:
            quotas[r.key] = r.value

    def _put(self, name: str, key: Any, value: Any, what: str) -> None:
        """A put (or, with None, a removal) in one of the image's keyed maps (see _MAPS)."""
        changes = self._maps[name]
        exists = changes[key] is not None if key in changes else key in getattr(self.image, name)
        if value is None and not exists:
            raise InvalidRecordError(f"{what}: no such entry {key!r}")
        if key in getattr(self.image, name):
            self.changed.add((_MAPS[name], key))
        changes[key] = value

    def _register_controller(self, r: RegisterControllerRecord) -> None:
        registration = ControllerRegistration(
            r.controller_id, r.incarnation_id, r.zk_migration_ready, r.end_points, r.features
        )
        self._put("controllers", r.controller_id, registration, "RegisterController")

    def _unregister_controller(self, r: UnregisterControllerRecord) -> None:
        self._put("controllers", r.controller_id, None, "UnregisterController")

    def _acl(self, r: AccessControlEntryRecord) -> None:
        self._put("acls", r.id, r, "AccessControlEntry")

    def _remove_acl(self, r: RemoveAccessControlEntryRecord) -> None:
        self._put("acls", r.id, None, "RemoveAccessControlEntry")

    def _scram(self, r: UserScramCredentialRecord) -> None:
        credential = ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)
        self._put("scram_credentials", (r.name, r.mechanism), credential, "UserScramCredential")

    def _remove_scram(self, r: RemoveUserScramCredentialRecord) -> None:
        self._put("scram_credentials", (r.name, r.mechanism), None, "RemoveUserScramCredential")

    def _token(self, r: DelegationTokenRecord) -> None:
        self._put("delegation_tokens", r.token_id, r, "DelegationToken")

    def _remove_token(self, r: RemoveDelegationTokenRecord) -> None:
        self._put("delegation_tokens", r.token_id, None, "RemoveDelegationToken")

    def _zk_migration(self, r: ZkMigrationStateRecord) -> None:
        if self.image.zk_migration_state >= 0:
            self.changed.add(("zk_migration",))
        self._zk_migration_state = r.zk_migration_state

    def _no_op(self, r: NoOpRecord) -> None:
        """Only moves the offset (the image's offset is the batch's)."""

    def _transaction_marker(self, r: Any) -> None:
        raise InvalidRecordError(f"{type(r).__name__}: transactions are replayed by MetadataCache, not a delta")

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
        BrokerRegistrationChangeRecord: _broker_registration_change,
        ClearElrRecord: _clear_elr,
        ClientQuotaRecord: _client_quota,
        RegisterControllerRecord: _register_controller,
        UnregisterControllerRecord: _unregister_controller,
        AccessControlEntryRecord: _acl,
        RemoveAccessControlEntryRecord: _remove_acl,
        UserScramCredentialRecord: _scram,
        RemoveUserScramCredentialRecord: _remove_scram,
        DelegationTokenRecord: _token,
        RemoveDelegationTokenRecord: _remove_token,
        ZkMigrationStateRecord: _zk_migration,
        NoOpRecord: _no_op,
        BeginTransactionRecord: _transaction_marker,
        EndTransactionRecord: _transaction_marker,
        AbortTransactionRecord: _transaction_marker,
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
        configs = merged(
            image.configs,
            {c.resource: (immutables.Map(c.entries) if c.entries else None) for c in self._configs.values()},
        )
        quotas = merged(image.client_quotas, {e: (immutables.Map(q) if q else None) for e, q in self._quotas.items()})
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            features=merged(image.features, self._features),
            brokers=merged(image.brokers, self._brokers),
            topics_by_id=by_id,
            topics_by_name=by_name,
            brokers_to_isrs=isrs,
            configs=configs,
            next_producer_id=image.next_producer_id if self._next_producer_id is None else self._next_producer_id,
            client_quotas=quotas,
            zk_migration_state=(
                image.zk_migration_state if self._zk_migration_state is None else self._zk_migration_state
            ),
            **{name: merged(getattr(image, name), changes) for name, changes in self._maps.items()},
        )

    def _apply_topics(self) -> tuple[immutables.Map, immutables.Map, immutables.Map]:
        image = self.image
        if not self._topics:
            return image.topics_by_id, image.topics_by_name, image.brokers_to_isrs
        by_id, by_name = image.topics_by_id.mutate(), image.topics_by_name.mutate()
        index: isr_index.IndexChanges = {}
        for tid, change in self._topics.items():  # removals first, so a removed name can be reused
            if change is None:
                old = by_id.pop(tid)
                del by_name[old.name]
                isr_index.removed_topic(index, tid, old.partitions)
        new_by_id: dict[bytes, TopicImage] = {}
        changed: list[tuple[bytes, list[PartitionRegistration], set[int]]] = []
        for tid, change in self._topics.items():
            if change is None:
                continue
            topic = new_by_id[tid] = untracked(TopicImage(change.name, tid, tuple(change.partitions)))
            if change.base_count:
                changed.append((tid, change.partitions, change.dirty))
            else:
                isr_index.added_topic(index, tid, topic.partitions)
        isr_index.changed_partitions(index, image, changed)
        by_id.update(new_by_id)
        by_name.update({topic.name: topic for topic in new_by_id.values()})
        return by_id.finish(), by_name.finish(), isr_index.applied(image.brokers_to_isrs, index)


def partition_changes(image: MetadataImage,
                      records: Iterable[MetadataRecord]) -> tuple[list[PartitionChangeRecord], MetadataDelta]:
    """The PartitionChangeRecords that write down what KIP-630's fencing rules derive from
    `records` (fencing, unfencing, registering a broker): what Kafka's controller writes
    beside them, so that Kafka's replay (which derives nothing) ends where derivation would.
    Each names the leader whenever the leader or the ISR changed, so the leader epoch moves
    as derivation moves it.

    And the delta that derived them: `records` and the changes replayed by Kafka's rules
    make the same image as this delta (tests/metadata/test_kafka_replay.py holds them
    equal), so the controller applies it to its working image rather than replaying what
    it has just worked out (a broker fence is thousands of partition changes)."""
    delta = MetadataDelta(image, derive_fencing=True).replay_all(records)
    changes = []
    for tid, change in delta._topics.items():
        if change is None or not change.base_count:
            continue
        base = image.topics_by_id[tid].partitions
        for pid in sorted(change.dirty):
            old, new = base[pid], change.partitions[pid]
            if (old.isr, old.leader) != (new.isr, new.leader):
                changes.append(PartitionChangeRecord(
                    partition_id=pid, topic_id=tid, isr=new.isr if new.isr != old.isr else None, leader=new.leader,
                ))
    return changes, delta


def apply_records(image: MetadataImage, records: Iterable[MetadataRecord], *, offset: int, epoch: int) -> MetadataImage:
    """The image after `records` (one committed batch), as of `offset` (its last offset)."""
    return MetadataDelta(image).replay_all(records).apply(offset, epoch)

