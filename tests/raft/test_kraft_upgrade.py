"""The kraft.version upgrade (Kafka 4.1) on hand-driven cores: a static quorum's leader keeps
its voters' entries in memory as they send UpdateRaftVoter, and raising kraft.version to 1
writes the KRaftVersionRecord and the first VotersRecord from them; a leader whose own entry
in a dynamic quorum's voter set is outdated rewrites it when its epoch starts."""

import uuid

import pytest
from kio.schema.errors import ErrorCode

from kraft.raft import Role
from kraft.raft import messages as m
from kraft.raft.kraft_upgrade import UpgradeRefused
from kraft.raft.membership_messages import (
    UpdateRaftVoterRequest,
    update_raft_voter_request,
    update_raft_voter_response,
)
from kraft.raft.voters import Voters, VoterSet, write_bootstrap
from kraft.records import read_batches
from kraft.records.control import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    Voter,
    VoterEndpoint,
    VotersRecord,
    decode_control_record,
)
from kraft.storage import MemorySnapshotStore

from .conftest import Node, leader_node
from .test_membership import add, caught_up, fetch


def endpoint(node_id: int, port: int | None = None) -> tuple[VoterEndpoint, ...]:
    return (VoterEndpoint("CONTROLLER", "localhost", port or 9000 + node_id),)


def directory(node_id: int) -> uuid.UUID:
    return uuid.UUID(int=100 + node_id)


def static_leader() -> Node:
    """Node 1 leading a static quorum of 1, 2, 3 (controller.quorum.voters), its directory id
    and endpoints known, its epoch committed (voter 2 fetched its LeaderChange)."""
    node = leader_node(directory_id=directory(1).bytes, endpoints=endpoint(1))
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)
    assert node.core.leader_state.high_watermark is not None and node.core.voters.kraft_version == 0
    return node


def update(node_id: int, epoch: int = 1, versions: tuple[int, int] = (0, 1)) -> UpdateRaftVoterRequest:
    return update_raft_voter_request("c", epoch, node_id, directory(node_id), endpoint(node_id), versions)


def control_messages(node: Node, start: int) -> list:
    """The control records of the node's log from `start` on, decoded."""
    data = bytes(node.log.read(start, 1 << 20).data)
    return [decode_control_record(r) for b in read_batches(data) if b.header.is_control for r in b.records()]


def test_a_static_quorums_leader_keeps_each_voters_entry_in_memory():
    """Kafka 4.1: UpdateRaftVoter on kraft.version 0 is answered NONE and recorded in the
    leader's in-memory set; nothing is written (it was UNSUPPORTED_VERSION)."""
    node = static_leader()
    end = node.core.log.end_offset
    answer = node.request(update(2))
    assert answer.error_code == ErrorCode.none and answer.current_leader.leader_id == 1
    volatile = node.core.state.volatile_voters
    assert volatile.get(2) == Voter(2, directory(2).bytes, endpoint(2), 0, 1)
    assert volatile.get(1) == Voter(1, directory(1).bytes, endpoint(1), 0, 1), "its own, from the start"
    assert volatile.get(3) == Voter(3, bytes(16), (), 0, 0), "not heard from yet"
    assert node.core.log.end_offset == end and node.core.voters.kraft_version == 0
    assert node.request(update(4)).error_code == ErrorCode.voter_not_found
    assert node.request(update(3, versions=(1, 1))).error_code == ErrorCode.invalid_request, "cannot run 0"


def test_add_and_remove_stay_unsupported_on_a_static_quorum():
    node = static_leader()
    assert node.request(add(4)).error_code == ErrorCode.unsupported_version


def test_each_voter_of_a_static_quorum_tells_every_new_leader_its_entry_once():
    follower = Node(2, directory_id=directory(2).bytes, endpoints=endpoint(2))
    follower.request(m.begin_quorum_request("c", 1, 1))
    (first,) = follower.sends(m.FetchRequest)
    empty = m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=0, log_start_offset=0)
    follower.core.handle_response(first.request_id, empty, follower.now)
    (told,) = follower.sends(UpdateRaftVoterRequest)
    assert told.destination == 1 and told.request.voter_directory_id == directory(2)
    recorded = update_raft_voter_response(ErrorCode.none, leader_id=1, leader_epoch=1)
    follower.core.handle_response(told.request_id, recorded, follower.now)
    for _ in range(40):  # 4 update periods of fetches: never told again
        for send in follower.sends():
            assert not isinstance(send.request, UpdateRaftVoterRequest)
            follower.core.handle_response(send.request_id, empty, follower.now)
        follower.advance(300)
    follower.request(m.begin_quorum_request("c", 3, 2))  # a new leader
    (first,) = [s for s in follower.sends(m.FetchRequest) if s.destination == 3]
    follower.core.handle_response(first.request_id, m.fetch_response(
        ErrorCode.none, leader_id=3, epoch=2, high_watermark=0, log_start_offset=0), follower.now)
    (again,) = follower.sends(UpdateRaftVoterRequest)
    assert again.destination == 3


def test_a_refused_update_is_told_again_at_the_next_update_period_and_fetches_go_on():
    """A new leader refuses the entry until its epoch commits (REQUEST_TIMED_OUT); the voter
    tells it again an update period later, as Kafka's does, and fetches meanwhile: asked
    again at every step, its fetches starved and the leader's epoch could never commit
    (the simulator's upgrade seeds: a leader with one live follower refused it for ever)."""
    follower = Node(2, directory_id=directory(2).bytes, endpoints=endpoint(2))
    follower.request(m.begin_quorum_request("c", 1, 1))
    (first,) = follower.sends(m.FetchRequest)
    no_hw = m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=-1, log_start_offset=0)
    follower.core.handle_response(first.request_id, no_hw, follower.now)
    (told,) = follower.sends(UpdateRaftVoterRequest)
    refused = update_raft_voter_response(ErrorCode.request_timed_out, leader_id=1, leader_epoch=1)
    follower.core.handle_response(told.request_id, refused, follower.now)
    told_at, fetches, again = follower.now, 0, []
    period = 3 * follower.config.fetch_timeout_ms
    for _ in range(2 * period // 100):
        for send in follower.sends():
            if isinstance(send.request, UpdateRaftVoterRequest):
                again.append(follower.now - told_at)
                continue
            fetches += 1
            follower.core.handle_response(send.request_id, no_hw, follower.now)
        follower.advance(100)
    assert again and period <= again[0] <= period + 200, again
    assert fetches >= period // 100, "it fetched while it waited"


def test_the_upgrade_needs_every_voter_then_writes_the_first_voters_record():
    node = static_leader()
    node.request(update(2))
    with pytest.raises(UpgradeRefused, match="not all of the voters support it"):
        node.core.upgrade_kraft_version(1, validate_only=True, now=node.now)
    node.request(update(3))
    end = node.core.log.end_offset
    assert node.core.upgrade_kraft_version(1, validate_only=True, now=node.now)
    assert node.core.log.end_offset == end and node.core.voters.kraft_version == 0, "validated only"
    assert node.core.upgrade_kraft_version(1, validate_only=False, now=node.now)
    written = control_messages(node, end)
    assert written == [KRaftVersionRecord(1), VotersRecord(tuple(
        Voter(i, directory(i).bytes, endpoint(i), 0, 1) for i in (1, 2, 3)))]
    assert node.core.voters.kraft_version == 1 and node.core.voters.is_dynamic
    assert not node.core.upgrade_kraft_version(1, validate_only=False, now=node.now), "already 1: nothing"
    with pytest.raises(UpgradeRefused, match="is a downgrade"):
        node.core.upgrade_kraft_version(0, validate_only=False, now=node.now)


def upgraded_leader() -> Node:
    node = static_leader()
    node.request(update(2))
    node.request(update(3))
    node.core.upgrade_kraft_version(1, validate_only=False, now=node.now)
    node.flush()
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)  # committed
    assert node.core.high_watermark == node.core.log.end_offset
    return node


def test_after_the_upgrade_voters_change_and_survive_a_restart():
    node = upgraded_leader()
    caught_up(node, 4)
    assert node.request(add(4), handle="add") is None, "appended: the quorum is dynamic"
    assert node.core.voters.ids == (1, 2, 3, 4)
    node.flush()
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)
    fetch(node, 3, node.core.log.end_offset, node.core.epoch)
    node.restart()  # controller.quorum.voters still says 1, 2, 3
    assert node.core.voters.ids == (1, 2, 3, 4) and node.core.voters.kraft_version == 1
    assert node.core.voters.latest.get(2).directory_id == directory(2).bytes


def test_an_upgrade_truncated_away_leaves_the_quorum_static():
    """Its leader lost before the commit: a new leader's log diverges below the batch."""
    node = static_leader()
    node.request(update(2))
    node.request(update(3))
    at = node.core.log.end_offset
    node.core.upgrade_kraft_version(1, validate_only=False, now=node.now)
    assert node.core.voters.is_dynamic
    node.core.voters.truncate(at)
    assert node.core.voters.kraft_version == 0 and not node.core.voters.is_dynamic
    assert node.core.voters.ids == (1, 2, 3)


def test_a_change_at_the_log_start_truncated_away_falls_back_to_the_upgraded_set():
    """The log starts at a snapshot that holds the upgrade, and the next change, written at
    that very offset, is truncated away: the set before it is the latest again, not the
    static configuration (retention forgot it, as the simulator found)."""
    voters = Voters(VoterSet.static((1, 2, 3)))
    upgraded = VoterSet(tuple(Voter(i, directory(i).bytes, endpoint(i), 0, 1) for i in (1, 2, 3)))
    voters.observe(44, KRaftVersionRecord(1))
    voters.observe(45, upgraded.record())
    voters.observe(68, upgraded.with_voter(Voter(4, directory(4).bytes, endpoint(4), 0, 1)).record())
    voters.forget_before(68)  # a snapshot ends at 68
    assert voters.at(67) == upgraded
    voters.truncate(68)
    assert voters.latest == upgraded and voters.is_dynamic


def test_a_new_leader_rewrites_its_own_outdated_entry():
    """Kafka's leader writes the voter set with its own entry updated at the start of its
    epoch when its endpoints changed (a controller restarted on another port)."""
    old = VoterSet(tuple(Voter(i, directory(i).bytes, endpoint(i), 0, 1) for i in (1, 2, 3)))
    snapshots = MemorySnapshotStore()
    write_bootstrap(snapshots, old)
    node = Node(1, voters=(), snapshots=snapshots, directory_id=directory(1).bytes, endpoints=endpoint(1, 7777))
    node = leader_node(node=node)
    assert node.core.role == Role.LEADER
    written = control_messages(node, 0)
    assert isinstance(written[0], LeaderChangeMessage)
    assert written[1:] == [KRaftVersionRecord(1), VotersRecord(tuple(
        Voter(i, directory(i).bytes, endpoint(i, 7777 if i == 1 else None), 0, 1) for i in (1, 2, 3)))]
    assert node.core.voters.latest.get(1).endpoints == endpoint(1, 7777)


def test_a_new_leader_whose_entry_is_current_writes_only_its_leader_change():
    current = VoterSet(tuple(Voter(i, directory(i).bytes, endpoint(i), 0, 1) for i in (1, 2, 3)))
    snapshots = MemorySnapshotStore()
    write_bootstrap(snapshots, current)
    node = leader_node(node=Node(1, voters=(), snapshots=snapshots, directory_id=directory(1).bytes,
                                 endpoints=endpoint(1)))
    assert [type(w) for w in control_messages(node, 0)] == [LeaderChangeMessage]
