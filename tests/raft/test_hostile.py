"""Raft requests that are hostile or broken are refused with Kafka's errors, never obeyed.

Each of these once stopped a node or a whole quorum: a BeginQuorumEpoch naming its
receiver as a newer epoch's leader made every voter exit ("told to follow itself"), and a
Vote naming epoch 2^31-1 was granted, after which no voter could campaign again.
"""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.raft.gate import MAX_EPOCH, MAX_REQUESTED_EPOCH
from kraft.storage import ElectionState

from .conftest import Node, follower_batch, grant_votes, leader_node, partition


def follower(epoch=2, leader=1, node_id=2):
    return Node(node_id, state=ElectionState(epoch, leader, None, (1, 2, 3)))


def unchanged(node, role, epoch, leader):
    return (node.core.role, node.core.epoch, node.core.leader_id) == (role, epoch, leader)


@pytest.mark.parametrize("make", [
    lambda epoch: m.begin_quorum_request("c", 2, epoch),
    lambda epoch: m.end_quorum_request("c", 2, epoch, (1, 3)),
])
def test_a_leader_announcement_naming_the_receiver_is_invalid(make):
    node = follower()
    for epoch in (2, 3):
        response = node.request(make(epoch))
        assert partition(response).error_code == ErrorCode.invalid_request
        assert unchanged(node, Role.FOLLOWER, 2, 1)
    assert node.store.read() == ElectionState(2, 1, None, (1, 2, 3)), "nothing was written"


@pytest.mark.parametrize("make", [
    lambda epoch: m.begin_quorum_request("c", -1, epoch),
    lambda epoch: m.end_quorum_request("c", -1, epoch, ()),
    lambda epoch: m.vote_request("c", epoch, -1, 1, 5),
    lambda epoch: m.vote_request("c", epoch, 2, 1, 5),  # the receiver as candidate
])
def test_a_negative_or_own_id_is_invalid(make):
    node = follower()
    response = node.request(make(3))
    assert partition(response).error_code == ErrorCode.invalid_request
    assert unchanged(node, Role.FOLLOWER, 2, 1)


def test_a_second_leader_of_the_followed_epoch_is_refused_not_followed():
    node = follower()
    response = node.request(m.begin_quorum_request("c", 3, 2))
    assert partition(response).error_code == ErrorCode.invalid_request
    assert unchanged(node, Role.FOLLOWER, 2, 1)
    # The real leader of epoch 2 is still answered.
    assert partition(node.request(m.begin_quorum_request("c", 1, 2))).error_code == ErrorCode.none


@pytest.mark.parametrize("epoch", [MAX_REQUESTED_EPOCH + 1, MAX_EPOCH - 1, MAX_EPOCH])
@pytest.mark.parametrize("make", [
    lambda epoch: m.vote_request("c", epoch, 3, 1, 1 << 40),
    lambda epoch: m.begin_quorum_request("c", 3, epoch),
    lambda epoch: m.end_quorum_request("c", 3, epoch, (2,)),
])
def test_an_epoch_in_the_reserve_is_refused(make, epoch):
    node = follower()
    response = node.request(make(epoch))
    assert partition(response).error_code == ErrorCode.invalid_request
    assert unchanged(node, Role.FOLLOWER, 2, 1)
    assert node.store.read().epoch == 2


def test_an_epoch_just_below_the_reserve_is_served_and_elections_go_on():
    node = Node(3, state=ElectionState(2, None, None, (1, 2, 3)))
    response = node.request(m.vote_request("c", MAX_REQUESTED_EPOCH, 1, 1, 5))
    assert partition(response).vote_granted
    assert node.core.epoch == MAX_REQUESTED_EPOCH
    node.advance(3000)  # the candidate never won: this voter campaigns in the next epoch
    grant_votes(node, voters=(1,))
    assert (node.core.role, node.core.epoch) == (Role.CANDIDATE, MAX_REQUESTED_EPOCH + 1)


def test_a_response_naming_an_epoch_in_the_reserve_is_ignored():
    node = Node(1)
    node.advance(3000)
    vote = node.sends(m.VoteRequest)[0]
    node.core.handle_response(vote.request_id, m.vote_response(ErrorCode.none, 3, MAX_EPOCH, False), node.now)
    assert (node.core.role, node.core.epoch) == (Role.PROSPECTIVE, 0)


def test_a_replica_at_the_last_epoch_does_not_campaign_past_it(caplog):
    node = Node(1, state=ElectionState(MAX_EPOCH, None, None, (1, 2, 3)))
    for _ in range(2):
        node.advance(3000)
        grant_votes(node)  # a majority would vote for it: it would campaign, but cannot
    assert node.core.role in (Role.PROSPECTIVE, Role.UNATTACHED) and node.core.epoch == MAX_EPOCH
    assert caplog.text.count("cannot campaign") == 1


def test_a_fetch_claiming_the_leaders_own_id_is_invalid():
    leader = leader_node()
    response = leader.request(m.fetch_request("c", 1, 1, 1, 1, 0, 0, 1 << 20))
    assert partition(response).error_code == ErrorCode.invalid_request
    assert leader.core.high_watermark is None


def test_damaged_records_from_the_leader_are_refused_and_fetched_again():
    node = follower(epoch=1)
    node.advance(10)
    (fetch,) = node.sends(m.FetchRequest)
    data = bytearray(follower_batch(3, 1, 0))
    data[-1] ^= 0xFF  # a flipped bit in a record: the CRC no longer matches
    answer = m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=3, records=bytes(data))
    node.core.handle_response(fetch.request_id, answer, node.now)
    assert node.log.end_offset == 0 and node.core.role == Role.FOLLOWER
    node.advance(100)  # after the retry backoff, the same offset is asked again
    (again,) = node.sends(m.FetchRequest)
    assert partition(again.request).fetch_offset == 0
