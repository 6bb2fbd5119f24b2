"""Quorum arithmetic (raft/quorum.py) by table: every decision taken by counting voters."""

import pytest

from kraft.raft.quorum import VoteResult, committed_offset, majority, quorum_contact, vote_result

WON, LOST, OPEN = VoteResult.WON, VoteResult.LOST, VoteResult.OPEN


@pytest.mark.parametrize("voters, needed", [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)])
def test_majority(voters, needed):
    assert majority(voters) == needed


@pytest.mark.parametrize("voters, granted, refused, result", [
    ((1,), {1}, set(), WON),                    # a single voter is its own majority
    ((1,), set(), {1}, LOST),
    ((1, 2), {1}, set(), OPEN),                 # two voters need both
    ((1, 2), {1}, {2}, LOST),
    ((1, 2), {1, 2}, set(), WON),
    ((1, 2, 3), {1}, set(), OPEN),
    ((1, 2, 3), {1, 2}, set(), WON),
    ((1, 2, 3), {1}, {2}, OPEN),                # 3 may still grant
    ((1, 2, 3), {1}, {2, 3}, LOST),
    ((1, 2, 3), {1, 4, 5}, set(), OPEN),        # grants from non-voters do not count
    ((1, 2, 3), {1}, {4, 5}, OPEN),             # nor do refusals from non-voters
    ((1, 2, 3), {1, 2}, {2, 3}, WON),           # a grant is never taken back by a later refusal
    ((1, 2, 3, 4), {1, 2}, set(), OPEN),
    ((1, 2, 3, 4), {1, 2}, {3}, OPEN),
    ((1, 2, 3, 4), {1}, {3, 4}, LOST),
    ((1, 2, 3, 4, 5), {1, 2, 3}, {4, 5}, WON),
    ((1, 2, 3, 4, 5), {1, 2}, {3, 4}, OPEN),
    ((1, 2, 3, 4, 5), {1}, {2, 3, 4}, LOST),
    ((), set(), set(), LOST),                   # no voters: nobody can win
])
def test_vote_result(voters, granted, refused, result):
    assert vote_result(voters, granted, refused) == result


@pytest.mark.parametrize("positions, committed", [
    ((7,), 7),
    ((7, 3), 3),                                # two voters: both must hold it
    ((7, 3, 5), 5),
    ((-1, -1, 9), -1),                          # voters not heard from hold nothing
    ((10, 10, 2), 10),
    ((4, 8, 6, 2), 4),                          # four voters: three must hold it
    ((1, 2, 3, 4, 5), 3),
    ((5, 5, 5, 0, 0), 5),
    ((0, 0, 5, 5, 5, 5, 5), 5),
])
def test_committed_offset(positions, committed):
    assert committed_offset(positions) == committed
    assert committed_offset(reversed(positions)) == committed  # the order of the voters does not matter


@pytest.mark.parametrize("last_heard, contact", [
    ((100,), 100),
    ((100, 20, 50), 50),                        # the leader (now) and the more recent follower
    ((100, 20, 10), 20),
    ((100, 90, 80, 10), 80),
    ((100, 0, 0, 0, 90), 0),
])
def test_quorum_contact(last_heard, contact):
    assert quorum_contact(last_heard) == contact


def test_nothing_is_reached_by_a_majority_of_no_voters():
    with pytest.raises(ValueError, match="no voters"):
        committed_offset(())
    with pytest.raises(ValueError, match="no voters"):
        quorum_contact(iter(()))
