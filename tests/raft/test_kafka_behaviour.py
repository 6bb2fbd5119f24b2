"""Where kraft once answered differently from Kafka's KafkaRaftClient, it now answers as
Kafka does; one test per behaviour, named after it (issue 19)."""

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.storage import ElectionState, SnapshotId

from .conftest import Node, grant_votes, leader_node, partition
from .test_snapshots import fetch_snapshot, snapshot_leader


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


def test_a_candidate_backs_off_once_the_votes_granted_and_unanswered_cannot_make_a_majority():
    node, votes = campaign((1, 2))
    refuse(node, votes[2])
    assert node.core.state.backoff_until is not None, "two voters: one refusal loses"
    node, votes = campaign((1, 2, 3, 4))
    refuse(node, votes[2])
    assert node.core.state.backoff_until is None, "four voters: 1 granted + 2 unanswered can still win"
    refuse(node, votes[3])
    assert node.core.state.backoff_until is not None, "1 granted + 1 unanswered cannot"


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


def test_the_leader_sends_begin_quorum_epoch_as_a_heartbeat_every_half_fetch_timeout():
    leader = leader_node()
    assert sorted(s.destination for s in leader.announced) == [2, 3]
    for s in leader.announced:
        leader.core.handle_response(s.request_id, m.begin_quorum_response(ErrorCode.none, 1, 1), leader.now)
    for replica in (2, 3):  # both follow: they fetch, and acknowledged the epoch
        leader.request(m.fetch_request("c", replica, 1, leader.log.end_offset, 1, 0, 0, 1 << 20))
    leader.advance(leader.config.fetch_timeout_ms // 2 - 1)
    assert leader.sends(m.BeginQuorumEpochRequest) == []
    leader.advance(1)
    assert sorted(s.destination for s in leader.sends(m.BeginQuorumEpochRequest)) == [2, 3]
