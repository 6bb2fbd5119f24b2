"""The leader's append(): one call's records in one batch, calls batched while they fit."""

import pytest

from kraft.raft import NotLeaderError, RecordBatchTooLargeError
from kraft.records import SimpleRecord, build_batch, iter_batches

from .conftest import Node, leader_node


def batches(leader, start):
    """(base offset, record count) of each batch in the leader's log from `start`."""
    data = leader.log.read(start, 1 << 30).tobytes()
    return [(h.base_offset, h.next_offset - h.base_offset) for h in iter_batches(data)]


def values(n, size, tag):
    return [SimpleRecord(None, tag + b"%03d" % i + b"x" * size) for i in range(n)]


def test_one_calls_records_are_never_split_between_batches():
    """Four calls of 30 records (about 3.5 KB each) into 10 KB batches: a cut by bytes alone
    would fall inside the third call; whole calls go, two to a batch."""
    leader = leader_node(max_batch_bytes=10_000)
    start = leader.log.end_offset
    offsets = [leader.core.append(values(30, 100, tag), leader.now)[1] for tag in (b"a", b"b", b"c", b"d")]
    leader.advance(0)
    assert offsets == [start + 29, start + 59, start + 89, start + 119]
    assert batches(leader, start) == [(start, 60), (start + 60, 60)]


def test_calls_share_a_batch_while_they_fit():
    leader = leader_node()
    start = leader.log.end_offset
    for tag in (b"a", b"b", b"c"):
        leader.core.append(values(3, 10, tag), leader.now)
    leader.advance(0)
    assert batches(leader, start) == [(start, 9)]


def test_a_call_larger_than_a_batch_is_refused_and_nothing_is_queued():
    leader = leader_node(max_batch_bytes=10_000)
    leader.core.append(values(1, 10, b"a"), leader.now)
    next_offset = leader.core.next_offset
    with pytest.raises(RecordBatchTooLargeError, match="more than the batch limit of 10000 bytes") as refused:
        leader.core.append(values(100, 100, b"b"), leader.now)
    assert refused.value.records == 100 and refused.value.size > 10_000
    assert leader.core.next_offset == next_offset
    start = leader.log.end_offset
    leader.advance(0)
    assert batches(leader, start) == [(start, 1)], "only the first call reached the log"


def test_a_call_that_just_fits_is_appended_alone():
    """Its size bound passes the limit but its encoding does not: it is taken, in a batch of its own."""
    limit = 10_000
    pad = limit
    while len(build_batch(values(1, pad, b"z"))) > limit:
        pad -= 1
    records = values(1, pad, b"z")
    assert len(build_batch(records)) == limit
    leader = leader_node(max_batch_bytes=limit)
    start = leader.log.end_offset
    leader.core.append(values(1, 10, b"a"), leader.now)
    leader.core.append(records, leader.now)
    leader.core.append(values(1, 10, b"b"), leader.now)
    leader.advance(0)
    assert batches(leader, start) == [(start, 1), (start + 1, 1), (start + 2, 1)]


def test_append_on_a_replica_that_is_not_the_leader_queues_nothing():
    with pytest.raises(NotLeaderError):
        Node(1).core.append(values(1, 1, b"a"), 0)
