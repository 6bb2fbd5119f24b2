"""The leader's parked fetches: woken by their deadline, by the log growing past their
offset, or by the leader's high watermark passing the fetcher's (Fetch v18); answered in the order they came; the index stays bounded."""

from kraft.raft.messages import NO_HIGH_WATERMARK
from kraft.raft.parked_fetches import ParkedFetch, ParkedFetches


def parked(handle, offset=10, deadline=500, high_watermark=10):
    return ParkedFetch(handle, replica_id=1000 + handle, fetch_offset=offset, max_bytes=1 << 20, deadline=deadline,
                       high_watermark=high_watermark)


def handles(fetches):
    return [f.handle for f in fetches]


def test_nothing_is_due_before_its_deadline_or_new_data():
    fetches = ParkedFetches()
    for h in range(3):
        fetches.park(parked(h))
    assert fetches.take_due(now=499, high_watermark=10, log_end_offset=10) == []
    assert len(fetches) == 3 and fetches.next_deadline() == 500


def test_deadlines_wake_only_the_fetches_whose_wait_is_over_in_arrival_order():
    fetches = ParkedFetches()
    for h, deadline in enumerate((300, 100, 200, 900)):
        fetches.park(parked(h, deadline=deadline))
    assert fetches.next_deadline() == 100
    assert handles(fetches.take_due(now=250, high_watermark=10, log_end_offset=10)) == [1, 2]
    assert fetches.next_deadline() == 300
    assert handles(fetches.take_due(now=300, high_watermark=10, log_end_offset=10)) == [0]
    assert handles(fetches) == [3] and fetches.next_deadline() == 900


def test_the_log_growing_past_a_fetch_offset_wakes_that_fetch():
    fetches = ParkedFetches()
    for h, offset in enumerate((12, 10, 11, 10)):
        fetches.park(parked(h, offset=offset))
    assert handles(fetches.take_due(now=0, high_watermark=10, log_end_offset=11)) == [1, 3]
    assert handles(fetches.take_due(now=0, high_watermark=10, log_end_offset=13)) == [0, 2]
    assert len(fetches) == 0 and fetches.next_deadline() is None


def test_a_fetch_due_twice_over_is_answered_once_in_arrival_order():
    fetches = ParkedFetches()
    fetches.park(parked(0, offset=10, deadline=100))
    fetches.park(parked(1, offset=9, deadline=900))
    fetches.park(parked(2, offset=9, deadline=100))
    assert handles(fetches.take_due(now=100, high_watermark=10, log_end_offset=10)) == [0, 1, 2]


def test_the_leaders_high_watermark_wakes_the_fetchers_behind_it_only():
    """KIP-1166: a fetcher whose high watermark is behind the leader's learns the new one at
    once; one that has it, and one older than v18 (which sends none), wait."""
    fetches = ParkedFetches()
    for h, hw in enumerate((8, 10, NO_HIGH_WATERMARK, -1, 9)):
        fetches.park(parked(h, high_watermark=hw))
    assert handles(fetches.take_due(now=0, high_watermark=None, log_end_offset=10)) == []
    assert handles(fetches.take_due(now=0, high_watermark=9, log_end_offset=10)) == [0, 3]
    assert handles(fetches.take_due(now=0, high_watermark=10, log_end_offset=10)) == [4]
    assert handles(fetches) == [1, 2]


def test_an_idle_leaders_index_stays_bounded():
    """Fetches that only ever time out leave entries behind in the offset heap: rebuilt
    before they pile up, however many rounds pass."""
    fetches = ParkedFetches()
    now = 0
    for _ in range(200):
        for h in range(50):
            fetches.park(parked(h, deadline=now + 500))
        now += 500
        assert len(fetches.take_due(now, high_watermark=10, log_end_offset=10)) == 50
    fetches.park(parked(0, deadline=now + 500))
    for heap in (fetches._by_offset, fetches._by_deadline, fetches._by_high_watermark):
        assert len(heap) <= 2 * 50 + 64 + 1
    assert handles(fetches.take_due(now, high_watermark=10, log_end_offset=11)) == [0], "the live one is still found"


def test_a_fetch_is_taken_by_its_handle_and_only_once():
    parked = ParkedFetches()
    for i in range(3):
        parked.park(ParkedFetch(("h", i), 2, 10, 100, 500 + i, -1))
    taken = parked.take(("h", 1))
    assert taken is not None and taken.deadline == 501
    assert parked.take(("h", 1)) is None and len(parked) == 2
    assert [f.handle for f in parked.take_due(600, None, 0)] == [("h", 0), ("h", 2)]
    assert parked.take(("h", 0)) is None, "answered already"
