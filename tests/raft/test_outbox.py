"""One request in flight per destination; deadlines, backoffs and forgetting on a new role."""

from kraft.raft import messages as m
from kraft.raft.outbox import Outbox, Send

from .conftest import leader_node


def test_one_request_per_destination_until_answered_failed_or_expired():
    out = Outbox(request_timeout_ms=100, retry_backoff_ms=20)
    vote = m.vote_request("c", 1, 1, 0, 0)
    out.send(2, vote, now=0)
    assert not out.can_send(2, 0) and out.can_send(3, 0)
    (send,) = out.take()
    assert isinstance(send, Send) and send.destination == 2
    assert out.deadlines(now=0) == [100]
    assert out.complete(send.request_id) == 2 and out.complete(send.request_id) is None, "a second answer is stale"
    out.back_off(2, now=50)
    assert not out.can_send(2, 69) and out.can_send(2, 70) and out.deadlines(now=69) == [70]
    out.send(2, vote, now=70)
    out.expire(now=170)
    assert out.can_send(2, 170), "expired: may be asked again"


def test_a_fetch_waits_its_max_wait_on_top_of_the_request_timeout_and_a_new_role_forgets_all():
    out = Outbox(request_timeout_ms=100, retry_backoff_ms=20)
    out.send(2, m.fetch_request("c", 1, 1, 0, 0, 0, 500, 1 << 20), now=0)
    assert out.deadlines(now=0) == [600]
    out.forget()
    assert out.deadlines(now=0) == [] and out.can_send(2, 0)


def test_a_retry_that_came_due_is_no_deadline():
    out = Outbox(request_timeout_ms=100, retry_backoff_ms=20)
    out.back_off(2, now=50)
    assert out.deadlines(now=60) == [70], "the backoff's end wakes the core, which may ask again"
    assert out.deadlines(now=70) == [] and out.can_send(2, 70), "once due, the core has looked at it"


def test_a_leader_whose_announcement_failed_once_does_not_tick_every_millisecond():
    """A leader's BeginQuorumEpoch to voter 3 failed (3 was not listening yet). The leader
    announces again only at its next interval, and not at all to a voter that fetches, so
    once the backoff is over nothing is due before the check-quorum timeout or that
    interval: the next deadline is not the next millisecond (a node arms its timer for it,
    and a due retry kept as a deadline woke an idle leader 1,000 times a second)."""
    node = leader_node()
    for s in node.announced:
        if s.destination == 3:
            node.core.handle_send_failure(s.request_id, node.now)
        else:
            node.core.handle_response(s.request_id, m.begin_quorum_response(m.ErrorCode.none, 1, 1), node.now)
    node.advance(node.config.retry_backoff_ms)
    assert not node.sends(m.BeginQuorumEpochRequest)
    assert node.core.next_deadline() > node.now + 1
