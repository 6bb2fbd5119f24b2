"""The epoch rules every fetcher meets (epochs.py): fencing, the end of an epoch, and
where a fetcher's history diverges, from the log and, before its start, the snapshot."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft.epochs import UNKNOWN, EpochHistory, fence
from kraft.raft.raft_errors import InvariantViolation
from kraft.storage import MemoryLog, MemorySnapshotStore, OffsetAndEpoch, SnapshotError, SnapshotId

from .conftest import follower_batch


@pytest.mark.parametrize("requested, leading, unchecked, error", [
    (5, True, False, ErrorCode.none),
    (4, True, False, ErrorCode.fenced_leader_epoch),
    (6, True, False, ErrorCode.unknown_leader_epoch),
    (5, False, False, ErrorCode.not_leader_or_follower),
    (-1, True, False, ErrorCode.fenced_leader_epoch),   # a replica always names its epoch
    (-1, True, True, ErrorCode.none),                  # a consumer that knows none
    (-1, False, True, ErrorCode.not_leader_or_follower),
])
def test_fencing(requested, leading, unchecked, error):
    assert fence(requested, 5, leading, unchecked_allowed=unchecked) == error


def history():
    """Offsets 0-4 in epoch 1, 5-9 in epoch 3, 10-14 in epoch 4."""
    log = MemoryLog()
    for base, epoch in ((0, 1), (5, 3), (10, 4)):
        log.append_as_follower(follower_batch(5, epoch, base))
    return EpochHistory(log, MemorySnapshotStore())


def test_the_end_of_an_epoch_is_where_the_next_one_starts():
    h = history()
    assert h.end_of_epoch(1) == OffsetAndEpoch(5, 1)
    assert h.end_of_epoch(2) == OffsetAndEpoch(5, 1), "the largest epoch at or below the one asked"
    assert h.end_of_epoch(4) == OffsetAndEpoch(15, 4)
    assert h.end_of_epoch(-1) == UNKNOWN


def test_a_fetcher_diverges_where_its_last_epoch_is_not_ours_or_ends_before_its_offset():
    h = history()
    assert h.diverging(7, 3) is None
    assert h.diverging(0, 9) is None, "nothing before offset 0"
    assert h.diverging(7, 2) == OffsetAndEpoch(5, 1), "an epoch we never had"
    assert h.diverging(12, 3) == OffsetAndEpoch(10, 3), "our epoch 3 ended before its offset"


def test_below_the_log_start_the_snapshot_holds_the_history():
    log = MemoryLog()
    store = MemorySnapshotStore()
    writer = store.create_writer(SnapshotId(20, 6), 0)
    writer.append([(None, b"s")])
    writer.freeze()
    log.truncate_fully_and_start_at(20)
    h = EpochHistory(log, store)
    assert h.last() == OffsetAndEpoch(20, 6)
    assert h.epoch_before(20) == 6 and h.snapshot_id_at(20) == SnapshotId(20, 6)
    assert h.end_of_epoch(9) == OffsetAndEpoch(20, 6)
    assert h.end_of_epoch(4) == UNKNOWN, "epoch 4 ended somewhere before offset 20: not known here"
    with pytest.raises(SnapshotError, match="not in the log"):
        h.snapshot_id_at(19)


def test_truncation_to_a_divergence_never_removes_committed_records():
    h = history()
    assert h.truncate_to(OffsetAndEpoch(10, 3), high_watermark=10, node_id=2, leader_id=1) == 10
    with pytest.raises(InvariantViolation, match="to 5 .* below the high watermark 10"):
        h.truncate_to(OffsetAndEpoch(5, 1), high_watermark=14, node_id=2, leader_id=1)
