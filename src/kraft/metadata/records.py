"""The cluster-metadata records, with Kafka's API keys, versions, field layouts and defaults.

Each class is declared once, field by field in wire order, from Kafka's
`metadata/src/main/resources/common/metadata/*.json`; `kraft.metadata.schema` reads and
writes them from these declarations. Field names are Kafka's in snake case. Topic and
directory ids are Kafka UUIDs kept as 16 raw bytes (`uuid_str` prints Kafka's form).

Versions newer than 0 add only what kraft does not model: log directories (KIP-858),
eligible leader replicas (KIP-966), ZooKeeper migration and controlled shutdown. They are
read (their fields are declared) but kraft writes version 0 of every record, which carries
everything its image holds.
"""

import base64

from kraft.metadata.schema import BOOL, INT8, INT16, INT32, INT64, STRING, UINT16, UUID, ArrayOf, message, wire


def uuid_str(uuid: bytes) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(uuid).rstrip(b"=").decode()


@message(versions=(0, 3))
class BrokerEndpoint:
    name: str = wire(STRING)
    host: str = wire(STRING)
    port: int = wire(UINT16)
    security_protocol: int = wire(INT16)


@message(versions=(0, 3))
class BrokerFeature:
    name: str = wire(STRING)
    min_supported_version: int = wire(INT16)
    max_supported_version: int = wire(INT16)


@message(api_key=0, versions=(0, 3))
class RegisterBrokerRecord:
    broker_id: int = wire(INT32)
    is_migrating_zk_broker: bool = wire(BOOL, since=2)
    incarnation_id: bytes = wire(UUID)
    broker_epoch: int = wire(INT64)
    end_points: tuple[BrokerEndpoint, ...] = wire(ArrayOf(BrokerEndpoint))
    features: tuple[BrokerFeature, ...] = wire(ArrayOf(BrokerFeature))
    rack: str | None = wire(STRING, nullable=True, default=None)
    fenced: bool = wire(BOOL, default=True)
    in_controlled_shutdown: bool = wire(BOOL, since=1)
    log_dirs: tuple[bytes, ...] = wire(ArrayOf(UUID), since=3, tag=0)


@message(api_key=1)
class UnregisterBrokerRecord:
    broker_id: int = wire(INT32)
    broker_epoch: int = wire(INT64)


@message(api_key=2)
class TopicRecord:
    name: str = wire(STRING)
    topic_id: bytes = wire(UUID)


@message(api_key=3, versions=(0, 2))
class PartitionRecord:
    partition_id: int = wire(INT32, default=-1)
    topic_id: bytes = wire(UUID)
    replicas: tuple[int, ...] = wire(ArrayOf(INT32))
    isr: tuple[int, ...] = wire(ArrayOf(INT32))
    removing_replicas: tuple[int, ...] = wire(ArrayOf(INT32))
    adding_replicas: tuple[int, ...] = wire(ArrayOf(INT32))
    leader: int = wire(INT32, default=-1)
    leader_recovery_state: int = wire(INT8, tag=0)
    leader_epoch: int = wire(INT32, default=-1)
    partition_epoch: int = wire(INT32, default=-1)
    directories: tuple[bytes, ...] = wire(ArrayOf(UUID), since=1)
    eligible_leader_replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), since=2, nullable=True, tag=1, default=None)
    last_known_elr: tuple[int, ...] | None = wire(ArrayOf(INT32), since=2, nullable=True, tag=2, default=None)


@message(api_key=4)
class ConfigRecord:
    resource_type: int = wire(INT8)
    resource_name: str = wire(STRING)
    name: str = wire(STRING)
    value: str | None = wire(STRING, nullable=True)


NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: the leader did not change


@message(api_key=5, versions=(0, 2))
class PartitionChangeRecord:
    """Only the fields that changed are set; the others keep their "no change" defaults.

    Versions 1 and 2 add tagged fields only (KIP-858 directories, KIP-966 ELR), which this
    reader skips as unknown tags.
    """

    partition_id: int = wire(INT32, default=-1)
    topic_id: bytes = wire(UUID)
    isr: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=0, default=None)
    leader: int = wire(INT32, tag=1, default=NO_LEADER_CHANGE)
    replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=2, default=None)
    removing_replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=3, default=None)
    adding_replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=4, default=None)
    leader_recovery_state: int = wire(INT8, tag=5, default=-1)


@message(api_key=7)
class FenceBrokerRecord:
    id: int = wire(INT32)
    epoch: int = wire(INT64)


@message(api_key=8)
class UnfenceBrokerRecord:
    id: int = wire(INT32)
    epoch: int = wire(INT64)


@message(api_key=9)
class RemoveTopicRecord:
    topic_id: bytes = wire(UUID)


@message(api_key=12)
class FeatureLevelRecord:
    name: str = wire(STRING)
    feature_level: int = wire(INT16)


@message(api_key=15)
class ProducerIdsRecord:
    broker_id: int = wire(INT32)
    broker_epoch: int = wire(INT64, default=-1)
    next_producer_id: int = wire(INT64)


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
)

RECORD_TYPES: tuple[type, ...] = MetadataRecord.__args__  # type: ignore[attr-defined]
