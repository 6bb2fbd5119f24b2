"""A core replicates the partition its RaftConfig names: every RPC it sends names that
partition, and a request naming another (the metadata partition, to a `__consumer_offsets`
core) is refused with UNKNOWN_TOPIC_OR_PARTITION, never taken as its own."""

import uuid

from kraft.protocol import ErrorCode
from kraft.raft import messages as m

from .conftest import Node, grant_votes

OFFSETS_1 = m.LogPartition("__consumer_offsets", uuid.UUID(int=7), 1)


def offsets_leader() -> Node:
    node = Node(1, partition=OFFSETS_1)
    node.advance(3000)
    for _ in range(2):  # pre-vote, then vote, each granted by voter 2 in this partition's own terms
        for vote in node.sends(m.VoteRequest):
            assert m.named(vote.request) == ("__consumer_offsets", 1)
            if vote.destination == 2:
                node.core.handle_response(vote.request_id, m.vote_response(
                    ErrorCode.none, -1, node.core.epoch, True, where=OFFSETS_1), node.now)
    node.flush()
    assert node.core.is_leader
    return node


def test_the_rpcs_of_a_core_name_its_partition_by_name_and_topic_id():
    node = offsets_leader()
    announcements = node.sends(m.BeginQuorumEpochRequest)
    assert announcements and all(m.named(s.request) == ("__consumer_offsets", 1) for s in announcements)
    fetch = m.fetch_request("c", 2, 1, 0, 0, 0, 0, 1 << 20, where=OFFSETS_1)
    answer = node.request(fetch)
    assert m.named(answer) == (OFFSETS_1.topic_id, 1)
    assert m.partition_of(answer, OFFSETS_1).error_code == ErrorCode.none


def test_a_request_naming_another_partition_is_unknown_to_the_core():
    node = offsets_leader()
    epoch = node.core.epoch
    fetch = node.request(m.fetch_request("c", 2, epoch, 0, 0, 0, 0, 1 << 20))  # __cluster_metadata-0
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    begin = node.request(m.begin_quorum_request("c", 2, epoch + 1))
    assert begin.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    assert node.core.is_leader and node.core.epoch == epoch, "nothing another partition said moved this one"
    other_index = m.LogPartition("__consumer_offsets", OFFSETS_1.topic_id, 2)
    quorum = node.request(m.describe_quorum_request(other_index))
    assert quorum.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_votes_granted_in_another_partition_do_not_elect_the_core():
    """A metadata-partition vote answer does not count for a __consumer_offsets core."""
    node = Node(1, partition=OFFSETS_1)
    node.advance(3000)
    grant_votes(node)  # answers in __cluster_metadata-0's terms
    assert not node.core.is_leader
