"""Vote granting, one rule at a time."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.storage import ElectionState

from .conftest import Node, follower_batch, grant_votes, partition


def vote(epoch=1, candidate=2, last_epoch=0, last_offset=0, cluster="c"):
    return m.vote_request(cluster, epoch, candidate, last_epoch, last_offset)


def granted(response):
    return partition(response).vote_granted


def node_with_log(batches):
    n = Node(1)
    for count, epoch, base in batches:
        n.log.append_as_follower(follower_batch(count, epoch, base))
    return n


def test_an_unattached_voter_grants_an_up_to_date_candidate_and_persists_the_vote_first():
    n = Node(1)
    writes = n.store.writes
    response = n.request(vote(epoch=1, candidate=2))
    assert granted(response) and partition(response).error_code == ErrorCode.none
    assert n.store.read() == ElectionState(1, None, 2, (1, 2, 3))
    assert n.store.writes > writes
    assert (n.core.role, n.core.epoch, n.core.voted_id) == (Role.VOTED, 1, 2)


@pytest.mark.parametrize(
    "last_epoch,last_offset,expected",
    [
        (2, 6, True),    # same last epoch, same end
        (2, 9, True),    # same epoch, longer log
        (2, 5, False),   # same epoch, shorter log
        (1, 100, False),  # older last epoch, however long
        (3, 1, True),    # newer last epoch, however short
    ],
)
def test_a_vote_needs_a_log_at_least_as_up_to_date(last_epoch, last_offset, expected):
    n = node_with_log([(3, 1, 0), (3, 2, 3)])  # last (epoch 2, end 6)
    response = n.request(vote(epoch=5, candidate=3, last_epoch=last_epoch, last_offset=last_offset))
    assert granted(response) is expected
    assert n.core.epoch == 5, "a newer epoch is adopted whether or not the vote is granted"
    assert n.core.role == (Role.VOTED if expected else Role.UNATTACHED)


def test_one_vote_per_epoch():
    n = Node(1)
    assert granted(n.request(vote(epoch=1, candidate=2)))
    assert granted(n.request(vote(epoch=1, candidate=2))), "the same candidate again: still granted"
    assert not granted(n.request(vote(epoch=1, candidate=3)))
    assert n.store.read().voted_id == 2


def test_an_older_epoch_is_fenced():
    n = Node(1, state=ElectionState(4, None, None, (1, 2, 3)))
    response = n.request(vote(epoch=3, candidate=2))
    p = partition(response)
    assert (p.error_code, p.vote_granted, p.leader_epoch) == (ErrorCode.fenced_leader_epoch, False, 4)


def test_followers_and_leaders_do_not_vote_in_their_epoch():
    n = Node(1, state=ElectionState(2, 3, None, (1, 2, 3)))
    assert n.core.role == Role.FOLLOWER
    response = n.request(vote(epoch=2, candidate=2, last_epoch=1, last_offset=99))
    assert partition(response).error_code == ErrorCode.none
    assert not granted(response) and partition(response).leader_id == 3


def test_candidates_outside_the_voter_set_and_observers_answer_inconsistent_voter_set():
    n = Node(1)
    assert partition(n.request(vote(epoch=1, candidate=9))).error_code == ErrorCode.inconsistent_voter_set
    observer = Node(4)
    assert partition(observer.request(vote(epoch=1, candidate=2))).error_code == ErrorCode.inconsistent_voter_set


def test_another_cluster_id_is_refused():
    n = Node(1)
    response = n.request(vote(epoch=1, candidate=2, cluster="other"))
    assert response.error_code == ErrorCode.inconsistent_cluster_id
    assert n.core.epoch == 0 and n.store.read().voted_id is None


def test_a_rejected_newer_epoch_does_not_restart_the_election_timer():
    """A candidate with a stale log campaigning again and again must not hold off the
    voters that can win (they time out and campaign themselves)."""
    n = node_with_log([(3, 1, 0)])
    deadline = n.core.state.election_deadline
    n.now = deadline - 10
    n.request(vote(epoch=7, candidate=2, last_epoch=0, last_offset=0))
    assert n.core.epoch == 7 and n.core.role == Role.UNATTACHED
    n.advance(10)
    assert n.core.role == Role.PROSPECTIVE and n.core.epoch == 7, "its own timer ran out: it asks in epoch 7"


def test_a_granted_vote_restarts_the_election_timer():
    n = Node(1)
    n.now = n.core.state.election_deadline - 10
    n.request(vote(epoch=1, candidate=2))
    n.advance(10)
    assert n.core.role == Role.VOTED


def split_candidate():
    """Node 1, candidate of epoch 1 in a three-voter quorum, with its Vote requests out."""
    n = Node(1, election_timeout_ms=1000, election_backoff_max_ms=100)
    n.advance(n.core.state.election_deadline)
    grant_votes(n)  # voter 2 would vote for it: it campaigns
    assert n.core.role == Role.CANDIDATE
    return n, {s.destination: s for s in n.sends(m.VoteRequest)}


def test_a_candidate_refused_by_one_voter_and_unable_to_reach_the_other_backs_off_at_once():
    """The leader died and the other follower campaigns too: one refusal and one refused
    connection already make a majority this candidate cannot get, so it backs off and
    tries again without waiting out its election timeout."""
    n, votes = split_candidate()
    deadline = n.core.state.election_deadline
    n.core.handle_send_failure(votes[3].request_id, n.now)  # the dead leader's port
    n.core.handle_response(votes[2].request_id, m.vote_response(ErrorCode.none, -1, 1, False), n.now)
    n.advance(n.config.election_backoff_max_ms + 1)
    assert n.core.role == Role.PROSPECTIVE and n.core.epoch == 1, "a new round (a pre-vote), long before the timeout"
    assert n.now < deadline


def test_a_refusal_alone_is_not_a_lost_election():
    n, votes = split_candidate()
    deadline = n.core.state.election_deadline
    n.core.handle_response(votes[2].request_id, m.vote_response(ErrorCode.none, -1, 1, False), n.now)
    n.advance(n.config.election_backoff_max_ms + 1)
    assert n.core.epoch == 1, "voter 3 may still grant"
    n.now = deadline
    n.advance(0)  # the election timed out: back off
    n.advance(n.config.election_backoff_max_ms + 1)
    assert (n.core.role, n.core.epoch) == (Role.PROSPECTIVE, 1), "asking again, without another epoch"


def test_a_voter_that_answers_after_a_failed_send_counts_again():
    n, votes = split_candidate()
    n.core.handle_send_failure(votes[3].request_id, n.now)
    n.advance(n.config.retry_backoff_ms)
    (retry,) = [s for s in n.sends(m.VoteRequest) if s.destination == 3]
    n.core.handle_response(retry.request_id, m.vote_response(ErrorCode.none, -1, 1, True), n.now)
    assert n.core.role == Role.LEADER


@pytest.mark.parametrize(
    "epoch,last_epoch,last_offset",
    [
        (5, 0, -1),  # a negative last offset
        (5, -1, 0),  # a negative last epoch
        (5, 5, 9),   # a last epoch equal to the epoch campaigned in: a candidate bumps its epoch first
        (5, 6, 9),   # ... or above it
        (3, 3, 9),   # checked before the epoch is fenced (3 is older than ours, 4)
    ],
)
def test_a_vote_with_an_impossible_last_epoch_or_offset_is_an_invalid_request(epoch, last_epoch, last_offset):
    n = Node(1, state=ElectionState(4, None, None, (1, 2, 3)))
    writes = n.store.writes
    response = n.request(vote(epoch=epoch, candidate=2, last_epoch=last_epoch, last_offset=last_offset))
    p = partition(response)
    assert (p.error_code, p.vote_granted) == (ErrorCode.invalid_request, False)
    assert (n.core.epoch, n.core.role, n.store.writes) == (4, Role.UNATTACHED, writes), "nothing changed"
