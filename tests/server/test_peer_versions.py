"""Which version a request goes to a peer in (server/runtime/peer_versions.py): the core's when
the peer serves it, else the nearest the peer serves, never one that drops what it asks."""

import uuid

import pytest

from kraft.protocol.codec import request_class
from kraft.raft import messages as m
from kraft.raft.membership_messages import add_raft_voter_request
from kraft.records.control import VoterEndpoint
from kraft.server.runtime.peer_versions import NoCommonVersion, PeerVersions

ENDPOINTS = (VoterEndpoint("CONTROLLER", "localhost", 9002),)


def test_the_cores_version_goes_as_it_is_and_an_older_peer_gets_its_newest():
    fetch = m.fetch_request("c", 2, 1, 0, 0, 0, 500, 1 << 20, high_watermark=7)
    assert PeerVersions({1: (4, 18)}).outgoing(fetch) is fetch
    older = PeerVersions({1: (13, 17)}).outgoing(fetch)
    assert type(older) is request_class(1, 17) and older.replica_state.replica_id == 2
    oldest = PeerVersions({1: (13, 13)}).outgoing(fetch)
    assert type(oldest) is request_class(1, 13) and oldest.replica_id == 2


def test_a_pre_vote_never_goes_to_a_peer_without_vote_v2():
    """A PreVote dropped on the way would make the pre-vote a vote: the send fails instead."""
    pre_vote = m.vote_request("c", 1, 1, 0, 0, pre_vote=True)
    with pytest.raises(NoCommonVersion, match="pre_vote"):
        PeerVersions({52: (0, 1)}).outgoing(pre_vote)


def test_an_add_raft_voter_that_acks_before_the_commit_never_goes_in_v0():
    """KIP-1186: a v0 leader would answer at the commit the joining controller may be needed
    for; the send fails instead. One that waits for the commit goes in v0 unchanged."""
    only_v0 = PeerVersions({80: (0, 0)})
    early = add_raft_voter_request("c", 30_000, 2, uuid.UUID(int=2), ENDPOINTS, ack_when_committed=False)
    with pytest.raises(NoCommonVersion, match="ack_when_committed"):
        only_v0.outgoing(early)
    committed = add_raft_voter_request("c", 30_000, 2, uuid.UUID(int=2), ENDPOINTS)
    assert type(only_v0.outgoing(committed)) is request_class(80, 0)


def test_an_api_the_peer_does_not_serve_is_not_sent():
    with pytest.raises(NoCommonVersion, match="does not serve"):
        PeerVersions({}).outgoing(m.vote_request("c", 1, 1, 0, 0))
