"""Where kraft once answered differently from Kafka's KafkaRaftClient, it now answers as
Kafka does; one test per behaviour, named after it (issue 19)."""

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.raft.follower_download import FETCH_SNAPSHOT_MAX_BYTES
from kraft.storage import ElectionState, SnapshotId

from .conftest import Node, grant_votes, leader_node, partition
from .test_snapshots import answer, fetch_snapshot, follower_of, snapshot_leader


def test_end_quorum_epoch_to_an_unattached_voter_of_the_same_epoch_makes_it_follow_and_campaign_at_once():
    first, second = (Node(n, state=ElectionState(1, None, None, (1, 2, 3))) for n in (2, 3))
    assert first.core.role == second.core.role == Role.UNATTACHED
    for voter in (first, second):
        assert partition(voter.request(m.end_quorum_request("c", 1, 1, (2, 3)))).error_code == ErrorCode.none
    assert (first.core.role, first.core.epoch) == (Role.PROSPECTIVE, 1), "first successor: no election timeout"
    assert (second.core.role, second.core.leader_id) == (Role.FOLLOWER, 1), "it follows the resigning leader"
    assert second.core.state.fetch_deadline < second.now + second.config.election_timeout_ms


def test_parked_fetches_of_a_leader_that_steps_down_learn_the_new_leader_and_epoch():
    leader = leader_node()
    parked = m.fetch_request("c", 2, 1, leader.log.end_offset, 1, 0, 500, 1 << 20)
    leader.request(parked)  # moves the high watermark, so it is answered at once
    assert leader.request(parked, handle="parked") is None, "nothing to send yet: parked"
    leader.request(m.begin_quorum_request("c", 3, 2))
    (reply,) = [o for o in leader.outbox() if getattr(o, "handle", None) == "parked"]
    p = partition(reply.response)
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (3, 2), "no extra round trip to learn it"


def campaign(voters):
    """Node 1 a candidate, after the pre-votes of a majority."""
    node = Node(1, voters=voters)
    node.advance(3000)
    grant_votes(node, voters=voters[1:len(voters) // 2 + 1])
    assert node.core.role == Role.CANDIDATE
    return node, {s.destination: s for s in node.sends(m.VoteRequest)}


def refuse(node, send):
    node.core.handle_response(send.request_id, m.vote_response(ErrorCode.none, -1, node.core.epoch, False), node.now)


def test_a_candidate_asks_again_by_pre_vote_once_the_votes_granted_and_unanswered_cannot_make_a_majority():
    node, votes = campaign((1, 2))
    refuse(node, votes[2])
    assert node.core.role == Role.PROSPECTIVE, "two voters: one refusal loses"
    node, votes = campaign((1, 2, 3, 4))
    refuse(node, votes[2])
    assert node.core.role == Role.CANDIDATE, "four voters: 1 granted + 2 unanswered can still win"
    refuse(node, votes[3])
    assert (node.core.role, node.core.epoch) == (Role.PROSPECTIVE, 1), "1 granted + 1 unanswered cannot"


def test_a_fetch_answer_naming_half_a_snapshot_id_is_retried_after_the_backoff():
    follower = Node(2, state=ElectionState(1, 1, None, (1, 2, 3)))
    follower.advance(0)
    (send,) = follower.sends(m.FetchRequest)
    broken = m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, snapshot_id=(7, -1))
    follower.core.handle_response(send.request_id, broken, follower.now)
    assert follower.core.state.download is None
    follower.advance(0)
    assert follower.sends() == [], "not asked again at once"
    follower.advance(follower.config.retry_backoff_ms)
    (again,) = follower.sends(m.FetchRequest)
    assert partition(again.request).fetch_offset == 0


def test_fetch_snapshot_at_the_end_of_the_snapshot_is_position_out_of_range():
    leader, reader = snapshot_leader()
    p = leader.request(fetch_snapshot(position=reader.size)).topics[0].partitions[0]
    assert p.error_code == ErrorCode.position_out_of_range
    p = leader.request(fetch_snapshot(position=reader.size - 1)).topics[0].partitions[0]
    assert p.error_code == ErrorCode.none and len(bytes(p.unaligned_records)) == 1


def test_the_bootstrap_snapshot_id_is_never_served():
    leader, _ = snapshot_leader()
    writer = leader.snapshots.create_writer(SnapshotId(0, 0), 0)  # as `storage format` leaves it
    writer.append([(None, b"bootstrap")])
    writer.freeze()
    assert SnapshotId(0, 0) in leader.snapshots.list()
    p = leader.request(fetch_snapshot(sid=(0, 0))).topics[0].partitions[0]
    assert p.error_code == ErrorCode.snapshot_not_found


def test_the_leader_resends_begin_quorum_epoch_only_to_voters_that_have_not_fetched():
    """KAFKA-16926 (Kafka 4.0): every half fetch timeout, to the voters not heard from in it."""
    leader = leader_node()
    assert sorted(s.destination for s in leader.announced) == [2, 3]
    for s in leader.announced:
        leader.core.handle_response(s.request_id, m.begin_quorum_response(ErrorCode.none, 1, 1), leader.now)
    for replica in (2, 3):  # both follow: they fetch, and acknowledged the epoch
        leader.request(m.fetch_request("c", replica, 1, leader.log.end_offset, 1, 0, 0, 1 << 20))
    half = leader.config.fetch_timeout_ms // 2
    leader.advance(half - 1)
    assert leader.sends(m.BeginQuorumEpochRequest) == []
    leader.request(m.fetch_request("c", 2, 1, leader.log.end_offset, 1, 0, 0, 1 << 20))  # 2 goes on fetching
    leader.advance(1)
    assert [s.destination for s in leader.sends(m.BeginQuorumEpochRequest)] == [3]


def test_a_candidate_whose_election_times_out_goes_prospective_at_once():
    """KafkaRaftClientTest.testEndQuorumIgnoredAsCandidateIfOlderEpoch, as of Kafka 4.x: no
    backoff between a candidate's timeout and its next pre-vote."""
    node = Node(1, voters=(1, 2), state=ElectionState(4, None, None, (1, 2)))
    node.advance(3000)
    grant_votes(node)
    assert (node.core.role, node.core.epoch) == (Role.CANDIDATE, 5)
    answer = node.request(m.end_quorum_request("c", 2, 3, (1,)))
    assert partition(answer).error_code == ErrorCode.fenced_leader_epoch
    node.advance(node.core.state.election_deadline - node.now - 1)
    assert node.core.role == Role.CANDIDATE
    node.advance(1)
    assert (node.core.role, node.core.epoch) == (Role.PROSPECTIVE, 5)


def test_a_resigned_leader_grants_an_up_to_date_pre_vote():
    leader = leader_node()
    leader.core.resign(leader.now)
    assert leader.core.role == Role.RESIGNED
    end = leader.log.end_offset
    p = partition(leader.request(m.vote_request("c", 1, 2, 1, end, voter=1, pre_vote=True)))
    assert p.vote_granted
    p = partition(leader.request(m.vote_request("c", 1, 2, 0, 0, voter=1, pre_vote=True)))
    assert not p.vote_granted, "not one behind its log"


def test_a_prospective_that_knows_no_leader_and_loses_its_pre_vote_becomes_unattached():
    node = Node(1)
    node.advance(3000)
    assert node.core.role == Role.PROSPECTIVE and node.core.leader_id is None
    votes = node.sends(m.VoteRequest)
    for vote in votes:
        refuse(node, vote)
    assert (node.core.role, node.core.epoch) == (Role.UNATTACHED, 0)
    assert node.core.state.election_deadline > node.now, "a new election timeout, not a backoff"


def test_a_follower_whose_leader_resigned_refuses_pre_votes_once_it_has_fetched():
    follower = follower_of()
    follower.advance(1)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=0))
    follower.request(m.end_quorum_request("c", 1, 1, (3, 2)))
    assert follower.core.role == Role.FOLLOWER and follower.core.state.leader_resigned
    p = partition(follower.request(m.vote_request("c", 1, 3, 0, 0, voter=2, pre_vote=True)))
    assert not p.vote_granted


def test_the_second_successor_waits_half_the_election_backoff():
    """Kafka's strict exponential backoff: with two successors the second waits
    election.backoff.max / 2 (50 ms in Kafka's tests, whose maximum is 100 ms)."""
    node = Node(3, state=ElectionState(1, None, None, (1, 2, 3)), election_backoff_max_ms=100)
    node.request(m.end_quorum_request("c", 1, 1, (2, 3)))
    assert node.core.role == Role.FOLLOWER
    assert node.core.state.fetch_deadline == node.now + 50


def test_a_follower_asks_fetch_snapshot_for_kafkas_8_mib():
    leader, _ = snapshot_leader()
    follower = follower_of()
    follower.advance(1)
    answer(follower, leader.request(m.fetch_request("c", 2, 1, 0, 0, 0, 0, 1 << 20)))
    (send,) = follower.sends(m.FetchSnapshotRequest)
    assert send.request.max_bytes == FETCH_SNAPSHOT_MAX_BYTES == 8 * 1024 * 1024


def test_a_fetch_answer_with_an_invalid_snapshot_id_does_not_reset_the_fetch_timer():
    follower = follower_of()
    follower.advance(1)
    deadline = follower.core.state.fetch_deadline
    follower.advance(100)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, snapshot_id=(7, -1)))
    assert follower.core.state.fetch_deadline == deadline
    assert not follower.core.state.fetched
