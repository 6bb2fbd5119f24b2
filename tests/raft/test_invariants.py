"""The core's own invariants, asserted where they could break and raised as InvariantViolation
at that line: the high watermark never moves back, an append never lands below it, a vote is
never granted twice in an epoch. Each test breaks the state the rule guards (as a bug would)
and checks that the step stops at the rule's own function, before anything is written."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import InvariantViolation, Role
from kraft.raft import messages as m
from kraft.raft.roles import Unattached
from kraft.storage import ElectionState

from .conftest import Node, follower_batch, leader_node, records
from .test_snapshots import answer, follower_of


def raised_at(excinfo: pytest.ExceptionInfo) -> str:
    return excinfo.traceback[-1].name


def test_the_high_watermark_never_moves_back():
    n = leader_node()
    n.core.append(records(3), n.now)
    n.advance(100)
    n.flush()
    n.core.high_watermark = 50  # as a bug would leave it: past anything this leader commits
    end = n.log.end_offset
    with pytest.raises(InvariantViolation, match="would move back from 50 to") as excinfo:
        n.request(m.fetch_request("c", 2, 1, end, 1, 0, 0, 1 << 20))
    assert raised_at(excinfo) == "_advance_high_watermark"


def test_an_append_never_lands_below_the_high_watermark():
    f = follower_of()
    f.advance(1)
    f.core.high_watermark = 20  # as a bug would leave it: past the follower's log end
    with pytest.raises(InvariantViolation, match="append at 0, below the high watermark 20") as excinfo:
        answer(f, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=3,
                                   records=follower_batch(3, 1, 0)))
    assert raised_at(excinfo) == "_check_append_at"
    assert f.log.end_offset == 0


def test_a_vote_is_never_granted_twice_in_an_epoch():
    n = Node(1, state=ElectionState(3, None, 2, (1, 2, 3)))
    assert n.core.role == Role.VOTED and n.core.voted_id == 2
    n.core.quorum.state, n.core.quorum.voted_id = Unattached(n.now + 1000), None  # a bug that forgot the vote
    with pytest.raises(InvariantViolation, match="would vote for 3 in epoch 3, having voted for 2") as excinfo:
        n.request(m.vote_request("c", 3, 3, 0, 0, voter=1))
    assert raised_at(excinfo) == "become_voted"
    assert n.store.read() == ElectionState(3, None, 2, (1, 2, 3))


def test_a_follower_takes_the_leaders_high_watermark_only_as_far_as_its_log_reaches():
    """Kafka's follower: min(the leader's high watermark, its own log end)."""
    f = follower_of()
    f.advance(1)
    answer(f, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9,
                               records=follower_batch(3, 1, 0)))
    assert f.core.high_watermark == 3
    f.flush()
    answer(f, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9,
                               records=follower_batch(6, 1, 3)))
    assert f.core.high_watermark == 9


def test_an_observer_that_gives_up_on_its_leader_keeps_its_vote_for_the_epoch():
    """A replica outside the voter set may still vote (KIP-853); when it stops following a
    leader that went quiet, the vote it cast in that epoch stays cast, on disk too."""
    o = Node(4, state=ElectionState(3, None, 2, (1, 2, 3)))
    o.advance(o.config.election_timeout_ms * 2)  # it cannot campaign: it looks for the leader
    assert (o.core.role, o.core.voted_id) == (Role.UNATTACHED, 2)
    (fetch,) = o.sends(m.FetchRequest)
    o.core.handle_response(fetch.request_id, m.fetch_response(ErrorCode.none, leader_id=1, epoch=3,
                                                              high_watermark=0), o.now)
    assert (o.core.role, o.core.leader_id, o.core.voted_id) == (Role.FOLLOWER, 1, 2)
    o.advance(o.config.fetch_timeout_ms + 1)
    assert (o.core.role, o.core.epoch, o.core.leader_id, o.core.voted_id) == (Role.UNATTACHED, 3, None, 2)
    assert o.store.read().voted_id == 2
