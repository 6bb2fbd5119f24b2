"""What the coordinator is asked and answers, whatever the version on the wire.

The request handlers (api.py) read kio's request of any version into these, and build the
version's response from the answers, so the coordinator's rules are written once and are
tested without the wire. Error codes are Kafka's (kio's ErrorCode).
"""

from dataclasses import dataclass, field

from kraft.protocol import ErrorCode

NONE = ErrorCode.none
UNKNOWN_MEMBER_ID = ""  # a member that has no id yet
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the member's order of preference
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    group_instance_id: str | None = None
    requires_known_member_id: bool = True  # JoinGroup v4+ (KIP-394): MEMBER_ID_REQUIRED first


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    metadata: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    error: ErrorCode
    member_id: str
    generation: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()  # the leader's answer lists everyone's subscription


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation: int
    assignments: tuple[tuple[str, bytes], ...] = ()  # the leader's: (member id, assignment)
    protocol_type: str | None = None  # v5+: checked against the group's
    protocol_name: str | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveAnswer:
    error: ErrorCode  # the group's (COORDINATOR_NOT_AVAILABLE), else NONE
    members: tuple[tuple[str, str | None, ErrorCode], ...] = ()  # (member id, instance id, error)


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation: int
    member_id: str
    partitions: tuple[CommitPartition, ...]
    retention_ms: int = -1  # OffsetCommit v2-4's retention time; -1: the broker's retention
    group_instance_id: str | None = None
    group_id_not_found_error: bool = True  # v9+: GROUP_ID_NOT_FOUND; before: ILLEGAL_GENERATION


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = NONE


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    group_id: str
    error: ErrorCode = NONE
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    error: ErrorCode = NONE


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class OffsetDeleteAnswer:
    error: ErrorCode = NONE
    partitions: dict[tuple[str, int], ErrorCode] = field(default_factory=dict)
