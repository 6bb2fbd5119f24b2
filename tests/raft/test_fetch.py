"""The leader's Fetch handling: KIP-320 fencing, validation, divergence, long-poll, HW."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.records import read_batches
from kraft.storage import ElectionState

from .conftest import Node, follower_batch, leader_node, leader_of_epoch_2, partition, records


def fetch(epoch=1, offset=0, last_epoch=0, replica=2, wait=0, cluster="c", hw=m.NO_HIGH_WATERMARK):
    """A Fetch; `hw` the fetcher's high watermark (Fetch v18), by default none given."""
    return m.fetch_request(cluster, replica, epoch, offset, last_epoch, 0, wait, 1 << 20, high_watermark=hw)


@pytest.mark.parametrize(
    "request_epoch,error",
    [(0, ErrorCode.fenced_leader_epoch), (2, ErrorCode.unknown_leader_epoch), (1, ErrorCode.none)],
)
def test_leader_epoch_fencing(request_epoch, error):
    leader = leader_node()
    p = partition(leader.request(fetch(epoch=request_epoch)))
    assert p.error_code == error
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 1)


def test_a_follower_answers_not_leader_with_the_leader_it_knows():
    follower = Node(2, state=ElectionState(3, 1, None, (1, 2, 3)))
    p = partition(follower.request(fetch(epoch=3, replica=3)))
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 3)


@pytest.mark.parametrize(
    "epoch,offset,last_epoch,wait",
    [
        (1, 0, 5, 0),    # LastFetchedEpoch above the request's CurrentLeaderEpoch
        (0, 3, 1, 0),    # ... checked before the epoch is fenced (0 is older than ours)
        (2, 3, 3, 0),    # ... and before an unknown epoch is (2 is newer)
        (1, -1, 0, 0),   # a negative offset
        (1, 3, -1, 0),   # a negative LastFetchedEpoch
        (1, 0, -1, 0),   # ... even at offset 0
        (1, 0, 0, -1),   # a negative MaxWaitMs
    ],
)
def test_invalid_fetches_are_refused_before_fencing(epoch, offset, last_epoch, wait):
    leader = leader_node()
    response = leader.request(fetch(epoch=epoch, offset=offset, last_epoch=last_epoch, wait=wait))
    assert partition(response).error_code == ErrorCode.invalid_request
    assert leader.core.leader_state.voter_progress[2].last_fetch_ms == -1, "not counted as a fetch"


def test_another_cluster_is_refused_at_the_top_level():
    assert leader_node().request(fetch(cluster="other")).error_code == ErrorCode.inconsistent_cluster_id


def test_records_from_the_fetch_offset_and_the_leaders_state():
    leader = leader_node()
    leader.core.append(records(3), leader.now)
    leader.advance(0)
    p = partition(leader.request(fetch(offset=0)))
    batches = list(read_batches(bytes(p.records)))
    assert [b.header.is_control for b in batches] == [True, False]
    assert [r.value for r in batches[1].records()] == [b"v0", b"v1", b"v2"]
    assert p.log_start_offset == 0


def test_a_parked_fetch_is_answered_at_once_only_when_the_fetchers_high_watermark_is_behind():
    """Kafka 4.1 (KIP-1166, Fetch v18): a Fetch with nothing to return is parked unless the
    high watermark it carries is behind the leader's; one that gives none (older than v18)
    is parked even when it moved the high watermark itself."""
    leader = leader_node()
    assert leader.request(fetch(offset=1, last_epoch=1, wait=500), handle="old") is None, "parked, as Kafka"
    assert leader.core.high_watermark == 1, "it moved the high watermark"
    p = partition(leader.request(fetch(offset=1, last_epoch=1, wait=500, replica=3, hw=0), handle="behind"))
    assert p.records is None and p.high_watermark == 1, "answered at once: its high watermark is behind"
    assert leader.request(fetch(offset=1, last_epoch=1, wait=500, replica=3, hw=1), handle="current") is None
    leader.core.append(records(1), leader.now)
    leader.advance(1)
    leader.flush()
    leader.request(fetch(offset=2, last_epoch=1, wait=0, replica=2), handle="ack")  # moves it to 2
    answered = {o.handle for o in leader.outbox() if o.__class__.__name__ == "Reply"}
    assert "current" in answered, "the high watermark passed the one it carried: answered"


def test_with_the_kip_1166_rule_off_a_parked_fetch_waits_for_records_whatever_its_high_watermark():
    """The offsets partitions' cores: their followers' Fetches wait for records, as Kafka's
    replica fetchers' do (DelayedFetch), not for the high watermark."""
    leader = leader_node(answer_behind_high_watermark=False)
    assert leader.request(fetch(offset=1, last_epoch=1, wait=500), handle="moved") is None
    assert leader.core.high_watermark == 1
    assert leader.request(fetch(offset=1, last_epoch=1, wait=500, replica=3, hw=0), handle="behind") is None, "parked"
    leader.core.append(records(1), leader.now)
    leader.advance(1)
    answered = {o.handle: o.response for o in leader.outbox() if o.__class__.__name__ == "Reply"}
    assert set(answered) == {"moved", "behind"}, "records: both answered"
    leader.flush()
    assert leader.request(fetch(offset=2, last_epoch=1, wait=500, replica=2, hw=1), handle="ack") is None
    assert leader.core.high_watermark == 2, "moved by that Fetch"
    assert leader.request(fetch(offset=2, last_epoch=1, wait=500, replica=3, hw=1), handle="behind again") is None
    assert not [o for o in leader.outbox() if o.__class__.__name__ == "Reply"], "no answer for the high watermark alone"


def test_a_follower_sends_its_high_watermark():
    leader = leader_node()
    leader.request(fetch(offset=1, last_epoch=1, replica=3))  # voter 3 holds the LeaderChange: committed
    follower = Node(2, state=ElectionState(1, 1, None, (1, 2, 3)))
    follower.advance(1)
    (send,) = follower.sends(m.FetchRequest)
    assert partition(send.request).high_watermark == -1, "knows none yet"
    follower.core.handle_response(send.request_id, leader.request(send.request), follower.now)
    follower.flush()
    (send,) = follower.sends(m.FetchRequest)
    assert partition(send.request).high_watermark == follower.core.high_watermark == 1


def test_an_empty_fetch_waits_until_records_arrive():
    leader = leader_node()
    leader.request(fetch(offset=1, last_epoch=1))  # moves the high watermark to 1
    assert leader.request(fetch(offset=1, last_epoch=1, wait=500)) is None, "nothing to send: parked"
    leader.core.append(records(2), leader.now)
    leader.advance(1)
    replies = [o for o in leader.outbox() if o.__class__.__name__ == "Reply"]
    assert len(replies) == 1 and partition(replies[0].response).records


def test_a_parked_fetch_is_answered_empty_when_its_wait_is_over():
    leader = leader_node()
    leader.request(fetch(offset=1, last_epoch=1))
    assert leader.request(fetch(offset=1, last_epoch=1, wait=500)) is None
    leader.advance(499)
    assert not leader.outbox()
    leader.advance(1)
    (reply,) = leader.outbox()
    assert partition(reply.response).records is None


def test_parked_fetches_are_answered_each_when_its_own_wait_is_over_in_arrival_order():
    leader = leader_node()
    leader.request(fetch(offset=1, last_epoch=1))  # moves the high watermark to 1
    for observer, wait in ((7, 300), (8, 100), (9, 300), (10, 900)):
        assert leader.request(fetch(offset=1, last_epoch=1, replica=observer, wait=wait), handle=observer) is None
    leader.advance(100)
    assert [o.handle for o in leader.outbox()] == [8]
    leader.advance(200)
    assert [o.handle for o in leader.outbox()] == [7, 9]
    leader.core.append(records(1), leader.now)
    leader.advance(1)
    (reply,) = leader.outbox()
    assert reply.handle == 10 and partition(reply.response).records, "new data wakes the last one early"


def test_a_silent_observer_leaves_describe_quorum_after_the_observer_expiry():
    leader = leader_node(observer_expiry_ms=60_000)
    leader.request(fetch(offset=1, last_epoch=1, replica=7))
    leader.request(fetch(offset=1, last_epoch=1, replica=8))
    for _ in range(60):  # observer 8 and the voters keep fetching; 7 is silent
        leader.advance(1_000)
        for replica in (2, 3, 8):
            leader.request(fetch(offset=1, last_epoch=1, replica=replica))
    answer = leader.request(m.describe_quorum_request())
    assert [o.replica_id for o in partition(answer).observers] == [8]


def diverging(p):
    return (p.diverging_epoch.epoch, p.diverging_epoch.end_offset)


@pytest.mark.parametrize(
    "offset,last_epoch,expected",
    [
        (5, 2, None),     # the leader's epoch 2 ends at 5 too: in agreement
        (7, 2, (2, 5)),   # the fetcher has more of epoch 2 than the leader: truncate to 5
        (6, 3, (2, 5)),   # the leader never had epoch 3: the largest epoch below, 2, ends at 5
        (2, 1, None),     # inside epoch 1, which runs to 2 here
    ],
)
def test_divergence_is_answered_with_the_largest_shared_epoch_and_its_end(offset, last_epoch, expected):
    node = Node(1)
    node.log.append_as_follower(follower_batch(2, 1, 0))
    node.log.append_as_follower(follower_batch(3, 2, 2))
    node.store.write(ElectionState(4, None, 1, (1, 2, 3)))
    node.core = type(node.core)(node.config, node.log, node.store, __import__("random").Random(1), 0, node.listener)
    assert node.core.role == Role.CANDIDATE
    for vote in node.sends(m.VoteRequest):
        node.core.handle_response(vote.request_id, m.vote_response(ErrorCode.none, -1, 4, True), 0)
    assert node.core.role == Role.LEADER
    p = partition(node.request(fetch(epoch=4, offset=offset, last_epoch=last_epoch)))
    if expected is None:
        assert p.diverging_epoch.end_offset == -1 and p.records
    else:
        assert diverging(p) == expected and p.records is None


def test_high_watermark_needs_a_majority_and_an_entry_of_the_current_epoch():
    leader = leader_node()  # LeaderChange at offset 0, flushed
    assert leader.core.high_watermark is None, "only the leader holds offset 0 so far"
    leader.core.append(records(2), leader.now)
    leader.advance(0)
    leader.flush()
    assert leader.core.high_watermark is None
    leader.request(fetch(offset=1, last_epoch=1, replica=2))
    assert leader.core.high_watermark == 1, "voters 1 and 2 hold offset 0, this epoch's LeaderChange"
    leader.request(fetch(offset=3, last_epoch=1, replica=3))
    assert leader.core.high_watermark == 3
    leader.request(fetch(offset=1, last_epoch=1, replica=3))
    assert leader.core.high_watermark == 3, "never goes back"


def test_the_high_watermark_waits_for_an_entry_of_the_current_epoch():
    """A majority holding the previous epochs' entries is not enough: Raft commits them only
    by committing one of the new leader's own (its LeaderChange at offset 9)."""
    leader = leader_of_epoch_2()
    leader.request(fetch(epoch=2, offset=9, last_epoch=1, replica=2))
    assert leader.core.high_watermark is None, "voters 1 and 2 hold 0..8, all of epoch 1"
    assert leader.listener.batches == []
    leader.request(fetch(epoch=2, offset=10, last_epoch=2, replica=2))
    assert leader.core.high_watermark == 10
    assert [b.base_offset for b in leader.listener.batches] == [0, 3, 5, 9]


def test_the_leader_counts_its_own_log_only_once_flushed():
    leader = leader_node()
    leader.core.append(records(2), leader.now)
    leader.advance(0)  # appended, not flushed
    leader.request(fetch(offset=3, last_epoch=1, replica=2))
    assert leader.core.high_watermark == 1, "the leader's flushed end is 1; voter 2 is at 3"
    leader.flush()
    assert leader.core.high_watermark == 3


def test_observers_do_not_count_toward_the_high_watermark():
    leader = leader_node()
    leader.request(fetch(offset=1, last_epoch=1, replica=7))
    assert leader.core.high_watermark is None
    assert 7 in leader.core.leader_state.observer_progress


def test_commits_reach_the_listener_in_order_control_batches_marked():
    leader = leader_node()
    leader.core.append(records(2), leader.now)
    leader.advance(0)
    leader.core.append(records(1, b"w"), leader.now)
    leader.advance(0)
    leader.flush()
    leader.request(fetch(offset=4, last_epoch=1, replica=2))
    assert [(b.base_offset, b.control) for b in leader.listener.batches] == [(0, True), (1, False), (3, False)]
    assert [[r.value for r in b.records] for b in leader.listener.batches[1:]] == [[b"v0", b"v1"], [b"w0"]]


# ---------------------------------------------------------------- check quorum


def test_an_active_observer_does_not_keep_a_leader_without_voters_alive():
    leader = leader_node()
    for _ in range(4):
        leader.advance(leader.config.fetch_timeout_ms // 2 - 1)
        p = partition(leader.request(fetch(offset=1, last_epoch=1, replica=7)))
        if leader.core.role != Role.LEADER:
            break
        assert p.error_code == ErrorCode.none, "the observer is served"
    assert leader.core.role == Role.RESIGNED, "voters 2 and 3 were silent for a whole fetch timeout"


def test_a_voter_answered_with_divergence_keeps_the_leader_alive():
    leader = leader_node()  # its epoch 1 ends at offset 1
    for _ in range(4):
        leader.advance(leader.config.fetch_timeout_ms // 2)
        p = partition(leader.request(fetch(offset=5, last_epoch=1, replica=2)))
        assert diverging(p) == (1, 1), "voter 2 holds more of epoch 1 than the leader: it must truncate"
    assert leader.core.role == Role.LEADER
    leader.advance(leader.config.fetch_timeout_ms * 3 // 2)
    assert leader.core.role == Role.RESIGNED
