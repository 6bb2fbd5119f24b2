"""A dynamic quorum (KIP-853) on hand-driven cores: the voter set is the latest VotersRecord
in the log or the snapshot it starts from, AddRaftVoter and RemoveRaftVoter change it one
voter at a time with Kafka's checks, and the answer waits for the commit."""

import uuid
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from kraft.raft import Role
from kraft.raft import messages as m
from kraft.raft.membership_messages import (
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    add_raft_voter_request,
    remove_raft_voter_request,
    request_endpoints,
    update_raft_voter_request,
    update_raft_voter_response,
)
from kraft.raft.voters import Voters, VoterSet, write_bootstrap
from kraft.records import LeaderChangeMessage, read_batches
from kraft.records.control import (
    KRaftVersionRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    build_control_batch,
    decode_control_record,
)
from kraft.storage import MemoryLog, MemorySnapshotStore
from tests.raft.conftest import Node, grant_votes, leader_node


def voter(node_id: int) -> Voter:
    return Voter(node_id, uuid.UUID(int=node_id).bytes, (VoterEndpoint("CONTROLLER", "localhost", 9000 + node_id),), 0, 1)


def formatted(*ids: int) -> MemorySnapshotStore:
    store = MemorySnapshotStore()
    write_bootstrap(store, VoterSet(tuple(voter(i) for i in ids)))
    return store


def add(node_id: int, timeout_ms: int = 5000) -> AddRaftVoterRequest:
    return add_raft_voter_request("c", timeout_ms, node_id, uuid.UUID(int=node_id),
                                  (VoterEndpoint("CONTROLLER", "localhost", 9000 + node_id),))


def remove(node_id: int, directory: int | None = None) -> RemoveRaftVoterRequest:
    return remove_raft_voter_request("c", node_id, uuid.UUID(int=node_id if directory is None else directory))


def standalone_leader() -> Node:
    """Node 1 formatted --standalone: the only voter, so it elects itself at once."""
    node = Node(node_id=1, voters=(), snapshots=formatted(1))
    node.advance(5000)
    node.flush()
    assert node.core.role == Role.LEADER and node.core.voters.ids == (1,)
    return node


def leader_with_voter_2() -> Node:
    """The standalone leader, with node 2 added and the change committed."""
    node = standalone_leader()
    caught_up(node, 2)
    node.request(add(2), handle="add")
    node.flush()
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)
    return node


def fetch(node: Node, replica: int, offset: int, epoch: int):
    request = m.fetch_request("c", replica, node.core.epoch, offset, epoch, 0, 0, 1 << 20)
    return node.request(request, handle=("fetch", replica, offset))


def caught_up(node: Node, replica: int) -> None:
    """The replica fetches as an observer up to the leader's end."""
    fetch(node, replica, node.core.log.end_offset, node.core.epoch)


def test_a_static_quorum_cannot_change_its_voters():
    node = Node(node_id=1, voters=(1,))
    node.advance(5000)
    node.flush()
    assert node.core.role == Role.LEADER
    answer = node.request(add(2))
    assert answer.error_code == ErrorCode.unsupported_version and "controller.quorum.voters" in answer.error_message
    assert node.request(remove(1)).error_code == ErrorCode.unsupported_version


def test_the_voters_come_from_the_bootstrap_snapshot():
    node = Node(node_id=2, voters=(), snapshots=formatted(1, 2, 3))
    assert node.core.voters.ids == (1, 2, 3) and node.core.is_voter and node.core.voters.kraft_version == 1
    observer = Node(node_id=4, voters=(), snapshots=formatted(1, 2, 3))
    assert not observer.core.is_voter


def test_an_observer_is_added_once_caught_up_and_the_answer_waits_for_the_commit():
    node = standalone_leader()
    lagging = node.request(add(2))
    assert lagging.error_code == ErrorCode.request_timed_out and "lagging" in lagging.error_message
    caught_up(node, 2)
    assert node.request(add(2), handle="add") is None  # appended, not committed: a majority of {1, 2} is both
    assert node.core.voters.ids == (1, 2)  # counts at once, committed or not
    node.flush()
    assert node.core.high_watermark is not None and node.core.high_watermark <= node.core.voters.latest_offset
    busy = node.request(add(3))
    assert busy.error_code == ErrorCode.request_timed_out and "previous voter change" in busy.error_message
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)  # node 2 now holds the change: committed
    replies = [o for o in node.outbox() if getattr(o, "handle", None) == "add"]
    assert [r.response.error_code for r in replies] == [ErrorCode.none]
    assert node.request(add(2)).error_code == ErrorCode.duplicate_voter


def test_removing_needs_the_directory_id_and_the_leader_that_removes_itself_resigns_once_committed():
    node = leader_with_voter_2()
    wrong = node.request(remove(2, directory=99))
    assert wrong.error_code == ErrorCode.voter_not_found
    assert node.request(remove(1), handle="remove") is None
    assert node.core.voters.ids == (2,) and node.core.role == Role.LEADER  # leads until the removal commits
    node.flush()
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)  # the new set {2} holds it: committed
    replies = [o for o in node.outbox() if getattr(o, "handle", None) == "remove"]
    assert [r.response.error_code for r in replies] == [ErrorCode.none]
    assert node.core.role == Role.RESIGNED and not node.core.is_voter
    node.advance(10_000)  # its election timer runs out: not a voter, it observes instead of campaigning
    assert node.core.role == Role.UNATTACHED and node.core.state.election_deadline is None


def test_a_voter_change_not_committed_in_time_is_answered_request_timed_out():
    node = standalone_leader()
    caught_up(node, 2)
    node.request(add(2, timeout_ms=300), handle="add")
    node.flush()
    node.advance(301)
    replies = [o for o in node.outbox() if getattr(o, "handle", None) == "add"]
    assert [r.response.error_code for r in replies] == [ErrorCode.request_timed_out]


def test_the_voter_set_survives_a_restart_and_goes_into_snapshots():
    node = leader_with_voter_2()
    end = node.core.voters.latest_offset + 1
    sid = node.core.create_snapshot(node.core.snapshot_id_at(end), 0).freeze()
    node.restart()  # the log start is still 0: replayed from the log's control batches
    assert node.core.voters.ids == (1, 2)
    assert [type(r).__name__ for r in node.snapshots.open_reader(sid).raft_messages()] == [
        "KRaftVersionRecord", "VotersRecord"]
    fresh = Node(node_id=3, voters=(), snapshots=MemorySnapshotStore(), log=MemoryLog())
    raw = node.snapshots.open_reader(sid)
    copy = fresh.snapshots.create_raw_writer(sid)
    copy.append(0, bytes(raw.read_chunk(0, raw.size)))
    copy.validate(raw.size)
    copy.freeze()
    fresh.log.truncate_fully_and_start_at(sid.end_offset, sid.epoch)
    fresh.restart()
    assert fresh.core.voters.ids == (1, 2) and fresh.core.voters.latest.get(2).endpoints[0].port == 9002


def test_the_set_in_force_is_the_latest_at_or_below_an_offset_and_truncation_undoes_changes():
    voters = Voters(None)
    assert voters.ids == () and voters.is_dynamic  # no controller.quorum.voters: it learns them from the log
    voters.restart(1, [KRaftVersionRecord(1), VoterSet((voter(1),)).record()])
    voters.observe(10, VoterSet((voter(1), voter(2))).record())
    voters.observe(20, VoterSet((voter(1), voter(2), voter(3))).record())
    assert voters.at(9).ids == (1,) and voters.at(10).ids == (1, 2) and voters.latest.ids == (1, 2, 3)
    assert voters.records_at(15) == (KRaftVersionRecord(1), VoterSet((voter(1), voter(2))).record())
    voters.truncate(20)  # the log now ends at 20: the change at 20 is gone
    assert voters.ids == (1, 2) and voters.latest_offset == 10
    voters.forget_before(15)  # the log starts at 15: the set at 10 is still the one in force there
    assert voters.at(15).ids == (1, 2)
    voters.observe(30, VoterSet((voter(1),)).record())  # node 2 removed, not committed yet
    voters.committed_offset = 25
    assert not voters.contains(2) and voters.may_campaign(2) and not voters.may_campaign(3)
    voters.committed_offset = 31  # committed: node 2 observes from now on
    assert not voters.may_campaign(2) and voters.may_campaign(1)
    static = Voters(VoterSet.static((1, 2, 3)))
    assert static.ids == (1, 2, 3) and not static.is_dynamic and static.records_at(100) == ()


def test_requests_carry_the_directory_id_and_timeout_as_kafka_sends_them():
    request = add(7, timeout_ms=1234)
    assert request.timeout == timedelta(milliseconds=1234) and request.voter_directory_id == uuid.UUID(int=7)
    assert [(e.name, e.host, e.port) for e in request.listeners] == [("CONTROLLER", "localhost", 9007)]


def update(node_id: int, epoch: int, port: int, versions: tuple[int, int] = (0, 1)) -> UpdateRaftVoterRequest:
    return update_raft_voter_request("c", epoch, node_id, uuid.UUID(int=node_id),
                                     (VoterEndpoint("CONTROLLER", "localhost", port),), versions)


def test_a_voter_updates_its_endpoints_at_once_and_by_kafkas_rules():
    node = leader_with_voter_2()
    epoch = node.core.epoch
    assert node.request(update(2, epoch - 1, 7777)).error_code == ErrorCode.fenced_leader_epoch
    assert node.request(update(3, epoch, 7777)).error_code == ErrorCode.voter_not_found
    assert node.request(update(2, epoch, 7777, versions=(0, 0))).error_code == ErrorCode.invalid_request
    answer = node.request(update(2, epoch, 7777))
    assert answer.error_code == ErrorCode.none and answer.current_leader.leader_id == 1  # not waiting for the commit
    assert node.core.voters.latest.get(2).endpoints == (VoterEndpoint("CONTROLLER", "localhost", 7777),)
    assert node.core.voters.ids == (1, 2)
    assert node.request(update(2, epoch, 7778)).error_code == ErrorCode.request_timed_out  # one change at a time


def test_a_follower_whose_entry_names_other_endpoints_asks_its_leader_once():
    follower, asked = moved_follower()
    assert asked.destination == 1 and request_endpoints(asked.request) == (VoterEndpoint("CONTROLLER", "localhost", 7777),)
    assert asked.request.current_leader_epoch == 1
    follower.core.handle_response(asked.request_id, update_raft_voter_response(ErrorCode.none, leader_id=1,
                                                                               leader_epoch=1), follower.now)
    assert [type(s.request) for s in follower.sends()] == [m.FetchRequest]  # fetching again; asked once


def leader_that_learned_the_voters_from_the_log() -> Node:
    """Node 2, formatted --no-initial-controllers: it never holds the bootstrap snapshot and
    its KRaftVersionRecord, but fetches the log from 0, where the VotersRecord that added it
    is (high watermark 1, as a follower), and then leads epoch 2 after node 1 is gone."""
    node = Node(node_id=2, voters=())
    assert node.core.voters.kraft_version == 0 and not node.core.is_voter
    node.request(m.begin_quorum_request("c", 1, 1))
    (fetching,) = node.sends(m.FetchRequest)
    added = build_control_batch(VoterSet((voter(1), voter(2))).record(), base_offset=0, partition_leader_epoch=1)
    node.core.handle_response(fetching.request_id, m.fetch_response(
        ErrorCode.none, leader_id=1, epoch=1, high_watermark=1, log_start_offset=0, records=bytes(added)), node.now)
    node.flush()
    assert node.core.voters.ids == (1, 2) and node.core.voters.kraft_version == 1
    node.advance(5000)  # node 1 is gone: node 2 pre-votes, then campaigns, and 1's votes elect it
    grant_votes(node, voters=(1,))
    grant_votes(node, voters=(1,))
    assert node.core.role == Role.LEADER
    node.flush()
    return node


def test_a_replica_that_learned_the_voters_from_the_log_can_change_them_once_it_leads():
    """Leading, it must still take the quorum for a dynamic one."""
    node = leader_that_learned_the_voters_from_the_log()
    fetch(node, 1, node.core.log.end_offset, node.core.epoch)  # its epoch's LeaderChange committed
    caught_up(node, 3)
    assert node.request(add(3), handle="add") is None  # appended: not UNSUPPORTED_VERSION
    assert node.core.voters.ids == (1, 2, 3)


def test_a_new_leader_changes_no_voter_before_it_commits_in_its_own_epoch():
    """The high watermark it kept as a follower says nothing of its own epoch: until its
    LeaderChange commits, a change could overlap one an earlier leader appended and this
    one has not seen committed (Raft's single-server changes need the leader to have
    committed in its term first; Kafka checks the leader's own high watermark)."""
    node = leader_that_learned_the_voters_from_the_log()
    assert node.core.high_watermark == 1 and node.core.leader_state.high_watermark is None
    caught_up(node, 3)
    refused = node.request(add(3), handle="add")
    assert refused is not None and refused.error_code == ErrorCode.request_timed_out
    assert node.core.voters.ids == (1, 2)
    fetch(node, 1, node.core.log.end_offset, node.core.epoch)  # now it has committed in epoch 2
    caught_up(node, 3)
    assert node.request(add(3), handle="add") is None
    assert node.core.voters.ids == (1, 2, 3)


def test_a_voter_change_request_that_is_itself_wrong_is_invalid_before_anything_else():
    """Kafka checks the request before the quorum's state: a leader with no high watermark in
    its epoch yet (every change REQUEST_TIMED_OUT) still answers these INVALID_REQUEST."""
    endpoint = VoterEndpoint("CONTROLLER", "localhost", 9001)
    node = Node(node_id=1, voters=(), snapshots=formatted(1), endpoints=(endpoint,))
    node.advance(5000)
    assert node.core.role == Role.LEADER and node.core.high_watermark is None
    zero = uuid.UUID(int=0)
    cases = {
        "zero directory id (add)": add_raft_voter_request("c", 5000, 2, zero, (VoterEndpoint("CONTROLLER", "h", 2),)),
        "no controller endpoint": add_raft_voter_request("c", 5000, 2, uuid.UUID(int=2),
                                                         (VoterEndpoint("PLAINTEXT", "h", 2),)),
        "zero directory id (remove)": remove_raft_voter_request("c", 1, zero),
        "upside-down kraft.version range": update_raft_voter_request("c", 1, 1, uuid.UUID(int=1), (endpoint,), (1, 0)),
        "no controller endpoint (update)": update_raft_voter_request("c", 1, 1, uuid.UUID(int=1),
                                                                     (VoterEndpoint("OTHER", "h", 1),), (0, 1)),
    }
    for what, request in cases.items():
        assert node.request(request).error_code == ErrorCode.invalid_request, what
    assert node.request(add(2)).error_code == ErrorCode.request_timed_out, "a valid one waits for the state"


def test_removing_the_only_voter_is_voter_not_found():
    node = standalone_leader()
    answer = node.request(remove(1))
    assert answer.error_code == ErrorCode.voter_not_found and "only voter" in answer.error_message


def moved_follower() -> tuple[Node, object]:
    """Node 2, whose entry in the voter set names other endpoints than it has now, following
    leader 1 of epoch 1: its first fetch answered, its UpdateRaftVoter sent."""
    moved = (VoterEndpoint("CONTROLLER", "localhost", 7777),)
    follower = Node(node_id=2, voters=(), snapshots=formatted(1, 2), endpoints=moved,
                    directory_id=uuid.UUID(int=2).bytes)
    follower.request(m.begin_quorum_request("c", 1, 1))
    (first,) = follower.sends(m.FetchRequest)
    answer = m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=0, log_start_offset=0)
    follower.core.handle_response(first.request_id, answer, follower.now)
    (asked,) = follower.sends(UpdateRaftVoterRequest)
    return follower, asked


def test_an_update_raft_voter_that_gets_no_answer_is_sent_again_every_update_period():
    """Kafka's follower retries every update period (three fetch timeouts) while its entry is
    outdated; the first one here is lost."""
    follower, asked = moved_follower()
    follower.core.handle_send_failure(asked.request_id, follower.now)
    period = 3 * follower.config.fetch_timeout_ms
    resent = []
    for _ in range(2 * period // 100):  # the leader answers every fetch, with nothing new
        follower.advance(100)
        for send in follower.sends():
            if isinstance(send.request, UpdateRaftVoterRequest):
                resent.append(follower.now)
                continue
            answer = m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=0, log_start_offset=0)
            follower.core.handle_response(send.request_id, answer, follower.now)
    assert resent and resent[0] <= period + 200, resent


def test_an_update_raft_voter_answer_naming_a_newer_leader_is_followed():
    follower, asked = moved_follower()
    newer = update_raft_voter_response(ErrorCode.not_leader_or_follower, leader_id=3, leader_epoch=2)
    follower.core.handle_response(asked.request_id, newer, follower.now)
    assert (follower.core.role, follower.core.leader_id, follower.core.epoch) == (Role.FOLLOWER, 3, 2)


# ---------------------------------------------------------------- KIP-1186: AckWhenCommitted, auto-join


def test_an_add_raft_voter_without_ack_when_committed_is_answered_once_appended():
    """AddRaftVoter v1, AckWhenCommitted false: answered as soon as the VotersRecord is in the
    leader's log (the voter being added may be the one the commit needs); the change still
    holds the next one back until it commits, and its commit sends no second answer."""
    node = standalone_leader()
    caught_up(node, 2)
    request = add_raft_voter_request("c", 5000, 2, uuid.UUID(int=2), voter(2).endpoints, ack_when_committed=False)
    answer = node.request(request, handle="add")
    assert answer is not None and answer.error_code == ErrorCode.none
    assert node.core.high_watermark <= node.core.voters.latest_offset, "answered before the commit"
    busy = node.request(add(3))
    assert busy.error_code == ErrorCode.request_timed_out and "previous voter change" in busy.error_message
    node.flush()
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)  # committed
    assert [o for o in node.outbox() if getattr(o, "handle", None) == "add"] == []


def test_an_add_raft_voter_with_ack_when_committed_waits_for_the_commit():
    node = standalone_leader()
    caught_up(node, 2)
    assert node.request(add(2), handle="add") is None and add(2).ack_when_committed


def joining_observer(node_id: int = 2, directory: int | None = None, **config) -> Node:
    endpoints = (VoterEndpoint("CONTROLLER", "localhost", 9000 + node_id),)
    return Node(node_id=node_id, voters=(), endpoints=endpoints,
                directory_id=uuid.UUID(int=node_id if directory is None else directory).bytes, **config)


def run_pair(leader: Node, follower: Node, until, steps: int = 200, sent: list | None = None) -> list:
    """Delivers the follower's requests to the leader and the answers back, 50 ms a step,
    until `until()`; returns the requests the follower sent, in order (also into `sent`)."""
    sent = [] if sent is None else sent
    for _ in range(steps):
        if until():
            return sent
        for send in follower.sends():
            sent.append(send.request)
            answer = leader.request(send.request, handle=("pair", send.request_id))
            if answer is not None:
                follower.core.handle_response(send.request_id, answer, follower.now)
        leader.flush()
        follower.flush()
        for reply in leader.outbox():  # parked fetches answered late
            if isinstance(getattr(reply, "handle", None), tuple) and reply.handle[0] == "pair":
                follower.core.handle_response(reply.handle[1], reply.response, follower.now)
        leader.advance(50)
        follower.advance(50)
    raise AssertionError(f"not reached in {steps} steps; sent {[type(r).__name__ for r in sent]}")


def test_a_controller_with_auto_join_adds_itself_once_it_has_caught_up():
    leader = standalone_leader()
    observer = joining_observer(auto_join=True, bootstrap_servers=1)
    sent = run_pair(leader, observer, lambda: leader.core.voters.ids == (1, 2) and observer.core.is_voter)
    adds = [r for r in sent if isinstance(r, AddRaftVoterRequest)]
    assert adds and not adds[-1].ack_when_committed and adds[-1].voter_directory_id == uuid.UUID(int=2)
    assert leader.core.voters.latest.get(2).endpoints == observer.config.endpoints


def test_a_controller_without_auto_join_stays_an_observer():
    leader = standalone_leader()
    observer = joining_observer(bootstrap_servers=1)
    sent: list = []
    with pytest.raises(AssertionError, match="not reached"):
        run_pair(leader, observer, lambda: False, steps=300, sent=sent)  # 15 s: five update periods
    assert sent and not any(isinstance(r, AddRaftVoterRequest | RemoveRaftVoterRequest) for r in sent)
    assert observer.core.high_watermark == leader.core.high_watermark, "it fetched all along"
    assert leader.core.voters.ids == (1,) and not observer.core.is_voter


def test_auto_join_removes_its_own_id_with_another_directory_first():
    """Node 2 lost its disk: the voter set still names (2, its old directory). With auto-join
    it asks to remove that entry, then to add itself with its new directory."""
    leader = leader_with_voter_2()
    observer = joining_observer(directory=22, auto_join=True, bootstrap_servers=1)

    def rejoined() -> bool:
        entry = leader.core.voters.latest.get(2)
        return entry is not None and entry.directory_id == uuid.UUID(int=22).bytes

    sent = run_pair(leader, observer, rejoined, steps=600)
    changes = [r for r in sent if isinstance(r, AddRaftVoterRequest | RemoveRaftVoterRequest)]
    assert isinstance(changes[0], RemoveRaftVoterRequest) and isinstance(changes[-1], AddRaftVoterRequest)
    assert (changes[0].voter_id, changes[0].voter_directory_id) == (2, uuid.UUID(int=2))


# ---------------------------------------------------------------- a leader's own entry


def written_control(node: Node) -> list:
    """The control records of the node's log, decoded, in order."""
    data = bytes(node.log.read(0, 1 << 20).data)
    return [decode_control_record(r) for b in read_batches(data) if b.header.is_control for r in b.records()]


@pytest.mark.parametrize("outdated", [
    (VoterEndpoint("CONTROLLER", "localhost", 7777),), "kraft.version range"])
def test_a_new_leader_rewrites_its_own_outdated_entry_at_the_start_of_its_epoch(outdated):
    """Kafka's leader writes, in its LeaderChange's batch, the kraft.version record and the
    voter set with its own entry as it is now, when the entry names other endpoints (it
    restarted on another port) or another kraft.version range (appendStartOfEpochControlRecords)."""
    entries = [voter(i) for i in (1, 2, 3)]
    endpoints = entries[0].endpoints
    if outdated == "kraft.version range":
        entries[0] = Voter(1, entries[0].directory_id, endpoints, 1, 1)
    else:
        endpoints = outdated
    store = MemorySnapshotStore()
    write_bootstrap(store, VoterSet(tuple(entries)))
    node = leader_node(node=Node(1, voters=(), snapshots=store, directory_id=uuid.UUID(int=1).bytes,
                                 endpoints=endpoints))
    mine = Voter(1, uuid.UUID(int=1).bytes, endpoints, 0, 1)
    (change, kraft_version, voters) = written_control(node)
    assert isinstance(change, LeaderChangeMessage)
    assert (kraft_version, voters) == (KRaftVersionRecord(1), VotersRecord((mine, voter(2), voter(3))))
    assert node.core.voters.latest.get(1) == mine and node.core.voters.latest_offset == 2
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)
    assert node.core.high_watermark == 3, "committed as any voter change"


def test_a_new_leader_whose_entry_is_current_writes_only_its_leader_change():
    node = leader_node(node=Node(1, voters=(), snapshots=formatted(1, 2, 3), directory_id=uuid.UUID(int=1).bytes,
                                 endpoints=voter(1).endpoints))
    assert [type(r) for r in written_control(node)] == [LeaderChangeMessage]
