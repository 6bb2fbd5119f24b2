"""The metadata partition's leader hands the offsets partitions it leads over, once another
voter of that partition is caught up (server/runtime/leadership_balance.py), on real cores.
On real processes: tests/server/test_fetch_across.py waits for it before it measures."""

from types import SimpleNamespace

from kraft.raft import Role
from kraft.raft import messages as m
from kraft.server.runtime.leadership_balance import to_hand_over
from tests.raft.conftest import Node, elect

FETCH_TIMEOUT_MS = 2000


def fetch_to_the_end(node: Node, voter: int) -> None:
    core = node.core
    node.request(m.fetch_request("c", voter, core.epoch, node.log.end_offset, core.epoch, 0, 0, 1 << 20))


def driver(node: Node) -> SimpleNamespace:
    return SimpleNamespace(core=node.core, partition=node.config.partition)


def test_an_offsets_partition_is_handed_over_once_another_voter_has_caught_up_and_then_resigned():
    metadata, offsets = elect(Node(1)), elect(Node(1))
    assert to_hand_over(metadata.core, [driver(offsets)], offsets.now, FETCH_TIMEOUT_MS) == []  # none caught up
    fetch_to_the_end(offsets, 2)
    (handed,) = to_hand_over(metadata.core, [driver(offsets)], offsets.now, FETCH_TIMEOUT_MS)
    handed.core.resign(offsets.now)
    assert offsets.core.role == Role.RESIGNED
    ended = offsets.sends(m.EndQuorumEpochRequest)
    assert ended and all(s.destination in (2, 3) for s in ended)
    assert to_hand_over(metadata.core, [driver(offsets)], offsets.now, FETCH_TIMEOUT_MS) == []  # once


def test_a_voter_caught_up_longer_ago_than_the_fetch_timeout_is_no_successor():
    metadata, offsets = elect(Node(1)), elect(Node(1))
    fetch_to_the_end(offsets, 3)
    offsets.advance(FETCH_TIMEOUT_MS)
    assert to_hand_over(metadata.core, [driver(offsets)], offsets.now, FETCH_TIMEOUT_MS) == []


def test_a_node_that_does_not_lead_the_metadata_partition_keeps_what_it_leads():
    metadata, offsets = Node(1), elect(Node(1))
    fetch_to_the_end(offsets, 2)
    assert metadata.core.role != Role.LEADER
    assert to_hand_over(metadata.core, [driver(offsets)], offsets.now, FETCH_TIMEOUT_MS) == []
