"""The `__consumer_offsets` partitions' voters on a dynamic quorum (server/runtime/offsets_voters.py):
which change a partition's leader makes next toward the metadata partition's voters, and
when this replica knows those voters are committed (on real cores, hand-driven)."""

import uuid

from kio.schema.errors import ErrorCode

from kraft.raft import Role
from kraft.raft import messages as m
from kraft.raft.voters import VoterSet
from kraft.records.control import Voter, VoterEndpoint
from kraft.server.runtime.offsets_voters import ADD, REMOVE, UPDATE, Change, committed_voters, next_change
from tests.raft.conftest import Node
from tests.raft.test_membership import add, caught_up, fetch, formatted


def voter(node_id: int, directory: int | None = None, port: int | None = None) -> Voter:
    return Voter(node_id, uuid.UUID(int=directory or node_id).bytes,
                 (VoterEndpoint("CONTROLLER", "localhost", port or 9000 + node_id),), 0, 1)


def voters(*entries: int | Voter) -> VoterSet:
    return VoterSet(tuple(sorted((e if isinstance(e, Voter) else voter(e) for e in entries),
                                 key=lambda v: v.voter_id)))


def everyone(node_id: int) -> bool:
    return True


def nobody(node_id: int) -> bool:
    return False


def test_an_addition_comes_first_once_its_voter_is_a_caught_up_observer():
    target, current = voters(1, 2, 4), voters(1, 2, 3)  # 3 replaced by 4
    assert next_change(target, current, 1, everyone) == Change(ADD, voter(4))
    # 4 does not fetch this partition yet: 3 goes first, and 4 is added once it does
    assert next_change(target, current, 1, nobody) == Change(REMOVE, voter(3))
    assert next_change(target, voters(1, 2), 1, nobody) is None
    assert next_change(target, voters(1, 2), 1, lambda n: n == 4) == Change(ADD, voter(4))
    assert next_change(target, target, 1, everyone) is None


def test_the_leader_removes_itself_last_and_never_while_an_addition_waits():
    target = voters(2, 3)
    assert next_change(target, voters(1, 3), 1, nobody) is None  # 2 must join before 1 leaves
    assert next_change(target, voters(1, 3), 1, everyone) == Change(ADD, voter(2))
    assert next_change(voters(2), voters(1, 2, 3), 1, everyone) == Change(REMOVE, voter(3))
    assert next_change(voters(2), voters(1, 2), 1, everyone) == Change(REMOVE, voter(1))


def test_a_voter_formatted_again_is_removed_before_its_new_directory_is_added():
    target, current = voters(1, 2, voter(3, directory=33)), voters(1, 2, 3)
    assert next_change(target, current, 1, everyone) == Change(REMOVE, voter(3))
    assert next_change(target, voters(1, 2), 1, everyone) == Change(ADD, voter(3, directory=33))


def test_an_entry_whose_endpoints_changed_is_updated():
    moved = voter(2, port=7777)
    change = next_change(voters(1, moved), voters(1, 2), 1, everyone)
    assert change == Change(UPDATE, moved)
    request = change.request("c", 4, 1000)
    assert (request.voter_id, request.current_leader_epoch, request.listeners[0].port) == (2, 4, 7777)


def test_the_metadata_voters_count_once_committed_and_held_by_this_replica():
    node = Node(node_id=1, voters=(), snapshots=formatted(1))
    assert committed_voters(node.core) is None  # no high watermark yet: not leading
    node.advance(5000)
    node.flush()
    assert node.core.role == Role.LEADER and committed_voters(node.core).ids == (1,)
    caught_up(node, 2)
    node.request(add(2), handle="add")
    node.flush()
    assert node.core.voters.ids == (1, 2) and committed_voters(node.core) is None  # appended, not committed
    fetch(node, 2, node.core.log.end_offset, node.core.epoch)
    assert committed_voters(node.core).ids == (1, 2)
    node.restart()  # a restarted replica knows no high watermark until its leader answers
    assert committed_voters(node.core) is None


def test_an_observer_that_knows_no_voters_has_none_to_follow():
    observer = Node(node_id=4, voters=())  # formatted --no-initial-controllers
    observer.request(m.begin_quorum_request("c", 1, 1))
    (fetching,) = observer.sends(m.FetchRequest)
    observer.core.handle_response(fetching.request_id, m.fetch_response(
        ErrorCode.none, leader_id=1, epoch=1, high_watermark=0, log_start_offset=0), observer.now)
    assert observer.core.high_watermark == 0 and observer.core.voters.latest.voters == ()
    assert committed_voters(observer.core) is None
