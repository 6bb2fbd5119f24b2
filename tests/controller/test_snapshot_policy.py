"""SnapshotPolicy rule by rule: KIP-630's bytes and changed-ratio thresholds (both needed),
KIP-876's timer, what a snapshot resets, and what commits made while one is written keep."""

import pytest

from kraft.raft import CommittedBatch
from kraft.statemachine.snapshot_policy import SnapshotPolicy

NEVER = 10**15  # a time the timer would have fired long before, were it on


def batch(last_offset, size, at_ms):
    return CommittedBatch(last_offset, last_offset, 1, append_timestamp=at_ms, size_in_bytes=size, records=[])


def test_bytes_alone_decide_when_no_ratio_is_asked():
    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.0, max_interval_ms=0)
    policy.record_commit(batch(0, 999, 0))
    assert policy.due(NEVER, changed_ratio=0.0) is None, "999 bytes < 1000"
    policy.record_commit(batch(1, 1, 0))
    assert "1000 bytes committed" in policy.due(NEVER, changed_ratio=0.0)


def test_the_ratio_alone_decides_when_a_byte_is_enough():
    policy = SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.5, max_interval_ms=0)
    policy.record_commit(batch(0, 1, 0))
    assert policy.due(NEVER, changed_ratio=0.49) is None
    assert "50% of its records changed" in policy.due(NEVER, changed_ratio=0.5)


def test_bytes_and_ratio_are_both_needed():
    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.5, max_interval_ms=0)
    policy.record_commit(batch(0, 600, 0))
    assert policy.due(NEVER, changed_ratio=1.0) is None, "the ratio, but not the bytes"
    policy.record_commit(batch(1, 600, 0))
    assert policy.due(NEVER, changed_ratio=0.4) is None, "the bytes, but not the ratio"
    assert policy.due(NEVER, changed_ratio=0.5) is not None


def test_the_timer_fires_on_the_oldest_record_not_in_a_snapshot_whatever_the_bytes():
    policy = SnapshotPolicy(max_bytes_between=10**9, min_changed_ratio=1.0, max_interval_ms=60_000)
    assert policy.due(NEVER, changed_ratio=0.0) is None, "nothing committed: nothing is old"
    policy.record_commit(batch(0, 10, 5_000))
    policy.record_commit(batch(1, 10, 30_000))
    assert policy.due(64_999, changed_ratio=0.0) is None
    assert "60000 ms old" in policy.due(65_000, changed_ratio=0.0), "timed from the oldest, not the latest"


def test_an_interval_of_zero_turns_the_timer_off():
    policy = SnapshotPolicy(max_bytes_between=10**9, max_interval_ms=0)
    policy.record_commit(batch(0, 10, 0))
    assert policy.due(NEVER, changed_ratio=1.0) is None


@pytest.mark.parametrize(("size", "now", "reason"), [(1000, 1, "bytes committed"), (10, 60_000, "ms old")])
def test_a_snapshot_made_for_any_reason_restarts_every_counter(size, now, reason):
    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.0, max_interval_ms=60_000)
    policy.record_commit(batch(0, size, 0))
    assert reason in policy.due(now, changed_ratio=0.0)
    policy.snapshot_started(1)
    policy.snapshot_finished(1)
    assert (policy.bytes_since, policy.oldest_unsnapshotted_ms) == (0, None)
    assert policy.due(NEVER, changed_ratio=1.0) is None
    policy.record_commit(batch(1, 10, 1_000))
    policy.reset()  # a snapshot loaded, or made by a state machine that writes its own
    assert (policy.bytes_since, policy.oldest_unsnapshotted_ms) == (0, None)


def test_commits_made_while_a_snapshot_is_written_are_kept_for_the_next():
    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.0, max_interval_ms=60_000)
    policy.record_commit(batch(0, 900, 0))
    policy.record_commit(batch(1, 900, 1_000))
    policy.snapshot_started(2)  # holds offsets 0 and 1
    policy.record_commit(batch(2, 300, 7_000))
    policy.record_commit(batch(3, 400, 9_000))
    assert policy.bytes_since == 2500, "until it is written, nothing is in a snapshot"
    policy.snapshot_finished(2)
    assert (policy.bytes_since, policy.oldest_unsnapshotted_ms) == (700, 7_000)
    assert policy.due(66_999, changed_ratio=1.0) is None
    assert "ms old" in policy.due(67_000, changed_ratio=1.0)


def test_a_snapshot_loaded_while_one_is_written_wins():
    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.0, max_interval_ms=0)
    policy.record_commit(batch(0, 900, 0))
    policy.snapshot_started(1)
    policy.reset()  # the leader's newer snapshot was loaded meanwhile
    policy.record_commit(batch(50, 100, 0))
    policy.snapshot_finished(1)  # the older one, finishing late, changes nothing
    assert policy.bytes_since == 100


def test_a_failed_snapshot_keeps_the_counters_and_backs_off():
    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.0, max_interval_ms=0, retry_backoff_ms=5_000)
    policy.record_commit(batch(0, 1000, 0))
    policy.snapshot_started(1)
    policy.record_commit(batch(1, 10, 0))
    policy.snapshot_failed()
    assert policy.bytes_since == 1010
    assert policy.due(100_000, changed_ratio=1.0) is None, "the delay starts now"
    assert policy.due(104_999, changed_ratio=1.0) is None
    assert policy.due(105_000, changed_ratio=1.0) is not None
    policy.snapshot_started(2)
    policy.snapshot_finished(2)
    policy.record_commit(batch(2, 1000, 0))
    assert policy.due(105_001, changed_ratio=1.0) is not None, "a success ends the backing off"


def test_settings_out_of_range_are_refused():
    for settings, name in (
        ({"max_bytes_between": 0}, "bytes.between.snapshots"),
        ({"min_changed_ratio": 1.5}, "changed_records.ratio"),
        ({"max_interval_ms": -1}, "snapshot.interval.ms"),
        ({"retry_backoff_ms": -1}, "retry backoff"),
    ):
        with pytest.raises(ValueError, match=name):
            SnapshotPolicy(**settings)
