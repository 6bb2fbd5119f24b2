"""Builders and readers for the KRaft RPCs, as kio's protocol types.

The core speaks these types directly, so the server puts them on the wire unchanged. Each
request names exactly one partition, the core's (`LogPartition`: `__cluster_metadata-0`
unless RaftConfig names another, as a `__consumer_offsets` partition's core does); these
helpers keep that nesting out of the core's logic. Versions: Vote v2 (KIP-996's PreVote), BeginQuorumEpoch v0, EndQuorumEpoch
v0 (KIP-595), Fetch v18 (topic ids, DivergingEpoch, SnapshotId; KIP-1166: the follower's high watermark), FetchSnapshot v0
(KIP-630), DescribeQuorum v1, AddRaftVoter v1 (KIP-1186) and RemoveRaftVoter v0 (KIP-853).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, cast

from kio.schema.begin_quorum_epoch.v0 import request as bqe_req
from kio.schema.begin_quorum_epoch.v0 import response as bqe_resp
from kio.schema.describe_quorum.v1 import request as dq_req
from kio.schema.describe_quorum.v1 import response as dq_resp
from kio.schema.end_quorum_epoch.v0 import request as eqe_req
from kio.schema.end_quorum_epoch.v0 import response as eqe_resp
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v18 import request as fetch_req
from kio.schema.fetch.v18 import response as fetch_resp
from kio.schema.fetch_snapshot.v0 import request as fs_req
from kio.schema.fetch_snapshot.v0 import response as fs_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.vote.v2 import request as vote_req
from kio.schema.vote.v2 import response as vote_resp
from kio.static.primitive import i32, i32Timedelta, i64

from kraft.raft.membership_messages import (
    NO_DIRECTORY,
    MembershipRequest,
    MembershipResponse,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
METADATA_PARTITION = 0
NO_LEADER = -1
NO_HIGH_WATERMARK = 2**63 - 1  # Fetch v18's HighWatermark when the fetcher gives none (Kafka's default)



@dataclass(frozen=True, slots=True)
class LogPartition:
    """The one topic partition a core replicates: its name (Vote, BeginQuorumEpoch,
    EndQuorumEpoch, FetchSnapshot, DescribeQuorum name topics), its topic id (Fetch v13
    identifies them so) and its index."""

    topic: str
    topic_id: uuid.UUID
    index: int

    def names(self, topic: Any) -> bool:
        """Whether a message's topic entry is this partition's topic."""
        if hasattr(topic, "topic_id"):
            return topic.topic_id == self.topic_id
        return getattr(topic, "topic_name", getattr(topic, "name", None)) == self.topic

    def __str__(self) -> str:
        return f"{self.topic}-{self.index}"


METADATA: Final = LogPartition(METADATA_TOPIC, METADATA_TOPIC_ID, METADATA_PARTITION)

# kio declares its fields with phantom types (i32, i64, BrokerId, TopicName, i32Timedelta): at run
# time a plain int in range already is an i32, and kio's constructors take it as it is. Converting
# with i32(x) would check the range again at about 0.75 us a field on every Fetch, for values the
# core keeps in range by construction; so the builders below cast, which only tells mypy.
_NO_THROTTLE: Final = cast(i32Timedelta, timedelta(0))

VoteRequest = vote_req.VoteRequest
VoteResponse = vote_resp.VoteResponse
BeginQuorumEpochRequest = bqe_req.BeginQuorumEpochRequest
BeginQuorumEpochResponse = bqe_resp.BeginQuorumEpochResponse
EndQuorumEpochRequest = eqe_req.EndQuorumEpochRequest
EndQuorumEpochResponse = eqe_resp.EndQuorumEpochResponse
FetchRequest = fetch_req.FetchRequest
FetchResponse = fetch_resp.FetchResponse
FetchSnapshotRequest = fs_req.FetchSnapshotRequest
FetchSnapshotResponse = fs_resp.FetchSnapshotResponse
DescribeQuorumRequest = dq_req.DescribeQuorumRequest
DescribeQuorumResponse = dq_resp.DescribeQuorumResponse

# The partitions the core reads fields of.
VoteRequestPartition = vote_req.PartitionData
LeaderAnnouncement = bqe_req.PartitionData | eqe_req.PartitionData
FetchRequestPartition = fetch_req.FetchPartition
FetchSnapshotResponsePartition = fs_resp.PartitionSnapshot
DescribeQuorumReplica = dq_resp.ReplicaState

RaftRequest = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
               | DescribeQuorumRequest | MembershipRequest)
RaftResponse = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
                | FetchSnapshotResponse | DescribeQuorumResponse | MembershipResponse)


def partition_index(partition: Any) -> int:
    for name in ("partition_index", "partition", "index"):
        if hasattr(partition, name):
            return getattr(partition, name)
    raise TypeError(f"{type(partition).__name__} has no partition index")


def single(message: Any) -> tuple[Any, Any] | None:
    """(topic, partition) of the one partition a KRaft request or response names, whichever
    it is, or None if it names none (the membership RPCs: their voter set is the metadata
    partition's) or more than one."""
    topics = getattr(message, "topics", None)
    if topics is None:
        topics = getattr(message, "responses", None)
    if topics is None or len(topics) != 1 or len(topics[0].partitions) != 1:
        return None
    return topics[0], topics[0].partitions[0]


def named(message: Any) -> tuple[Any, int] | None:
    """(topic name, or its id in Fetch; partition index) of the one partition a message names."""
    found = single(message)
    if found is None:
        return None
    topic, partition = found
    key = topic.topic_id if hasattr(topic, "topic_id") else getattr(topic, "topic_name", getattr(topic, "name", None))
    return key, partition_index(partition)


def partition_of(message: Any, where: LogPartition = METADATA) -> Any:
    """The one partition a KRaft request or response is about, or None if it names another
    or more than one."""
    found = single(message)
    if found is None or not where.names(found[0]) or partition_index(found[1]) != where.index:
        return None
    return found[1]


# ---------------------------------------------------------------- Vote


def vote_request(cluster_id: str | None, epoch: int, candidate: int, last_epoch: int, last_offset: int, *,
                 voter: int = -1, pre_vote: bool = False, where: LogPartition = METADATA) -> VoteRequest:
    """A vote asked of `voter` (-1: whoever receives it); with `pre_vote`, only whether it
    would grant one (KIP-996): the epoch is the asker's current one, and the answer changes
    nothing at the voter unless that epoch is newer than its own."""
    p = vote_req.PartitionData(
        partition_index=cast(i32, where.index),
        replica_epoch=cast(i32, epoch),
        replica_id=cast(BrokerId, candidate),
        replica_directory_id=NO_DIRECTORY,
        voter_directory_id=NO_DIRECTORY,
        last_offset_epoch=cast(i32, last_epoch),
        last_offset=cast(i64, last_offset),
        pre_vote=pre_vote,
    )
    return VoteRequest(cluster_id=cluster_id, voter_id=cast(BrokerId, voter),
                       topics=(vote_req.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),))


def vote_response(
    error: ErrorCode, leader_id: int, epoch: int, granted: bool, top_error: ErrorCode = ErrorCode.none,
    where: LogPartition = METADATA,
) -> VoteResponse:
    p = vote_resp.PartitionData(
        partition_index=cast(i32, where.index),
        error_code=error,
        leader_id=cast(BrokerId, leader_id),
        leader_epoch=cast(i32, epoch),
        vote_granted=granted,
    )
    return VoteResponse(error_code=top_error, topics=(vote_resp.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),))


# ---------------------------------------------------------------- BeginQuorumEpoch / EndQuorumEpoch


def begin_quorum_request(cluster_id: str | None, leader_id: int, epoch: int,
                         where: LogPartition = METADATA) -> BeginQuorumEpochRequest:
    p = bqe_req.PartitionData(
        partition_index=cast(i32, where.index), leader_id=cast(BrokerId, leader_id), leader_epoch=cast(i32, epoch)
    )
    return BeginQuorumEpochRequest(
        cluster_id=cluster_id, topics=(bqe_req.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),)
    )


def begin_quorum_response(
    error: ErrorCode, leader_id: int, epoch: int, top_error: ErrorCode = ErrorCode.none,
    where: LogPartition = METADATA,
) -> BeginQuorumEpochResponse:
    p = bqe_resp.PartitionData(
        partition_index=cast(i32, where.index), error_code=error, leader_id=cast(BrokerId, leader_id), leader_epoch=cast(i32, epoch)
    )
    return BeginQuorumEpochResponse(
        error_code=top_error, topics=(bqe_resp.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),)
    )


def end_quorum_request(
    cluster_id: str | None, leader_id: int, epoch: int, successors: tuple[int, ...],
    where: LogPartition = METADATA,
) -> EndQuorumEpochRequest:
    p = eqe_req.PartitionData(
        partition_index=cast(i32, where.index),
        leader_id=cast(BrokerId, leader_id),
        leader_epoch=cast(i32, epoch),
        preferred_successors=cast(tuple[i32, ...], successors),
    )
    return EndQuorumEpochRequest(
        cluster_id=cluster_id, topics=(eqe_req.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),)
    )


def end_quorum_response(
    error: ErrorCode, leader_id: int, epoch: int, top_error: ErrorCode = ErrorCode.none,
    where: LogPartition = METADATA,
) -> EndQuorumEpochResponse:
    p = eqe_resp.PartitionData(
        partition_index=cast(i32, where.index), error_code=error, leader_id=cast(BrokerId, leader_id), leader_epoch=cast(i32, epoch)
    )
    return EndQuorumEpochResponse(
        error_code=top_error, topics=(eqe_resp.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),)
    )


# ---------------------------------------------------------------- Fetch


def fetch_request(
    cluster_id: str | None,
    replica_id: int,
    epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    log_start_offset: int,
    max_wait_ms: int,
    max_bytes: int,
    where: LogPartition = METADATA,
    high_watermark: int = NO_HIGH_WATERMARK,
) -> FetchRequest:
    """`high_watermark`: the fetcher's (KIP-1166; -1: it knows none; by default not given, as
    a Fetch older than v18), which the leader uses to answer a parked Fetch at once when its
    own is ahead."""
    p = fetch_req.FetchPartition(
        partition=cast(i32, where.index),
        current_leader_epoch=cast(i32, epoch),
        fetch_offset=cast(i64, fetch_offset),
        last_fetched_epoch=cast(i32, last_fetched_epoch),
        log_start_offset=cast(i64, log_start_offset),
        partition_max_bytes=cast(i32, max_bytes),
        high_watermark=cast(i64, high_watermark),
    )
    return FetchRequest(
        cluster_id=cluster_id,
        replica_state=fetch_req.ReplicaState(replica_id=cast(BrokerId, replica_id), replica_epoch=cast(i64, -1)),
        max_wait=cast(i32Timedelta, timedelta(milliseconds=max_wait_ms)),
        min_bytes=cast(i32, 1),
        max_bytes=cast(i32, max_bytes),
        topics=(fetch_req.FetchTopic(topic_id=where.topic_id, partitions=(p,)),),
        forgotten_topics_data=(),
    )


def fetch_response(
    error: ErrorCode,
    *,
    top_error: ErrorCode = ErrorCode.none,
    where: LogPartition = METADATA,
    **partition: Any,
) -> FetchResponse:
    """A Fetch answer naming one partition; `partition` holds fetch_partition's fields."""
    return fetch_response_of([(where.topic_id, [fetch_partition(where.index, error, **partition)])], top_error)


def fetch_partition(
    index: int,
    error: ErrorCode,
    *,
    leader_id: int,
    epoch: int,
    high_watermark: int = -1,
    log_start_offset: int = -1,
    records: Any = None,
    diverging: tuple[int, int] | None = None,
    snapshot_id: tuple[int, int] | None = None,
) -> Any:
    """One partition's part of a Fetch answer; `diverging` and `snapshot_id` are (end_offset, epoch)."""
    return fetch_resp.PartitionData(
        partition_index=cast(i32, index),
        error_code=error,
        high_watermark=cast(i64, high_watermark),
        log_start_offset=cast(i64, log_start_offset),
        diverging_epoch=fetch_resp.EpochEndOffset(epoch=cast(i32, diverging[1]), end_offset=cast(i64, diverging[0]))
        if diverging
        else fetch_resp.EpochEndOffset(),
        current_leader=fetch_resp.LeaderIdAndEpoch(leader_id=cast(BrokerId, leader_id), leader_epoch=cast(i32, epoch)),
        snapshot_id=fetch_resp.SnapshotId(end_offset=cast(i64, snapshot_id[0]), epoch=cast(i32, snapshot_id[1]))
        if snapshot_id
        else fetch_resp.SnapshotId(),
        aborted_transactions=None,
        records=records,
    )


def fetch_response_of(topics: Sequence[tuple[uuid.UUID, Sequence[Any]]],
                      top_error: ErrorCode = ErrorCode.none) -> FetchResponse:
    """A Fetch answer of partitions already built (fetch_partition), by topic id: what a node
    answers for a Fetch naming several partitions."""
    return FetchResponse(
        throttle_time=_NO_THROTTLE,
        error_code=top_error,
        responses=tuple(fetch_resp.FetchableTopicResponse(topic_id=topic_id, partitions=tuple(parts))
                        for topic_id, parts in topics),
    )


# ---------------------------------------------------------------- FetchSnapshot


def fetch_snapshot_request(
    cluster_id: str | None, replica_id: int, epoch: int, snapshot_id: tuple[int, int], position: int, max_bytes: int,
    where: LogPartition = METADATA,
) -> FetchSnapshotRequest:
    p = fs_req.PartitionSnapshot(
        partition=cast(i32, where.index),
        current_leader_epoch=cast(i32, epoch),
        snapshot_id=fs_req.SnapshotId(end_offset=cast(i64, snapshot_id[0]), epoch=cast(i32, snapshot_id[1])),
        position=cast(i64, position),
    )
    return FetchSnapshotRequest(
        cluster_id=cluster_id,
        replica_id=cast(BrokerId, replica_id),
        max_bytes=cast(i32, max_bytes),
        topics=(fs_req.TopicSnapshot(name=cast(TopicName, where.topic), partitions=(p,)),),
    )


def fetch_snapshot_partition(
    index: int,
    error: ErrorCode,
    snapshot_id: tuple[int, int],
    *,
    leader_id: int,
    epoch: int,
    size: int = -1,
    position: int = -1,
    records: Any = b"",
) -> FetchSnapshotResponsePartition:
    return fs_resp.PartitionSnapshot(
        index=cast(i32, index),
        error_code=error,
        snapshot_id=fs_resp.SnapshotId(end_offset=cast(i64, snapshot_id[0]), epoch=cast(i32, snapshot_id[1])),
        current_leader=fs_resp.LeaderIdAndEpoch(leader_id=cast(BrokerId, leader_id), leader_epoch=cast(i32, epoch)),
        size=cast(i64, size),
        position=cast(i64, position),
        unaligned_records=records,
    )


def fetch_snapshot_response(
    topics: list[tuple[str, list[FetchSnapshotResponsePartition]]], top_error: ErrorCode = ErrorCode.none
) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        throttle_time=_NO_THROTTLE,
        error_code=top_error,
        topics=tuple(
            fs_resp.TopicSnapshot(name=cast(TopicName, name), partitions=tuple(parts)) for name, parts in topics
        ),
    )


def share_bytes(total: int, wants: list[int]) -> list[int]:
    """Splits a response's byte budget between partitions (KIP-630 "Request Handling").

    Water-filling: each partition gets at least an equal share of `total` if it wants that
    much, and what a partition cannot use goes to the others. Returns each one's bytes.
    """
    shares = [0] * len(wants)
    active = [i for i, want in enumerate(wants) if want > 0]
    remaining = max(total, 0)
    while active and remaining > 0:
        each = remaining // len(active)
        if each == 0:  # fewer bytes left than partitions: one more byte each, in order
            for i in active[:remaining]:
                shares[i] += 1
            break
        still = []
        for i in active:
            give = min(wants[i] - shares[i], each)
            shares[i] += give
            remaining -= give
            if shares[i] < wants[i]:
                still.append(i)
        active = still
    return shares


# ---------------------------------------------------------------- DescribeQuorum


def describe_quorum_request(where: LogPartition = METADATA) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=(dq_req.TopicData(topic_name=cast(TopicName, where.topic), partitions=(dq_req.PartitionData(partition_index=cast(i32, where.index)),)),)
    )


def replica_state(
    replica_id: int, log_end_offset: int, last_fetch_ms: int, last_caught_up_ms: int
) -> DescribeQuorumReplica:
    return dq_resp.ReplicaState(
        replica_id=cast(BrokerId, replica_id),
        log_end_offset=cast(i64, log_end_offset),
        last_fetch_timestamp=cast(i64, last_fetch_ms),
        last_caught_up_timestamp=cast(i64, last_caught_up_ms),
    )


def describe_quorum_response(
    error: ErrorCode,
    *,
    leader_id: int,
    epoch: int,
    high_watermark: int = -1,
    voters: tuple[DescribeQuorumReplica, ...] = (),
    observers: tuple[DescribeQuorumReplica, ...] = (),
    where: LogPartition = METADATA,
) -> DescribeQuorumResponse:
    p = dq_resp.PartitionData(
        partition_index=cast(i32, where.index),
        error_code=error,
        leader_id=cast(BrokerId, leader_id),
        leader_epoch=cast(i32, epoch),
        high_watermark=cast(i64, high_watermark),
        current_voters=voters,
        observers=observers,
    )
    return DescribeQuorumResponse(
        error_code=ErrorCode.none, topics=(dq_resp.TopicData(topic_name=cast(TopicName, where.topic), partitions=(p,)),)
    )
