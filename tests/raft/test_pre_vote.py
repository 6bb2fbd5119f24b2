"""Pre-vote (KIP-996), one behaviour per test: a voter asks whether it could win before it
campaigns, and a voter that cannot win never bumps the epoch or deposes a live leader."""

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.storage import ElectionState

from .conftest import Node, follower_batch, partition


def pre_vote(epoch, candidate=2, last_epoch=0, last_offset=0, voter=-1):
    return m.vote_request("c", epoch, candidate, last_epoch, last_offset, voter=voter, pre_vote=True)


def follower_of_1(epoch=2):
    node = Node(3, state=ElectionState(epoch, 1, None, (1, 2, 3)))
    node.log.append_as_follower(follower_batch(3, 1, 0))
    node.log.flush()
    return node


def test_a_pre_vote_is_granted_and_changes_nothing_at_the_voter():
    node = Node(1, state=ElectionState(3, None, None, (1, 2, 3)))
    writes = node.store.writes
    p = partition(node.request(pre_vote(3, last_epoch=2, last_offset=5)))
    assert (p.error_code, p.vote_granted, p.leader_epoch) == (ErrorCode.none, True, 3)
    assert (node.core.role, node.core.voted_id, node.store.writes) == (Role.UNATTACHED, None, writes)
    again = partition(node.request(pre_vote(3, candidate=3, last_epoch=2, last_offset=5)))
    assert again.vote_granted, "granting a pre-vote is not a vote: another asker may be told yes too"


def test_a_pre_vote_from_a_log_behind_ours_is_refused():
    node = follower_of_1()  # it has not fetched yet: it would grant, but for the log
    assert not partition(node.request(pre_vote(2, last_epoch=1, last_offset=2))).vote_granted
    assert partition(node.request(pre_vote(2, last_epoch=1, last_offset=3))).vote_granted


def test_a_follower_refuses_pre_votes_once_its_leader_has_answered_it():
    node = follower_of_1()
    assert partition(node.request(pre_vote(2, last_epoch=1, last_offset=3))).vote_granted, \
        "no answer from its leader yet: nothing says the leader is alive"
    node.advance(0)
    (fetch,) = node.sends(m.FetchRequest)
    node.core.handle_response(fetch.request_id, m.fetch_response(ErrorCode.none, leader_id=1, epoch=2), node.now)
    refused = partition(node.request(pre_vote(2, last_epoch=1, last_offset=3)))
    assert (refused.vote_granted, refused.leader_id, refused.leader_epoch) == (False, 1, 2), "names its leader"
    node.request(m.end_quorum_request("c", 1, 2, (2, 3)))
    refused = partition(node.request(pre_vote(2, last_epoch=1, last_offset=3)))
    assert not refused.vote_granted, "as Kafka's FollowerState: its leader resigned, but has answered it"


def test_a_pre_vote_of_a_newer_epoch_moves_the_voter_to_it_as_kafka():
    node = Node(1, state=ElectionState(3, None, None, (1, 2, 3)))
    p = partition(node.request(pre_vote(5, last_epoch=2, last_offset=5)))
    assert p.vote_granted and (node.core.role, node.core.epoch, node.core.voted_id) == (Role.UNATTACHED, 5, None)


def test_a_pre_vote_may_come_from_a_log_of_its_own_epoch_but_not_newer():
    node = Node(1, state=ElectionState(3, None, None, (1, 2, 3)))
    assert partition(node.request(pre_vote(3, last_epoch=3, last_offset=5))).error_code == ErrorCode.none
    assert partition(node.request(pre_vote(3, last_epoch=4, last_offset=5))).error_code == ErrorCode.invalid_request


def test_a_vote_meant_for_another_voter_is_refused():
    node = Node(1)
    p = partition(node.request(pre_vote(0, voter=3)))
    assert (p.error_code, p.vote_granted) == (ErrorCode.invalid_voter_key, False)


def test_a_voter_cut_off_from_the_others_never_bumps_the_epoch():
    node = Node(1, state=ElectionState(4, None, None, (1, 2, 3)))
    for _ in range(5):
        node.advance(3000)
        for send in node.sends(m.VoteRequest):
            assert partition(send.request).pre_vote
            node.core.handle_send_failure(send.request_id, node.now)
    assert node.core.role in (Role.PROSPECTIVE, Role.UNATTACHED) and node.core.epoch == 4
    assert node.store.read() == ElectionState(4, None, None, (1, 2, 3)), "nothing written"


def test_a_rejoining_voter_follows_the_leader_the_others_still_hear_from():
    """Cut off in epoch 4 while the others went on to epoch 6: its pre-vote is answered with
    the newer epoch and its leader, which it follows, without deposing anyone."""
    node = Node(1, state=ElectionState(4, 3, None, (1, 2, 3)))
    node.advance(node.config.fetch_timeout_ms)  # no answer from its leader
    assert (node.core.role, node.core.leader_id) == (Role.PROSPECTIVE, 3), "still names the leader it followed"
    send = node.sends(m.VoteRequest)[0]
    refused = m.vote_response(ErrorCode.fenced_leader_epoch, 2, 6, False)
    node.core.handle_response(send.request_id, refused, node.now)
    assert (node.core.role, node.core.leader_id, node.core.epoch) == (Role.FOLLOWER, 2, 6)


def test_a_prospective_campaigns_once_a_majority_would_vote_for_it():
    node = Node(1, voters=(1, 2, 3, 4, 5))
    node.advance(3000)
    asked = {s.destination: s for s in node.sends(m.VoteRequest)}
    assert sorted(asked) == [2, 3, 4, 5]
    for voter, role in ((2, Role.PROSPECTIVE), (3, Role.CANDIDATE)):  # itself, 2, then 3: a majority of 5
        granted = m.vote_response(ErrorCode.none, -1, 0, True)
        node.core.handle_response(asked[voter].request_id, granted, node.now)
        assert node.core.role == role
    assert node.core.epoch == 1


def test_a_prospective_grants_a_real_vote_only_if_it_knows_no_leader_and_has_not_voted():
    unattached = Node(1, state=ElectionState(3, None, None, (1, 2, 3)))
    unattached.advance(3000)
    assert unattached.core.role == Role.PROSPECTIVE
    vote = m.vote_request("c", 3, 2, 0, 0)
    assert partition(unattached.request(vote)).vote_granted
    assert (unattached.core.role, unattached.core.voted_id) == (Role.VOTED, 2)
    following = follower_of_1(epoch=3)
    following.advance(following.config.fetch_timeout_ms)
    assert following.core.role == Role.PROSPECTIVE
    assert not partition(following.request(m.vote_request("c", 3, 2, 1, 3))).vote_granted, \
        "a leader of epoch 3 is known"


def test_a_single_voter_elects_itself_at_once():
    node = Node(1, voters=(1,))
    node.advance(3000)
    assert (node.core.role, node.core.epoch) == (Role.LEADER, 1)


def test_a_grant_from_a_voter_still_naming_the_old_leader_counts():
    """Every voter answering a follower's pre-vote names the leader it last knew: the answer
    is a grant to count, not news of a leader to follow again (else no one ever campaigns
    after a leader dies)."""
    node = follower_of_1()
    node.advance(node.config.fetch_timeout_ms)
    asked = {s.destination: s for s in node.sends(m.VoteRequest)}
    node.core.handle_response(asked[2].request_id, m.vote_response(ErrorCode.none, 1, 2, True), node.now)
    assert (node.core.role, node.core.epoch) == (Role.CANDIDATE, 3)


def test_a_follower_whose_pre_vote_fails_follows_its_leader_again():
    node = follower_of_1()
    node.advance(node.config.fetch_timeout_ms)
    asked = {s.destination: s for s in node.sends(m.VoteRequest)}
    node.core.handle_response(asked[2].request_id, m.vote_response(ErrorCode.none, 1, 2, False), node.now)
    node.core.handle_send_failure(asked[1].request_id, node.now)
    assert (node.core.role, node.core.leader_id, node.core.epoch) == (Role.FOLLOWER, 1, 2)
    node.advance(node.config.retry_backoff_ms)
    assert [s.destination for s in node.sends(m.FetchRequest)] == [1], "fetching from its leader again"


def test_a_resigned_leader_asking_again_is_still_the_resigned_leader_after_a_restart():
    """Its pre-vote writes nothing: restarted, it resigns again rather than campaign in the
    epoch it led, which the voters that elected it would grant it a second time."""
    node = Node(1, state=ElectionState(5, 1, 1, (1, 2, 3)))
    assert node.core.role == Role.RESIGNED
    node.advance(3000)
    assert node.core.role == Role.PROSPECTIVE
    assert node.store.read() == ElectionState(5, 1, 1, (1, 2, 3))
    node.restart()
    assert (node.core.role, node.core.epoch) == (Role.RESIGNED, 5)
