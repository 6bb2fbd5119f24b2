"""Elections, leadership, followers, divergence, check quorum, resignation, restarts."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import InvariantViolation, LeaderAndEpoch, NotLeaderError, Role
from kraft.raft import messages as m
from kraft.records import ControlType, decode_control_record, read_batches
from kraft.storage import ElectionState

from .conftest import Node, follower_batch, grant_votes, leader_node, partition, records


def test_a_single_voter_elects_itself_and_commits_its_leader_change():
    n = Node(1, voters=(1,))
    n.advance(2000)
    assert n.core.role == Role.LEADER and n.core.epoch == 1
    assert n.store.read() == ElectionState(1, 1, 1, (1,))
    (batch,) = list(read_batches(n.log.read(0, 1 << 20).tobytes()))
    change = decode_control_record(batch.records()[0])
    assert (change.leader_id, change.voters, change.granting_voters) == (1, (1,), (1,))
    assert n.core.high_watermark is None
    n.flush()
    assert n.core.high_watermark == 1


def test_a_candidate_asks_every_other_voter_with_its_last_epoch_and_offset():
    n = Node(1)
    n.log.append_as_follower(follower_batch(4, 2, 0))
    n.store.write(ElectionState(2, None, None, (1, 2, 3)))
    n.core = type(n.core)(n.config, n.log, n.store, __import__("random").Random(3), 0, n.listener)
    n.advance(3000)
    pre_votes = n.sends(m.VoteRequest)
    assert sorted(v.destination for v in pre_votes) == [2, 3]
    p = partition(pre_votes[0].request)
    assert (p.pre_vote, p.replica_epoch, p.replica_id, p.last_offset_epoch, p.last_offset) == (True, 2, 1, 2, 4)
    assert n.store.read() == ElectionState(2, None, None, (1, 2, 3)), "a pre-vote writes nothing"
    n.core.handle_response(pre_votes[0].request_id, m.vote_response(ErrorCode.none, -1, 2, True), n.now)
    votes = n.sends(m.VoteRequest)
    assert sorted(v.destination for v in votes) == [2, 3]
    p = partition(votes[0].request)
    assert (p.pre_vote, p.replica_epoch, p.replica_id, p.last_offset_epoch, p.last_offset) == (False, 3, 1, 2, 4)
    assert n.store.read() == ElectionState(3, None, 1, (1, 2, 3)), "voted for itself, durably, first"


def test_the_new_leader_announces_itself_and_followers_learn_it():
    leader = leader_node()
    assert sorted(b.destination for b in leader.announced if isinstance(b.request, m.BeginQuorumEpochRequest)) == [2, 3]
    follower = Node(3)
    response = follower.request(m.begin_quorum_request("c", 1, 1))
    assert partition(response).error_code == ErrorCode.none
    assert (follower.core.role, follower.core.leader_id, follower.core.epoch) == (Role.FOLLOWER, 1, 1)
    assert follower.listener.leaders[-1] == LeaderAndEpoch(1, 1)
    fetches = follower.sends(m.FetchRequest)
    assert fetches and fetches[0].destination == 1


def test_two_leaders_in_one_epoch_is_refused():
    leader = leader_node()
    response = leader.request(m.begin_quorum_request("c", 2, 1))
    assert partition(response).error_code == ErrorCode.invalid_request
    assert (leader.core.role, leader.core.epoch) == (Role.LEADER, 1)


def test_append_on_a_follower_raises_not_leader():
    follower = Node(2, state=ElectionState(3, 1, None, (1, 2, 3)))
    with pytest.raises(NotLeaderError) as err:
        follower.core.append(records(1), 0)
    assert (err.value.leader_id, err.value.epoch) == (1, 3)


def follower_of_1(epoch=2):
    node = Node(2, state=ElectionState(epoch, 1, None, (1, 2, 3)))
    node.log.append_as_follower(follower_batch(3, 1, 0))
    node.log.append_as_follower(follower_batch(3, 2, 3))
    node.log.flush()
    return node


def answer_fetch(node, **fields):
    (fetch,) = node.sends(m.FetchRequest)
    defaults = {"leader_id": 1, "epoch": node.core.epoch, "high_watermark": -1}
    response = m.fetch_response(ErrorCode.none, **{**defaults, **fields})
    node.core.handle_response(fetch.request_id, response, node.now)
    return fetch


def test_a_follower_truncates_on_divergence_and_fetches_again():
    node = follower_of_1()
    node.advance(1)
    answer_fetch(node, diverging=(4, 2))
    assert node.log.end_offset == 3, "the batch 3..5 holding offset 4 goes whole"
    (again,) = node.sends(m.FetchRequest)
    assert (partition(again.request).fetch_offset, partition(again.request).last_fetched_epoch) == (3, 1)


def test_a_follower_never_truncates_below_its_high_watermark():
    node = follower_of_1()
    node.advance(1)
    answer_fetch(node, high_watermark=6)
    node.advance(1)
    with pytest.raises(InvariantViolation, match="below the high watermark 6"):
        answer_fetch(node, diverging=(2, 1))
    assert node.log.end_offset == 6


def test_a_follower_appends_flushes_then_fetches_from_its_flushed_end():
    node = follower_of_1()
    node.advance(1)
    answer_fetch(node, records=follower_batch(2, 2, 6), high_watermark=8)
    assert node.log.end_offset == 8 and not node.sends(m.FetchRequest), "no fetch before the flush"
    node.flush()
    (fetch,) = node.sends(m.FetchRequest)
    assert partition(fetch.request).fetch_offset == 8 == node.log.last_flushed_offset
    assert [b.base_offset for b in node.listener.batches] == [0, 3, 6]


def test_a_follower_without_news_from_its_leader_starts_an_election():
    node = follower_of_1()
    node.advance(node.config.fetch_timeout_ms)
    assert node.core.role == Role.PROSPECTIVE and node.core.epoch == 2, "first: could it win?"
    grant_votes(node, voters=(3,))
    assert node.core.role == Role.CANDIDATE and node.core.epoch == 3


def test_check_quorum_the_leader_resigns_after_one_and_a_half_fetch_timeouts_without_a_majority():
    """Kafka's LeaderState: 1.5 x controller.quorum.fetch.timeout.ms, slack for the network and IO."""
    leader = leader_node()
    leader.request(m.fetch_request("c", 3, 1, 1, 1, 0, 0, 1 << 20))  # voter 3 is at offset 1
    leader.advance(leader.config.fetch_timeout_ms * 3 // 2 - 1)
    assert leader.core.role == Role.LEADER
    leader.advance(1)
    assert leader.core.role == Role.RESIGNED
    ends = leader.sends(m.EndQuorumEpochRequest)
    assert sorted(e.destination for e in ends) == [2, 3]
    assert partition(ends[0].request).preferred_successors == (3, 2), "most caught up first"


def test_graceful_resignation_lets_the_first_successor_campaign_at_once():
    leader = leader_node()
    leader.core.resign(leader.now)
    assert leader.core.role == Role.RESIGNED
    follower = Node(2, state=ElectionState(1, 1, None, (1, 2, 3)))
    follower.request(m.end_quorum_request("c", 1, 1, (2, 3)))
    follower.advance(0)
    assert follower.core.role == Role.PROSPECTIVE and follower.core.epoch == 1, "asking at once"
    other = Node(3, state=ElectionState(1, 1, None, (1, 2, 3)))
    other.request(m.end_quorum_request("c", 1, 1, (2, 3)))
    other.advance(0)
    assert other.core.role == Role.FOLLOWER, "the second successor waits a backoff"


def test_a_resigned_leader_hands_over_until_every_voter_has_its_end_quorum_epoch():
    leader = leader_node()
    assert not leader.core.handing_over
    leader.core.resign(leader.now)
    ends = {e.destination: e for e in leader.sends(m.EndQuorumEpochRequest)}
    assert sorted(ends) == [2, 3] and leader.core.handing_over
    ack = m.end_quorum_response(ErrorCode.none, 1, 1)
    leader.core.handle_response(ends[2].request_id, ack, leader.now)
    refused = m.end_quorum_response(ErrorCode.none, 1, 1, top_error=ErrorCode.cluster_authorization_failed)
    leader.core.handle_response(ends[3].request_id, refused, leader.now)
    assert leader.core.handing_over, "voter 3 has not acknowledged it"
    leader.advance(leader.config.retry_backoff_ms)
    (retry,) = leader.sends(m.EndQuorumEpochRequest)
    assert retry.destination == 3
    leader.core.handle_response(retry.request_id, ack, leader.now)
    assert not leader.core.handing_over


def test_a_resigned_leader_is_done_handing_over_once_a_newer_epoch_campaigns():
    leader = leader_node()
    leader.core.resign(leader.now)
    leader.request(m.vote_request("c", 2, 3, 1, 1))
    assert leader.core.epoch == 2 and not leader.core.handing_over


@pytest.mark.parametrize(
    "state,role",
    [
        (ElectionState(5, 1, 1, (1, 2, 3)), Role.RESIGNED),
        (ElectionState(5, 2, None, (1, 2, 3)), Role.FOLLOWER),
        (ElectionState(5, None, 1, (1, 2, 3)), Role.CANDIDATE),
        (ElectionState(5, None, 3, (1, 2, 3)), Role.VOTED),
        (ElectionState(5, None, None, (1, 2, 3)), Role.UNATTACHED),
    ],
)
def test_restart_resumes_from_quorum_state(state, role):
    node = Node(1, state=state)
    assert (node.core.role, node.core.epoch) == (role, 5)


def test_a_restarted_leader_does_not_lead_its_old_epoch_again():
    node = Node(1, state=ElectionState(5, 1, 1, (1, 2, 3)))
    ends = node.sends(m.EndQuorumEpochRequest)
    assert sorted(e.destination for e in ends) == [2, 3]
    node.advance(3000)
    assert node.core.role == Role.PROSPECTIVE and node.core.epoch == 5
    grant_votes(node)
    assert node.core.role == Role.CANDIDATE and node.core.epoch == 6


def test_observers_find_the_leader_by_asking_any_voter():
    observer = Node(4)
    observer.advance(1)
    (fetch,) = observer.sends(m.FetchRequest)
    assert fetch.destination in (1, 2, 3)
    response = m.fetch_response(ErrorCode.not_leader_or_follower, leader_id=2, epoch=6)
    observer.core.handle_response(fetch.request_id, response, observer.now)
    assert (observer.core.role, observer.core.leader_id, observer.core.epoch) == (Role.FOLLOWER, 2, 6)
    (again,) = observer.sends(m.FetchRequest)
    assert again.destination == 2


def test_a_leader_change_control_record_opens_every_epoch():
    leader = leader_node()
    (batch,) = list(read_batches(leader.log.read(0, 1 << 20).tobytes()))
    assert batch.header.is_control and batch.header.partition_leader_epoch == 1
    from kraft.records.control import parse_control_key

    assert parse_control_key(batch.records()[0].key) == ControlType.LEADER_CHANGE


def observer_that_lost_leader_1() -> Node:
    """An observer that followed leader 1 of epoch 6 until its fetches went unanswered."""
    observer = Node(4)
    observer.advance(1)
    (fetch,) = observer.sends(m.FetchRequest)
    observer.core.handle_response(fetch.request_id, m.fetch_response(ErrorCode.none, leader_id=1, epoch=6), observer.now)
    assert (observer.core.role, observer.core.leader_id) == (Role.FOLLOWER, 1)
    while observer.core.role == Role.FOLLOWER:
        observer.sends()
        observer.advance(100)
    return observer


def run_discovery(observer: Node, answer, until) -> set[int]:
    """Lets `answer(destination)` reply to each Fetch (None: no reply, the request times out)
    until `until()` holds or three request timeouts pass; returns who was asked."""
    asked: set[int] = set()
    deadline = observer.now + 3 * observer.config.request_timeout_ms
    while not until() and observer.now < deadline:
        for s in observer.sends(m.FetchRequest):
            asked.add(s.destination)
            reply = answer(s.destination)
            if reply is not None:
                observer.core.handle_response(s.request_id, reply, observer.now)
        observer.advance(observer.config.retry_backoff_ms)
    return asked


def test_an_observer_that_lost_its_leader_waits_for_a_newer_one_instead_of_following_it_again():
    observer = observer_that_lost_leader_1()
    stale = m.fetch_response(ErrorCode.not_leader_or_follower, leader_id=1, epoch=6)
    # Voters that have not noticed the loss yet still name leader 1 of epoch 6; node 1 is down.
    asked = run_discovery(observer, lambda d: None if d == 1 else stale, until=lambda: False)
    assert {2, 3} <= asked, "it keeps asking the voters instead of waiting out another fetch timeout"
    assert (observer.core.role, observer.core.epoch) == (Role.UNATTACHED, 6)
    fresh = m.fetch_response(ErrorCode.not_leader_or_follower, leader_id=3, epoch=7)
    run_discovery(observer, lambda d: None if d == 1 else fresh, until=lambda: observer.core.role == Role.FOLLOWER)
    assert (observer.core.role, observer.core.leader_id, observer.core.epoch) == (Role.FOLLOWER, 3, 7)


def test_an_observer_follows_its_lost_leader_again_when_that_leader_answers_itself():
    observer = observer_that_lost_leader_1()
    stale = m.fetch_response(ErrorCode.not_leader_or_follower, leader_id=1, epoch=6)
    alive = m.fetch_response(ErrorCode.none, leader_id=1, epoch=6)
    run_discovery(observer, lambda d: alive if d == 1 else stale, until=lambda: observer.core.role == Role.FOLLOWER)
    assert (observer.core.role, observer.core.leader_id, observer.core.epoch) == (Role.FOLLOWER, 1, 6)


@pytest.mark.parametrize(
    "announcement",
    [
        lambda: m.begin_quorum_request("c", 2, 4),
        lambda: m.end_quorum_request("c", 2, 4, (1, 3)),
    ],
    ids=["BeginQuorumEpoch", "EndQuorumEpoch"],
)
def test_a_leader_announcement_from_an_older_epoch_is_fenced(announcement):
    node = Node(1, state=ElectionState(5, 3, None, (1, 2, 3)))
    deadline = node.core.state.fetch_deadline
    p = partition(node.request(announcement()))
    assert p.error_code == ErrorCode.fenced_leader_epoch
    assert (p.leader_id, p.leader_epoch) == (3, 5), "the answer names the leader it knows"
    assert (node.core.role, node.core.epoch, node.core.leader_id) == (Role.FOLLOWER, 5, 3)
    assert node.core.state.fetch_deadline == deadline, "an old leader's EndQuorumEpoch does not start an election"
    node.advance(1)
    assert node.core.role == Role.FOLLOWER and node.core.leader_id == 3
