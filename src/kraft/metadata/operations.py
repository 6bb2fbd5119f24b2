"""The controller's operations: validate an admin request against an image, produce records.

Every operation is a pure function of an image and its arguments. It either raises
ControllerError (a Kafka error code and a message) having produced nothing, or returns a
`ControllerResult`: the records to append and the answer to give once they are committed.
Appending, waiting for the commit and failing on a leader change are the caller's (the
Raft wiring's). Operations that run before earlier results commit must see those records:
validate against `apply_records(image, earlier.records, ...)` rather than the committed image.

The `create_topics` / `delete_topics` forms take many topics, as Kafka's requests do, and
answer per topic: one bad topic does not stop the others, and adds no records. A name given
twice in one request is refused every time it appears, as Kafka does.

One operation writes at most MAX_RECORDS_PER_USER_OP records (Kafka's QuorumController
bound, 10 000), all in one batch: a request that would write more is refused as a whole
with OperationTooLargeError (POLICY_VIOLATION), before any record is built, so a topic of
two billion partitions costs nothing.
"""

import random
import re
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kraft.metadata.configs import (
    CLUSTER_METADATA_CONFIGS,
    CLUSTER_METADATA_TOPIC,
    AlterConfigOp,
    check_configs,
    incremental_alter,
)
from kraft.metadata.delta import MetadataDelta, partition_changes
from kraft.metadata.image import (
    DERIVED_FENCING,
    BrokerRegistration,
    ConfigResource,
    ConfigResourceType,
    MetadataImage,
)
from kraft.metadata.metadata_errors import ControllerError, Errors, OperationTooLargeError
from kraft.metadata.placement import assign_replicas, new_topic_id
from kraft.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from kraft.metadata.registration_features import registered_features

T = TypeVar("T")
U = TypeVar("U")

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP
_INT16_MAX = 2**15 - 1
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: tuple[MetadataRecord, ...]
    response: T
    # The records' effect on the image the operation read, when the operation worked it out
    # already (a broker's fencing: see _with_partition_changes), so it is not replayed again.
    prepared: MetadataDelta | None = None

    def applied_to(self, image: MetadataImage, *, offset: int, epoch: int) -> tuple[MetadataImage, set[tuple]]:
        """The image after these records, as of `offset` (what the controller's working image
        becomes once they are appended), and the keys they changed (KIP-630's count).
        InvalidRecordError if they do not apply."""
        prepared = self.prepared
        delta = prepared if prepared is not None and prepared.image is image else MetadataDelta(image).replay_all(
            self.records)
        return delta.apply(offset, epoch), delta.changed


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str | None] = field(default_factory=dict)  # None: a null value, refused
    # A manual assignment: (partition index, replicas with the leader first) per partition;
    # num_partitions and replication_factor must then be -1.
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: bytes
    assignment: tuple[tuple[int, ...], ...]  # replicas per partition, the leader first


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """CreatePartitions for one topic: its new total count, and optionally the replicas of
    each partition added (the leader first)."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """Producer ids [first, first + size) handed to one broker."""

    broker_id: int
    first: int
    size: int


def check_record_count(count: int) -> None:
    """Refuses an operation that would write more records than one user operation may."""
    if count > MAX_RECORDS_PER_USER_OP:
        raise OperationTooLargeError(
            Errors.POLICY_VIOLATION,
            f"Unable to perform excessively large batch operation: it would write {count} records, "
            f"more than the {MAX_RECORDS_PER_USER_OP} one operation may",
        )


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: 1 to 249 of [a-zA-Z0-9._-], and not "." or ".."."""
    if not name:
        raise ControllerError(Errors.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ControllerError(Errors.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ControllerError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise ControllerError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )
    if name == CLUSTER_METADATA_TOPIC:
        raise ControllerError(Errors.INVALID_TOPIC_EXCEPTION, f"{name} is the metadata log's name and is reserved")


# ---------------------------------------------------------------------------- topics


def create_topic(image: MetadataImage, topic: NewTopic, rng: random.Random) -> ControllerResult[CreatedTopic]:
    """TopicRecord, its ConfigRecords and one PartitionRecord per partition, replicas spread
    over the unfenced brokers or as assigned; the ISR is the unfenced replicas, the leader
    the first of them."""
    validate_topic_name(topic.name)
    if image.topic(topic.name) is not None:
        raise ControllerError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    if topic.assignments:
        assignment = _manual_assignment(image, topic)
    else:
        assignment = _placed_assignment(image, topic, rng)
    configs = {name: value for name, value in topic.configs.items() if value is not None}
    if len(configs) < len(topic.configs):
        null = sorted(name for name in topic.configs if name not in configs)
        raise ControllerError(Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(null)}")
    check_configs(ConfigResourceType.TOPIC, configs)
    topic_id = new_topic_id(rng, image.topics_by_id)
    active = set(image.unfenced_brokers())
    records: list[MetadataRecord] = [TopicRecord(name=topic.name, topic_id=topic_id)]
    records += [
        ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=topic.name, name=k, value=v)
        for k, v in sorted(configs.items())
    ]
    for pid, replicas in enumerate(assignment):
        isr = tuple(r for r in replicas if r in active)
        records.append(PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=tuple(replicas), isr=isr,
                                       leader=isr[0], leader_epoch=0, partition_epoch=0))
    return ControllerResult(tuple(records), CreatedTopic(topic.name, topic_id, tuple(assignment)))


def _placed_assignment(image: MetadataImage, topic: NewTopic, rng: random.Random) -> list[tuple[int, ...]]:
    """The replicas of each partition, spread over the unfenced brokers."""
    if not 1 <= topic.num_partitions <= _INT32_MAX:
        raise ControllerError(
            Errors.INVALID_PARTITIONS, f"Number of partitions was set to an invalid value: {topic.num_partitions}"
        )
    if not 1 <= topic.replication_factor <= _INT16_MAX:
        raise ControllerError(
            Errors.INVALID_REPLICATION_FACTOR,
            f"Replication factor must be larger than 0, got {topic.replication_factor}",
        )
    check_record_count(1 + len(topic.configs) + topic.num_partitions)
    brokers = image.unfenced_brokers()
    if topic.replication_factor > len(brokers):
        raise ControllerError(
            Errors.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {topic.replication_factor} time(s): the target replication "
            f"factor of {topic.replication_factor} cannot be reached because only {len(brokers)} broker(s) "
            "are registered and unfenced.",
        )
    return [tuple(r) for r in assign_replicas(brokers, topic.num_partitions, topic.replication_factor, rng)]


def _manual_assignment(image: MetadataImage, topic: NewTopic) -> list[tuple[int, ...]]:
    """Kafka's ReplicationControlManager.createTopic with assignments: the counts left to
    the assignment (-1), each partition once, every partition checked as CreatePartitions
    checks one (the first one's replication factor for the others), indexes 0..n-1."""
    if topic.replication_factor != -1:
        raise ControllerError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                      "replication factor was not set to -1.")
    if topic.num_partitions != -1:
        raise ControllerError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                      "numPartitions was not set to -1.")
    check_record_count(1 + len(topic.configs) + len(topic.assignments))
    parts: dict[int, tuple[int, ...]] = {}
    replication_factor = None
    for index, replicas in topic.assignments:
        if index in parts:
            raise ControllerError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"Found multiple manual partition assignments for partition {index}")
        parts[index] = _checked_assignment(image, replicas, replication_factor, index)
        replication_factor = len(replicas)
    if sorted(parts) != list(range(len(parts))):
        raise ControllerError(Errors.INVALID_REPLICA_ASSIGNMENT,
                              "partitions should be a consecutive 0-based integer sequence")
    return [parts[i] for i in range(len(parts))]


def delete_topic(image: MetadataImage, name: str) -> ControllerResult[bytes]:
    """RemoveTopicRecord; replaying it drops the topic's partitions and configs too."""
    topic = image.topic(name)
    if topic is None:
        raise ControllerError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"This server does not host this topic: {name}")
    return ControllerResult((RemoveTopicRecord(topic_id=topic.id),), topic.id)


def _each(
    image: MetadataImage,
    items: Sequence[U],
    name_of: Callable[[U], Hashable],
    op: Callable[[MetadataImage, U], ControllerResult[T]],
    duplicate: str = "Duplicate topic name.",
) -> ControllerResult[list[T | ControllerError]]:
    """Runs `op` per item, each against the image as the previous successes left it; an item
    whose name another item shares is refused, every one of them (INVALID_REQUEST with the
    `duplicate` message). All the records form one operation, committed whole. They are
    replayed once, into the delta the result carries as `prepared`; an image is made of it
    only for an item that follows."""
    names = [name_of(item) for item in items]
    repeated = {name for name, count in Counter(names).items() if count > 1}
    records: list[MetadataRecord] = []
    outcomes: list[T | ControllerError] = []
    delta = MetadataDelta(image)
    current = image  # as the successes so far leave it
    for i, (item, name) in enumerate(zip(items, names, strict=True)):
        if name in repeated:
            outcomes.append(ControllerError(Errors.INVALID_REQUEST, duplicate))
            continue
        try:
            result = op(current, item)
        except OperationTooLargeError:
            raise
        except ControllerError as e:
            outcomes.append(e)
            continue
        records += result.records
        check_record_count(len(records))
        outcomes.append(result.response)
        if result.records:
            delta.replay_all(result.records)
            if i + 1 < len(items):
                current = delta.apply(image.offset, image.epoch)
    return ControllerResult(tuple(records), outcomes, prepared=delta)


def create_topics(
    image: MetadataImage, topics: Sequence[NewTopic], rng: random.Random
) -> ControllerResult[list[CreatedTopic | ControllerError]]:
    """Per topic, a CreatedTopic or the ControllerError that refused it."""
    return _each(image, topics, lambda t: t.name, lambda img, t: create_topic(img, t, rng))


def delete_topics(image: MetadataImage, names: Sequence[str]) -> ControllerResult[list[bytes | ControllerError]]:
    """Per name, the deleted topic's id or the ControllerError that refused it."""
    return _each(image, names, lambda name: name, delete_topic)


def create_partitions_of(image: MetadataImage, request: NewPartitions, rng: random.Random) -> ControllerResult[None]:
    """Kafka's ReplicationControlManager.createPartitions for one topic: a PartitionRecord per
    partition added, with the topic's replication factor, placed as a new topic's are or as
    assigned (every broker registered, none twice, as many as the topic's other partitions
    have, at least one unfenced). The ISR is the unfenced replicas and the leader its first."""
    topic = image.topic(request.name)
    if topic is None:
        raise ControllerError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    current = len(topic.partitions)
    if request.count == current:
        raise ControllerError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if request.count < current:
        raise ControllerError(
            Errors.INVALID_PARTITIONS,
            f"The topic {request.name} currently has {current} partition(s); {request.count} would not be an increase.",
        )
    additional = request.count - current
    if request.assignments is not None and len(request.assignments) != additional:
        raise ControllerError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(request.assignments)} "
            "assignment(s) were specified.",
        )
    check_record_count(additional)
    replication_factor = len(topic.partitions[0].replicas)
    unfenced = image.unfenced_brokers()
    if request.assignments is not None:
        assignment = [_checked_assignment(image, replicas, replication_factor, current + i)
                      for i, replicas in enumerate(request.assignments)]
    elif replication_factor > len(unfenced):
        raise ControllerError(
            Errors.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): the target replication factor of "
            f"{replication_factor} cannot be reached because only {len(unfenced)} broker(s) are registered and "
            "unfenced.",
        )
    else:
        assignment = assign_replicas(unfenced, additional, replication_factor, rng)
    active = set(unfenced)
    records = []
    for pid, replicas in enumerate(assignment, start=current):
        isr = tuple(r for r in replicas if r in active)
        records.append(PartitionRecord(partition_id=pid, topic_id=topic.id, replicas=tuple(replicas), isr=isr,
                                       leader=isr[0], leader_epoch=0, partition_epoch=0))
    return ControllerResult(tuple(records), None)


def _checked_assignment(image: MetadataImage, replicas: Sequence[int], replication_factor: int | None,
                        partition: int) -> tuple[int, ...]:
    """Kafka's validateManualPartitionAssignment (the replication factor of the partitions
    before, if any), and that one replica is unfenced."""
    if not replicas:
        raise ControllerError(Errors.INVALID_REPLICA_ASSIGNMENT,
                              "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if image.broker(broker_id) is None:
            raise ControllerError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise ControllerError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise ControllerError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication_factor} replica(s).",
        )
    if all(image.brokers[b].fenced for b in replicas):
        raise ControllerError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"All brokers specified in the manual partition assignment for partition {partition} are fenced or in "
            "controlled shutdown.",
        )
    return tuple(replicas)


def create_partitions(
    image: MetadataImage, requests: Sequence[NewPartitions], rng: random.Random
) -> ControllerResult[list[None | ControllerError]]:
    """Per topic, None (partitions added) or the ControllerError that refused it."""
    return _each(image, requests, lambda r: r.name, lambda img, r: create_partitions_of(img, r, rng))


# ---------------------------------------------------------------------------- brokers


def _registered(image: MetadataImage, broker_id: int, broker_epoch: int | None = None) -> BrokerRegistration:
    """The broker's registration; with `broker_epoch`, only if that is its current epoch."""
    broker = image.broker(broker_id)
    if broker is None:
        raise ControllerError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
    if broker_epoch is not None and broker.epoch != broker_epoch:
        raise ControllerError(
            Errors.STALE_BROKER_EPOCH,
            f"Expected broker epoch {broker.epoch} for broker {broker_id}, got {broker_epoch}.",
        )
    return broker


def register_broker(
    image: MetadataImage,
    broker_id: int,
    *,
    incarnation_id: bytes,
    broker_epoch: int,
    endpoints: Sequence[BrokerEndpoint] = (),
    features: Sequence[BrokerFeature] = (),
    rack: str | None = None,
    kraft_version: int = 0,
) -> ControllerResult[int]:
    """A RegisterBrokerRecord for a fenced broker (it is unfenced once it has caught up).

    `broker_epoch` is chosen by the caller; Kafka uses the offset the record will be written
    at, which only grows. A broker already registered and unfenced under another incarnation
    is refused: two processes must not claim one id. A broker that does not support every
    finalized level is refused (registration_features.py); `kraft_version` is the Raft
    layer's, which the image does not hold (0: a static quorum's).
    """
    if not 0 <= broker_id <= _INT32_MAX:
        raise ControllerError(Errors.INVALID_REQUEST, f"Invalid broker id {broker_id}")
    if len(incarnation_id) != 16:
        raise ControllerError(Errors.INVALID_REQUEST, "The incarnation id must be a 16-byte UUID")
    for e in endpoints:
        if not 0 <= e.port <= 65535:
            raise ControllerError(Errors.INVALID_REQUEST, f"Endpoint {e.name} has an invalid port {e.port}")
    existing = image.broker(broker_id)
    if existing is not None:
        if not existing.fenced and existing.incarnation_id != incarnation_id:
            raise ControllerError(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                f"Another broker is registered with that broker id {broker_id} and is not fenced.",
            )
        if broker_epoch <= existing.epoch:
            raise ControllerError(
                Errors.STALE_BROKER_EPOCH,
                f"Broker {broker_id} is registered at epoch {existing.epoch}; epoch {broker_epoch} is not newer.",
            )
    supported = registered_features(image, features, kraft_version)
    record = RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=incarnation_id,
        broker_epoch=broker_epoch,
        end_points=tuple(endpoints),
        features=supported,
        rack=rack,
        fenced=True,
    )
    return _with_partition_changes(image, record, broker_epoch)


def _with_partition_changes(image: MetadataImage, record: MetadataRecord, response: T) -> ControllerResult[T]:
    """A broker's registration, fencing or unfencing and what it does to the partitions.

    As Kafka's controller does, the ISR and leader changes are written as PartitionChange
    records beside it, so Kafka's replay rules give the same image; the delta that worked
    them out comes with them, for the controller's working image. In a log that chose
    KIP-630's derived fencing (the kraft.derived.fencing feature), the one record is all:
    every replica derives the changes, and the log stays a few bytes per event.
    """
    if image.features.get(DERIVED_FENCING, 0) >= 1:
        return ControllerResult((record,), response)
    changes, derived = partition_changes(image, (record,))
    return ControllerResult((record, *changes), response, prepared=derived)


def unregister_broker(image: MetadataImage, broker_id: int) -> ControllerResult[None]:
    """UnregisterBrokerRecord, with Kafka's message for a broker that is not registered."""
    broker = image.broker(broker_id)
    if broker is None:
        raise ControllerError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
    return _with_partition_changes(image, UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch), None)


def fence_broker(image: MetadataImage, broker_id: int) -> ControllerResult[None]:
    """A FenceBrokerRecord and the partition changes it causes (see _with_partition_changes).
    Fencing a fenced broker is a no-op."""
    broker = _registered(image, broker_id)
    if broker.fenced:
        return ControllerResult((), None)
    return _with_partition_changes(image, FenceBrokerRecord(id=broker_id, epoch=broker.epoch), None)


def unfence_broker(image: MetadataImage, broker_id: int, broker_epoch: int) -> ControllerResult[None]:
    """An UnfenceBrokerRecord for the broker's current registration only, and the leaders
    it lets leaderless partitions elect."""
    broker = _registered(image, broker_id, broker_epoch)
    if not broker.fenced:
        return ControllerResult((), None)
    return _with_partition_changes(image, UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch), None)


# ---------------------------------------------------------------------------- configs


def describe_configs(image: MetadataImage, resource: ConfigResource) -> Mapping[str, str]:
    """The configs set on a resource; the metadata log's fixed ones for __cluster_metadata."""
    if resource == (ConfigResourceType.TOPIC, CLUSTER_METADATA_TOPIC):
        return CLUSTER_METADATA_CONFIGS
    return image.configs_of(resource)


def _check_resource(image: MetadataImage, resource: ConfigResource) -> None:
    """A resource whose configs may be altered: an existing topic other than the metadata
    log, a broker id, or '' (every broker's default)."""
    if resource.type == ConfigResourceType.TOPIC:
        if resource.name == CLUSTER_METADATA_TOPIC:
            raise ControllerError(
                Errors.POLICY_VIOLATION,
                f"{CLUSTER_METADATA_TOPIC} is the metadata log: its cleanup.policy is snapshot and its configs "
                "cannot be altered",
            )
        if image.topic(resource.name) is None:
            raise ControllerError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{resource.name}' does not exist."
            )
    elif resource.type == ConfigResourceType.BROKER:
        if resource.name and not resource.name.isdigit():
            raise ControllerError(Errors.INVALID_REQUEST, f"Invalid broker name {resource.name!r}: a broker id or ''")
    else:
        raise ControllerError(Errors.INVALID_REQUEST, f"Unsupported resource type {resource.type!r}")


def _config_records(resource: ConfigResource, changes: Mapping[str, str | None]) -> tuple[ConfigRecord, ...]:
    return tuple(
        ConfigRecord(resource_type=resource.type, resource_name=resource.name, name=name, value=value)
        for name, value in changes.items()
    )


def alter_configs(
    image: MetadataImage, resource: ConfigResource, ops: Sequence[AlterConfigOp]
) -> ControllerResult[None]:
    """IncrementalAlterConfigs for one resource (SET, DELETE, APPEND, SUBTRACT): a
    ConfigRecord per config whose value changes, none if a single op is invalid."""
    _check_resource(image, resource)
    return ControllerResult(_config_records(resource, incremental_alter(resource.type, image.configs_of(resource), ops)),
                            None)


def replace_configs(
    image: MetadataImage, resource: ConfigResource, configs: Mapping[str, str]
) -> ControllerResult[None]:
    """Legacy AlterConfigs for one resource: the configs become exactly `configs`, so a
    config set before and not named is removed (Kafka's legacyAlterConfigResource); every
    value named is validated, and one invalid value refuses the whole resource."""
    _check_resource(image, resource)
    check_configs(resource.type, configs)
    current = image.configs_of(resource)
    changes: dict[str, str | None] = {k: v for k, v in configs.items() if current.get(k) != v}
    changes.update({k: None for k in current if k not in configs})
    return ControllerResult(_config_records(resource, changes), None)


_DUPLICATE_RESOURCE = "Each resource must appear at most once."


def alter_configs_each(
    image: MetadataImage, changes: Sequence[tuple[ConfigResource, Sequence[AlterConfigOp]]]
) -> ControllerResult[list[None | ControllerError]]:
    """IncrementalAlterConfigs for many resources in one operation (Kafka's controller
    commits them as one atomic batch); per resource, None or why it was refused."""
    return _each(image, changes, lambda c: c[0], lambda img, c: alter_configs(img, *c), _DUPLICATE_RESOURCE)


def replace_configs_each(
    image: MetadataImage, changes: Sequence[tuple[ConfigResource, Mapping[str, str]]]
) -> ControllerResult[list[None | ControllerError]]:
    """Legacy AlterConfigs for many resources in one operation, per resource as above."""
    return _each(image, changes, lambda c: c[0], lambda img, c: replace_configs(img, *c), _DUPLICATE_RESOURCE)


# ---------------------------------------------------------------------------- producer ids


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsBlock]:
    """The next block of producer ids for a registered broker at its current epoch."""
    _registered(image, broker_id, broker_epoch)
    first = max(image.next_producer_id, 0)
    if first > _INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
        raise ControllerError(Errors.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds.")
    record = ProducerIdsRecord(
        broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=first + PRODUCER_ID_BLOCK_SIZE
    )
    return ControllerResult((record,), ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE))
