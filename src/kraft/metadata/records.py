"""The cluster-metadata records, with Kafka's API keys, versions, field layouts and defaults.

Each class is declared once, field by field in wire order, from Kafka's
`metadata/src/main/resources/common/metadata/*.json`; `kraft.metadata.schema` reads and
writes them from these declarations. Field names are Kafka's in snake case. Topic and
directory ids are Kafka UUIDs kept as 16 raw bytes (`uuid_str` prints Kafka's form).

Every record type Kafka defines (API keys 0 to 29; 6, 13 and 16 were never used) at every
version Kafka defines, tagged fields included. kraft writes the lowest version that holds
what it writes.
"""

import base64
from typing import get_args

from kraft.metadata.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
    message,
    wire,
)


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
    """Only the fields that changed are set; the others keep their "no change" defaults."""

    partition_id: int = wire(INT32, default=-1)
    topic_id: bytes = wire(UUID)
    isr: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=0, default=None)
    leader: int = wire(INT32, tag=1, default=NO_LEADER_CHANGE)
    replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=2, default=None)
    removing_replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=3, default=None)
    adding_replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), nullable=True, tag=4, default=None)
    leader_recovery_state: int = wire(INT8, tag=5, default=-1)
    directories: tuple[bytes, ...] | None = wire(ArrayOf(UUID), since=1, nullable=True, tag=8, default=None)
    eligible_leader_replicas: tuple[int, ...] | None = wire(ArrayOf(INT32), since=2, nullable=True, tag=6, default=None)
    last_known_elr: tuple[int, ...] | None = wire(ArrayOf(INT32), since=2, nullable=True, tag=7, default=None)


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


@message(api_key=10)
class DelegationTokenRecord:
    owner: str = wire(STRING)
    requester: str = wire(STRING)
    renewers: tuple[str, ...] = wire(ArrayOf(STRING))
    issue_timestamp: int = wire(INT64)
    max_timestamp: int = wire(INT64)
    expiration_timestamp: int = wire(INT64)
    token_id: str = wire(STRING)


@message(api_key=11)
class UserScramCredentialRecord:
    name: str = wire(STRING)
    mechanism: int = wire(INT8)
    salt: bytes = wire(BYTES)
    stored_key: bytes = wire(BYTES)
    server_key: bytes = wire(BYTES)
    iterations: int = wire(INT32)


@message(api_key=12)
class FeatureLevelRecord:
    name: str = wire(STRING)
    feature_level: int = wire(INT16)


@message()
class EntityData:
    entity_type: str = wire(STRING)
    entity_name: str | None = wire(STRING, nullable=True)


@message(api_key=14)
class ClientQuotaRecord:
    entity: tuple[EntityData, ...] = wire(ArrayOf(EntityData))
    key: str = wire(STRING)
    value: float = wire(FLOAT64)
    remove: bool = wire(BOOL)


@message(api_key=15)
class ProducerIdsRecord:
    broker_id: int = wire(INT32)
    broker_epoch: int = wire(INT64, default=-1)
    next_producer_id: int = wire(INT64)


@message(api_key=17, versions=(0, 2))
class BrokerRegistrationChangeRecord:
    """`fenced`: 1 fences, -1 unfences, 0 leaves it; `in_controlled_shutdown`: 1 enters it."""

    broker_id: int = wire(INT32)
    broker_epoch: int = wire(INT64)
    fenced: int = wire(INT8, tag=0)
    in_controlled_shutdown: int = wire(INT8, since=1, tag=1)
    log_dirs: tuple[bytes, ...] = wire(ArrayOf(UUID), since=2, tag=2)


@message(api_key=18)
class AccessControlEntryRecord:
    id: bytes = wire(UUID)
    resource_type: int = wire(INT8)
    resource_name: str = wire(STRING)
    pattern_type: int = wire(INT8)
    principal: str = wire(STRING)
    host: str = wire(STRING)
    operation: int = wire(INT8)
    permission_type: int = wire(INT8)


@message(api_key=19)
class RemoveAccessControlEntryRecord:
    id: bytes = wire(UUID)


@message(api_key=20)
class NoOpRecord:
    """Written while the controller is idle (metadata.max.idle.interval.ms), so readers see
    the log move and followers' lag can be measured."""


@message(api_key=21)
class ZkMigrationStateRecord:
    zk_migration_state: int = wire(INT8)


@message(api_key=22)
class RemoveUserScramCredentialRecord:
    name: str = wire(STRING)
    mechanism: int = wire(INT8)


@message(api_key=23)
class BeginTransactionRecord:
    """The records up to the matching EndTransactionRecord apply together, or (on an
    AbortTransactionRecord) not at all."""

    name: str | None = wire(STRING, nullable=True, tag=0, default=None)


@message(api_key=24)
class EndTransactionRecord:
    pass


@message(api_key=25)
class AbortTransactionRecord:
    reason: str | None = wire(STRING, nullable=True, tag=0, default=None)


@message(api_key=26)
class RemoveDelegationTokenRecord:
    token_id: str = wire(STRING)


# A controller's endpoints and features have the broker's layouts (Kafka names them apart).
ControllerEndpoint = BrokerEndpoint
ControllerFeature = BrokerFeature


@message(api_key=27)
class RegisterControllerRecord:
    controller_id: int = wire(INT32)
    incarnation_id: bytes = wire(UUID)
    zk_migration_ready: bool = wire(BOOL)
    end_points: tuple[ControllerEndpoint, ...] = wire(ArrayOf(ControllerEndpoint))
    features: tuple[ControllerFeature, ...] = wire(ArrayOf(ControllerFeature))


@message(api_key=28)
class ClearElrRecord:
    """Clears the eligible leader replicas of one topic's partitions, or of every topic's
    when the name is empty."""

    topic_name: str = wire(STRING)


@message(api_key=29)
class UnregisterControllerRecord:
    controller_id: int = wire(INT32)


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
    | DelegationTokenRecord
    | UserScramCredentialRecord
    | FeatureLevelRecord
    | ClientQuotaRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | NoOpRecord
    | ZkMigrationStateRecord
    | RemoveUserScramCredentialRecord
    | BeginTransactionRecord
    | EndTransactionRecord
    | AbortTransactionRecord
    | RemoveDelegationTokenRecord
    | RegisterControllerRecord
    | ClearElrRecord
    | UnregisterControllerRecord
)

RECORD_TYPES: tuple[type, ...] = get_args(MetadataRecord)
