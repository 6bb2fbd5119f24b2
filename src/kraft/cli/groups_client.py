"""What `kraft consumer-groups` asks a cluster, as Kafka's admin client asks it for
ConsumerGroupCommand: groups listed by every node (ListGroups), a group described and its
offsets read, committed and deleted at its coordinator (FindCoordinator, DescribeGroups,
OffsetFetch, OffsetCommit, OffsetDelete, DeleteGroups), log offsets asked of each
partition's leader (ListOffsets).

Beyond Kafka's tool, an offset the tool commits carries a leader epoch (KIP-320): the one
ListOffsets names with the offset it found, or else the epoch of the record before the
offset (the last record a consumer resuming there has read), read from the batch holding
it. A consumer resuming from such an offset can still detect that the log was truncated
under it; Kafka's tool commits no epoch.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import ConsumerProtocolAssignment as AssignmentV0
from kio.schema.consumer_protocol_assignment.v1 import ConsumerProtocolAssignment as AssignmentV1
from kio.schema.consumer_protocol_assignment.v2 import ConsumerProtocolAssignment as AssignmentV2
from kio.schema.consumer_protocol_assignment.v3 import ConsumerProtocolAssignment as AssignmentV3

from kraft.cli.admin_client import Admin, Node
from kraft.cli.kafka_errors import KafkaError, check
from kraft.protocol.codec import decode
from kraft.protocol.protocol_errors import MalformedFrameError
from kraft.records import iter_batches

OFFSET_COMMIT, OFFSET_FETCH, LIST_OFFSETS, FETCH = 8, 9, 2, 1
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
NO_EPOCH = -1
ASSIGNMENTS = (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Group:
    group_id: str
    state: str
    assignor: str
    members: tuple[Member, ...]
    coordinator: Node


@dataclass(frozen=True)
class Offset:
    """An offset and the leader epoch of the record before it (-1: none known)."""

    offset: int
    epoch: int = NO_EPOCH


def assignment_of(data: bytes) -> tuple[TopicPartition, ...]:
    """A member's ConsumerProtocolAssignment (int16 version, then the struct; versions above
    3 read as 3, as Kafka's ConsumerProtocol does); () if it is empty or not one."""
    if len(data) < 2:
        return ()
    version = min(int.from_bytes(data[:2], "big", signed=True), 3)
    try:
        assignment, _ = decode(ASSIGNMENTS[max(version, 0)], data, 2)
    except MalformedFrameError:
        return ()
    return tuple((t.topic, p) for t in assignment.assigned_partitions for p in t.partitions)


async def list_groups(admin: Admin, states: Sequence[str] = (), types: Sequence[str] = ()) -> list[Any]:
    """Every node's groups (each lists those it coordinates), once each, in Kafka's order
    of answers."""
    async def ask(node: Any) -> Any:
        answer = await admin.call(LIST_GROUPS, range(0, 6), {"states_filter": list(states),
                                                             "types_filter": list(types)}, node)
        check(answer.error_code)
        return answer.groups

    seen: dict[str, Any] = {}
    for groups in await admin.on_every_node(ask):
        for g in groups:
            seen.setdefault(g.group_id, g)
    return list(seen.values())


async def describe_group(admin: Admin, group_id: str) -> Group:
    node, connection = await admin.coordinator(group_id)
    answer = await admin.call(DESCRIBE_GROUPS, range(0, 6), {
        "groups": [group_id], "include_authorized_operations": False}, connection)
    described = answer.groups[0]
    check(described.error_code, getattr(described, "error_message", None))
    members = tuple(Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                           assignment_of(m.member_assignment) if described.protocol_type in ("consumer", "") else ())
                    for m in described.members)
    return Group(group_id, described.group_state, described.protocol_data, members, node)


async def committed(admin: Admin, group_id: str) -> dict[TopicPartition, Offset]:
    """The group's committed offsets (OffsetFetch of every partition), with their epochs."""
    _, connection = await admin.coordinator(group_id)
    answer = await admin.call(OFFSET_FETCH, range(1, 9), {
        "group_id": group_id, "topics": None, "groups": [{"group_id": group_id, "topics": None}],
        "require_stable": True}, connection)
    group = answer.groups[0] if hasattr(answer, "groups") else answer
    check(group.error_code)
    offsets = {}
    for topic in group.topics:
        for p in topic.partitions:
            check(p.error_code)
            if p.committed_offset >= 0:
                offsets[(topic.name, p.partition_index)] = Offset(p.committed_offset,
                                                                  getattr(p, "committed_leader_epoch", NO_EPOCH))
    return offsets


async def _leaders(admin: Admin, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Node]:
    topics = sorted({t for t, _ in partitions})
    metadata = await admin.metadata(topics)
    brokers = {b.node_id: Node(b.node_id, b.host, b.port) for b in metadata.brokers}
    leaders = {}
    for t in metadata.topics:
        check(t.error_code)
        for p in t.partitions:
            if p.leader_id in brokers:
                leaders[(t.name, p.partition_index)] = brokers[p.leader_id]
    return leaders


async def log_offsets(admin: Admin, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition,
                                                                                                     Offset | None]:
    """ListOffsets at each partition's leader: EARLIEST, LATEST or the first offset at or
    after a timestamp (None: no such record, or no answer for the partition)."""
    leaders = await _leaders(admin, partitions)
    found: dict[TopicPartition, Offset | None] = {tp: None for tp in partitions}
    by_leader: dict[Node, list[TopicPartition]] = {}
    for tp in partitions:
        if tp in leaders:
            by_leader.setdefault(leaders[tp], []).append(tp)
    for leader, tps in by_leader.items():
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append({"partition_index": p, "timestamp": timestamp, "max_num_offsets": 1,
                                             "current_leader_epoch": NO_EPOCH})
        answer = await admin.call(LIST_OFFSETS, range(1, 9), {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            await admin.connection(leader.host, leader.port))
        for topic in answer.topics:
            for p in topic.partitions:
                check(p.error_code)
                if p.offset >= 0:
                    found[(topic.name, p.partition_index)] = Offset(p.offset, getattr(p, "leader_epoch", NO_EPOCH))
    return found


async def epoch_before(admin: Admin, tp: TopicPartition, offset: int, log_start: Offset) -> int:
    """The leader epoch of the record before `offset` (the last one a consumer resuming at
    `offset` has read), from the batch holding it; at the log start, the epoch ListOffsets
    gave it."""
    if offset <= log_start.offset:
        return log_start.epoch
    leader = (await _leaders(admin, [tp])).get(tp)
    if leader is None:
        return NO_EPOCH
    answer = await admin.call(FETCH, range(4, 13), {
        "replica_id": -1, "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": 1, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": tp[0], "partitions": [{
            "partition": tp[1], "current_leader_epoch": NO_EPOCH, "fetch_offset": offset - 1,
            "last_fetched_epoch": NO_EPOCH, "log_start_offset": -1, "partition_max_bytes": 1}]}]},
        await admin.connection(leader.host, leader.port))
    partition = answer.responses[0].partitions[0]
    check(partition.error_code)
    for header in iter_batches(memoryview(bytes(partition.records or b""))):
        return header.partition_leader_epoch
    return NO_EPOCH


async def commit(admin: Admin, group_id: str, offsets: dict[TopicPartition, Offset]) -> None:
    """OffsetCommit as Kafka's admin client sends it (generation -1, no member: allowed
    only while the group has no members), every partition's error raised."""
    _, connection = await admin.coordinator(group_id)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in sorted(offsets.items()):
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o.offset,
                                         "committed_leader_epoch": o.epoch, "committed_metadata": "",
                                         "commit_timestamp": -1})
    answer = await admin.call(OFFSET_COMMIT, range(2, 10), {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "retention_time": -1, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, connection)
    for topic in answer.topics:
        for p in topic.partitions:
            check(p.error_code)


async def delete_groups(admin: Admin, group_ids: Sequence[str]) -> dict[str, KafkaError | None]:
    """Each group's DeleteGroups outcome, asked of its coordinator."""
    outcomes: dict[str, KafkaError | None] = {}
    for group_id in group_ids:
        try:
            _, connection = await admin.coordinator(group_id)
            answer = await admin.call(DELETE_GROUPS, range(0, 3), {"groups_names": [group_id]}, connection)
            check(answer.results[0].error_code)
            outcomes[group_id] = None
        except KafkaError as e:
            outcomes[group_id] = e
    return outcomes


async def delete_offsets(admin: Admin, group_id: str,
                         partitions: Sequence[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
    """OffsetDelete: (the top-level error code, each partition's)."""
    _, connection = await admin.coordinator(group_id)
    topics: dict[str, list[dict[str, int]]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append({"partition_index": p})
    answer = await admin.call(OFFSET_DELETE, range(0, 1), {
        "group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, connection)
    return int(answer.error_code), {(t.name, p.partition_index): int(p.error_code)
                                    for t in answer.topics for p in t.partitions}
