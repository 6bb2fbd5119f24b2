"""Committed positions in a consumer group, for an assign-only consumer (Kafka's simple groups).

Kafka's consumer with a group.id and assign() commits without joining the group: OffsetCommit
with generation -1 and no member id, which the coordinator takes for a group without members
(a group whose members share out its partitions refuses it: ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID). Each committed offset carries the leader epoch of the record before it
(KIP-320's CommittedLeaderEpoch), so a consumer starting again from a committed position
seeks to (offset, epoch) and has it checked like any position it kept itself:
OffsetForLeaderEpoch before the first fetch, LastFetchedEpoch in every fetch.

Here: the requests to find the group's coordinator, commit and fetch, and the reading of
their answers; `kraft.client.consumer` sends them.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from kraft.client.positions import OffsetAndEpoch, TopicPartition
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
FIND_COORDINATOR_V, OFFSET_COMMIT_V, OFFSET_FETCH_V = 4, 8, 8
GROUP_KEY = 0
NO_EPOCH = -1
# The group's coordinator moved, is not elected yet, or is still reading its partition: ask again.
COORDINATOR_MOVED = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                     ErrorCode.coordinator_load_in_progress}


def find_coordinator_request(group_id: str) -> Any:
    return build_request(FIND_COORDINATOR, FIND_COORDINATOR_V, {"key_type": GROUP_KEY, "coordinator_keys": [group_id]})


def coordinator_of(response: Any) -> tuple[ErrorCode, tuple[str, int] | None]:
    """The coordinator's address from a FindCoordinator answer, or the error that says why not."""
    found = response.coordinators[0]
    if found.error_code != ErrorCode.none:
        return found.error_code, None
    return ErrorCode.none, (found.host, found.port)


def offset_commit_request(group_id: str, offsets: Mapping[TopicPartition, OffsetAndEpoch]) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, at in sorted(offsets.items()):
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": at.offset,
            "committed_leader_epoch": NO_EPOCH if at.leader_epoch is None else at.leader_epoch,
            "committed_metadata": None})
    return build_request(OFFSET_COMMIT, OFFSET_COMMIT_V, {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})


def commit_outcome(response: Any) -> tuple[ErrorCode, None]:
    """The first error an OffsetCommit answer names for any partition (none if all were committed)."""
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                return p.error_code, None
    return ErrorCode.none, None


def offset_fetch_request(group_id: str, partitions: Iterable[TopicPartition]) -> Any:
    topics: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return build_request(OFFSET_FETCH, OFFSET_FETCH_V, {"require_stable": True, "groups": [
        {"group_id": group_id, "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]})


def committed_of(response: Any) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndEpoch | None]]:
    """Each partition's committed position from an OffsetFetch answer (None where nothing
    was committed), or the first error the answer names, for the group or a partition."""
    group = response.groups[0]
    if group.error_code != ErrorCode.none:
        return group.error_code, {}
    out: dict[TopicPartition, OffsetAndEpoch | None] = {}
    for topic in group.topics:
        for p in topic.partitions:
            if p.error_code != ErrorCode.none:
                return p.error_code, {}
            out[TopicPartition(topic.name, p.partition_index)] = None if p.committed_offset < 0 else OffsetAndEpoch(
                p.committed_offset, p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None)
    return ErrorCode.none, out
