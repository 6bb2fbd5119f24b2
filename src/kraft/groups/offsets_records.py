"""The records of `__consumer_offsets`, as Kafka's group coordinator writes them.

A record's key is a version (int16) followed by the key's fields, and the key's version is
the record's type: 0 and 1 are an OffsetCommitKey (group, topic, partition), 2 a
GroupMetadataKey (group). Its value is a version (int16) followed by the value's fields, or
null: a tombstone, which deletes what the key names. Declared from Kafka's schemas
(group-coordinator/src/main/resources/common/message/*.json):

    OffsetCommitValue  v0: offset int64, metadata string, commitTimestamp int64
                       v1: + expireTimestamp int64 (v1 only)
                       v3: + leaderEpoch int32 after offset (the committed epoch, KIP-320)
                       v4: flexible
    GroupMetadataValue v0: protocolType string, generation int32, protocol string?, leader string?,
                           members [memberId, clientId, clientHost, sessionTimeout int32,
                                    subscription bytes, assignment bytes]
                       v1: + member rebalanceTimeout int32 (before sessionTimeout)
                       v2: + currentStateTimestamp int64 (before members)
                       v3: + member groupInstanceId string? (after memberId)
                       v4: flexible

Every version is read. Written are the versions Kafka writes: key version 1 for offsets
and 2 for groups, OffsetCommitValue v3 (v1 when the commit carries an expire timestamp,
from an OffsetCommit v2-4 retention time), GroupMetadataValue v3.
"""

from dataclasses import dataclass

from kraft.groups.wire import GroupRecordError, Reader, Writer

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
HIGHEST_VALUE_VERSION = 4  # both values; the first flexible version too
NO_TIMESTAMP = -1  # Kafka's default for an absent timestamp or epoch


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset. `leader_epoch` is the epoch of the last record the consumer
    consumed (KIP-320), -1 when the commit named none."""

    offset: int
    leader_epoch: int = NO_TIMESTAMP
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A classic group as its last rebalance left it: written when a generation's assignment
    is synced, and when the group becomes empty."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp: int = NO_TIMESTAMP


Key = OffsetCommitKey | GroupMetadataKey
Value = OffsetCommitValue | GroupMetadataValue
GroupRecord = tuple[Key, Value | None]  # a value of None is a tombstone


# ---------------------------------------------------------------- keys


def encode_key(key: Key) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION, "version")
        w.string(key.group, False, "OffsetCommitKey.group")
        w.string(key.topic, False, "OffsetCommitKey.topic")
        w.int32(key.partition, "OffsetCommitKey.partition")
    else:
        w.int16(GROUP_METADATA_KEY_VERSION, "version")
        w.string(key.group, False, "GroupMetadataKey.group")
    return w.value()


def decode_key(data: bytes) -> Key:
    r = Reader(data, "a __consumer_offsets record key")
    version = r.int16()
    key: Key
    if version in (0, 1):
        r.what = f"OffsetCommitKey v{version}"
        key = OffsetCommitKey(r.string(False), r.string(False), r.int32())
    elif version == 2:
        r.what = "GroupMetadataKey v2"
        key = GroupMetadataKey(r.string(False))
    else:
        raise r.error(f"has record type {version}, which kraft's group coordinator does not keep "
                      "(0-1 offset commits, 2 classic group metadata)")
    r.end()
    return key


# ---------------------------------------------------------------- values


def offset_value_version(value: OffsetCommitValue) -> int:
    """The version Kafka writes: v1 to carry an expire timestamp, else v3."""
    if value.expire_timestamp != NO_TIMESTAMP:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE_VERSION


def _check_version(name: str, version: int) -> None:
    if not 0 <= version <= HIGHEST_VALUE_VERSION:
        raise GroupRecordError(f"{name}: version {version} is not one of 0-{HIGHEST_VALUE_VERSION}")


def _encode_offset(value: OffsetCommitValue, version: int) -> bytes:
    if value.leader_epoch != NO_TIMESTAMP and version < 3:
        raise GroupRecordError(f"OffsetCommitValue v{version} cannot hold a leader epoch")
    if value.expire_timestamp != NO_TIMESTAMP and version != 1:
        raise GroupRecordError(f"OffsetCommitValue v{version} cannot hold an expire timestamp")
    flexible = version >= 4
    w = Writer()
    w.int16(version, "version")
    w.int64(value.offset, "OffsetCommitValue.offset")
    if version >= 3:
        w.int32(value.leader_epoch, "OffsetCommitValue.leaderEpoch")
    w.string(value.metadata, flexible, "OffsetCommitValue.metadata")
    w.int64(value.commit_timestamp, "OffsetCommitValue.commitTimestamp")
    if version == 1:
        w.int64(value.expire_timestamp, "OffsetCommitValue.expireTimestamp")
    if flexible:
        w.no_tagged_fields()
    return w.value()


def _decode_offset(r: Reader, version: int) -> OffsetCommitValue:
    flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else NO_TIMESTAMP
    metadata = r.string(flexible)
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else NO_TIMESTAMP
    if flexible:
        r.skip_tagged_fields()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def _encode_group(value: GroupMetadataValue, version: int) -> bytes:
    flexible = version >= 4
    w = Writer()
    w.int16(version, "version")
    w.string(value.protocol_type, flexible, "GroupMetadataValue.protocolType")
    w.int32(value.generation, "GroupMetadataValue.generation")
    w.nullable_string(value.protocol, flexible, "GroupMetadataValue.protocol")
    w.nullable_string(value.leader, flexible, "GroupMetadataValue.leader")
    if version >= 2:
        w.int64(value.current_state_timestamp, "GroupMetadataValue.currentStateTimestamp")
    elif value.current_state_timestamp != NO_TIMESTAMP:
        raise GroupRecordError(f"GroupMetadataValue v{version} cannot hold a state timestamp")
    w.array_length(len(value.members), flexible)
    for m in value.members:
        w.string(m.member_id, flexible, "MemberMetadata.memberId")
        if version >= 3:
            w.nullable_string(m.group_instance_id, flexible, "MemberMetadata.groupInstanceId")
        elif m.group_instance_id is not None:
            raise GroupRecordError(f"GroupMetadataValue v{version} cannot hold a group instance id")
        w.string(m.client_id, flexible, "MemberMetadata.clientId")
        w.string(m.client_host, flexible, "MemberMetadata.clientHost")
        if version >= 1:
            w.int32(m.rebalance_timeout, "MemberMetadata.rebalanceTimeout")
        w.int32(m.session_timeout, "MemberMetadata.sessionTimeout")
        w.bytes_(m.subscription, flexible)
        w.bytes_(m.assignment, flexible)
        if flexible:
            w.no_tagged_fields()
    if flexible:
        w.no_tagged_fields()
    return w.value()


def _decode_group(r: Reader, version: int) -> GroupMetadataValue:
    flexible = version >= 4
    protocol_type = r.string(flexible)
    generation = r.int32()
    protocol = r.nullable_string(flexible)
    leader = r.nullable_string(flexible)
    timestamp = r.int64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(r.array_length(flexible)):
        member_id = r.string(flexible)
        instance_id = r.nullable_string(flexible) if version >= 3 else None
        client_id = r.string(flexible)
        client_host = r.string(flexible)
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_(flexible)
        assignment = r.bytes_(flexible)
        if flexible:
            r.skip_tagged_fields()
        members.append(MemberMetadata(member_id, client_id, client_host, session_timeout, subscription,
                                      assignment, rebalance_timeout, instance_id))
    if flexible:
        r.skip_tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members), timestamp)


def encode_value(value: Value, version: int | None = None) -> bytes:
    """`value` at `version` (default: the one Kafka writes). GroupRecordError if that
    version cannot hold one of its fields, or a field's value does not fit its type."""
    if isinstance(value, OffsetCommitValue):
        v = offset_value_version(value) if version is None else version
        _check_version("OffsetCommitValue", v)
        return _encode_offset(value, v)
    v = GROUP_METADATA_VALUE_VERSION if version is None else version
    _check_version("GroupMetadataValue", v)
    return _encode_group(value, v)


def decode_value(key: Key, data: bytes) -> Value:
    name = "OffsetCommitValue" if isinstance(key, OffsetCommitKey) else "GroupMetadataValue"
    r = Reader(data, name)
    version = r.int16()
    _check_version(name, version)
    r.what = f"{name} v{version} of {key}"
    value: Value = _decode_offset(r, version) if isinstance(key, OffsetCommitKey) else _decode_group(r, version)
    r.end()
    return value


def encode_record(record: GroupRecord) -> tuple[bytes, bytes | None]:
    """(key, value) bytes of a record, as they go into the log: a tombstone's value is None."""
    key, value = record
    return encode_key(key), None if value is None else encode_value(value)


def decode_record(key: bytes | None, value: bytes | None) -> GroupRecord:
    if key is None:
        raise GroupRecordError("a __consumer_offsets record has no key")
    k = decode_key(key)
    return k, None if value is None else decode_value(k, value)
