"""One request in flight per destination; deadlines, backoffs and forgetting on a new role."""

from kraft.raft import messages as m
from kraft.raft.outbox import Outbox, Send


def test_one_request_per_destination_until_answered_failed_or_expired():
    out = Outbox(request_timeout_ms=100, retry_backoff_ms=20)
    vote = m.vote_request("c", 1, 1, 0, 0)
    out.send(2, vote, now=0)
    assert not out.can_send(2, 0) and out.can_send(3, 0)
    (send,) = out.take()
    assert isinstance(send, Send) and send.destination == 2
    assert out.deadlines() == [100]
    assert out.complete(send.request_id) == 2 and out.complete(send.request_id) is None, "a second answer is stale"
    out.back_off(2, now=50)
    assert not out.can_send(2, 69) and out.can_send(2, 70) and out.deadlines() == [70]
    out.send(2, vote, now=70)
    out.expire(now=170)
    assert out.can_send(2, 170), "expired: may be asked again"


def test_a_fetch_waits_its_max_wait_on_top_of_the_request_timeout_and_a_new_role_forgets_all():
    out = Outbox(request_timeout_ms=100, retry_backoff_ms=20)
    out.send(2, m.fetch_request("c", 1, 1, 0, 0, 0, 500, 1 << 20), now=0)
    assert out.deadlines() == [600]
    out.forget()
    assert out.deadlines() == [] and out.can_send(2, 0)
