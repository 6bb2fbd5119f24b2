"""The leader's queue of append() calls: one call never splits, calls share batches while
they fit, a call too large for any batch is refused before anything is queued."""

import pytest

from kraft.raft.accumulator import BatchAccumulator, size_bound
from kraft.raft.raft_errors import RecordBatchTooLargeError
from kraft.records import HEADER_SIZE, build_batch, read_batches


def values(batches):
    return [[r.value for r in b.records()] for data in batches for b in read_batches(bytes(data))]


def test_calls_share_a_batch_while_they_fit_and_never_split():
    acc = BatchAccumulator(max_batch_bytes=HEADER_SIZE + 2 * size_bound([(None, b"x" * 50)] * 3),
                           drain_bytes=1 << 20, linger_ms=5)
    call = [(None, b"x" * 50)] * 3
    for _ in range(5):
        acc.add(call, now=0)
    assert acc.count == 15
    batches = acc.drain(now=1)
    assert values(batches) == [[b"x" * 50] * 6, [b"x" * 50] * 6, [b"x" * 50] * 3], "two whole calls per batch"
    assert acc.count == 0 and acc.deadline() is None


def test_the_linger_and_the_drain_size_decide_when_the_queue_goes_out():
    acc = BatchAccumulator(max_batch_bytes=1 << 20, drain_bytes=1000, linger_ms=5)
    assert not acc.ready(100), "nothing queued"
    acc.add([(None, b"a")], now=10)
    assert acc.deadline() == 15
    assert not acc.ready(14) and acc.ready(15)
    acc.add([(None, b"b" * 2000)], now=11)
    assert acc.ready(11), "past drain_bytes it goes at once"


def test_a_call_whose_bound_passes_the_limit_is_encoded_to_know_and_refused_only_if_it_does_not_fit():
    records = [(None, b"y" * 10)] * 20
    exact = len(build_batch(records, timestamp=0))
    acc = BatchAccumulator(max_batch_bytes=exact, drain_bytes=1 << 20, linger_ms=0)
    assert HEADER_SIZE + size_bound(records) > exact, "the bound alone would refuse it"
    acc.add(records, now=0)
    assert values(acc.drain(now=0)) == [[b"y" * 10] * 20]
    with pytest.raises(RecordBatchTooLargeError, match="more than the batch limit"):
        acc.add(records + [(None, b"z")], now=0)
    assert acc.count == 0, "nothing queued"


def test_the_size_bound_counts_keys_values_and_headers():
    plain = size_bound([(b"k", b"v")])
    with_header = size_bound([(b"k", b"v", [("h", b"1234")])])
    assert with_header > plain
    for records in ([(b"k", b"v")], [(b"k", b"v", [("h", b"1234")])], [(None, b"x" * 300)] * 7):
        assert len(build_batch(records, timestamp=0)) - HEADER_SIZE <= size_bound(records)
