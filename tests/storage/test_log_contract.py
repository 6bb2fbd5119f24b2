"""The ReplicatedLog contract: every test runs against FileLog and MemoryLog alike."""

import pytest

from kraft.records import LeaderChangeMessage, build_control_batch, read_batches
from kraft.storage import InvalidAppendError, OffsetAndEpoch, OffsetOutOfRangeError, RecordTooLargeError

from .conftest import batch


def offsets_and_values(log, start=None, limit=None):
    info = log.read(log.start_offset if start is None else start, 1 << 30, limit)
    return [(r.offset, r.value) for b in read_batches(info.tobytes(), expected_offset=info.first_offset)
            for r in b.records()]


def test_an_empty_log(logs):
    log = logs.open()
    assert (log.start_offset, log.end_offset, log.latest_epoch, log.last_flushed_offset) == (0, 0, None, 0)
    info = log.read(0, 1000)
    assert (info.size, info.first_offset, info.next_offset) == (0, 0, 0)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(-1, -1)


def test_leader_appends_get_offsets_and_the_epoch(logs):
    log = logs.open()
    first = log.append_as_leader(build_control_batch(LeaderChangeMessage(1, (1, 2, 3), (1,))), epoch=1)
    second = log.append_as_leader(batch(3, base_offset=999), epoch=1)
    assert (first.first_offset, first.last_offset, second.first_offset, second.last_offset) == (0, 0, 1, 3)
    assert log.end_offset == 4 and log.latest_epoch == 1
    batches = list(read_batches(log.read(0, 1 << 20).tobytes(), expected_offset=0))
    assert [b.header.partition_leader_epoch for b in batches] == [1, 1]
    assert [r.offset for r in batches[1].records()] == [1, 2, 3]


def test_several_batches_in_one_leader_append(logs):
    log = logs.open()
    info = log.append_as_leader(batch(2) + batch(3) + batch(1), epoch=4)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert [o for o, _ in offsets_and_values(log)] == list(range(6))


def test_a_leader_cannot_append_in_an_older_epoch(logs):
    log = logs.open()
    log.append_as_leader(batch(), epoch=5)
    with pytest.raises(InvalidAppendError, match="older"):
        log.append_as_leader(batch(), epoch=4)
    assert log.end_offset == 3


def test_follower_appends_are_validated_and_leave_the_log_untouched_when_refused(logs):
    log = logs.open()
    log.append_as_follower(batch(3, epoch=1, base_offset=0))
    good = batch(2, epoch=2, base_offset=3)
    with pytest.raises(InvalidAppendError, match="expected 3"):
        log.append_as_follower(batch(2, epoch=2, base_offset=4))  # gap
    with pytest.raises(InvalidAppendError, match="expected 3"):
        log.append_as_follower(batch(2, epoch=2, base_offset=2))  # overlap
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    with pytest.raises(InvalidAppendError, match="CRC"):
        log.append_as_follower(bytes(corrupt))
    with pytest.raises(InvalidAppendError, match="older than the log's epoch 1"):
        log.append_as_follower(batch(2, epoch=0, base_offset=3))
    with pytest.raises(InvalidAppendError, match="epoch 1, older"):
        log.append_as_follower(batch(1, epoch=2, base_offset=3) + batch(1, epoch=1, base_offset=4))
    with pytest.raises(InvalidAppendError, match="no batches"):
        log.append_as_follower(b"")
    assert (log.end_offset, log.epoch_entries()) == (3, [(1, 0)])
    log.append_as_follower(good)
    assert (log.end_offset, log.epoch_entries()) == (5, [(1, 0), (2, 3)])


def test_batches_over_the_limit_are_refused(logs):
    log = logs.open(max_batch_bytes=500)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch(20, value=b"x" * 100), epoch=1)
    assert log.end_offset == 0


def test_reads_are_whole_batches_bounded_by_bytes_and_upper_bound(logs):
    log = logs.open()
    sizes = []
    for _ in range(5):
        b = batch(4)
        sizes.append(len(b))
        log.append_as_leader(b, epoch=1)
    info = log.read(0, sizes[0] + sizes[1])
    assert (info.first_offset, info.next_offset, info.size) == (0, 8, sizes[0] + sizes[1])
    info = log.read(0, 1)  # smaller than one batch: one batch all the same
    assert (info.next_offset, info.size) == (4, sizes[0])
    info = log.read(5, 1 << 20)  # mid-batch: from the batch holding offset 5
    assert (info.first_offset, info.next_offset) == (4, 20)
    info = log.read(0, 1 << 20, upper_bound=10)  # a batch straddling the bound stays out
    assert info.next_offset == 8
    info = log.read(8, 1 << 20, upper_bound=10)
    assert (info.size, info.next_offset) == (0, 8)
    assert log.read(20, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)


@pytest.mark.parametrize(
    "asked,expected",
    [
        (0, OffsetAndEpoch(-1, -1)),  # older than all, and what came before offset 3 is not known
        (1, OffsetAndEpoch(5, 1)),
        (2, OffsetAndEpoch(5, 1)),   # never written: the largest epoch below it
        (3, OffsetAndEpoch(9, 3)),
        (4, OffsetAndEpoch(9, 3)),
        (5, OffsetAndEpoch(12, 5)),  # the latest epoch ends at the log end
        (9, OffsetAndEpoch(12, 5)),
        (-1, OffsetAndEpoch(-1, -1)),
    ],
)
def test_end_offset_for_epoch(logs, asked, expected):
    log = logs.open()
    log.truncate_fully_and_start_at(3)
    log.append_as_follower(batch(2, epoch=1, base_offset=3))
    log.append_as_follower(batch(4, epoch=3, base_offset=5))
    log.append_as_follower(batch(3, epoch=5, base_offset=9))
    assert log.end_offset_for_epoch(asked) == expected


def test_an_epoch_older_than_all_ends_at_zero_when_the_log_began_there(logs):
    log = logs.open()
    log.append_as_leader(batch(2), epoch=3)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(0, 1)


def check_ends_before_and_after_a_restart(logs, log, expected: dict[int, OffsetAndEpoch]) -> None:
    """Where each asked epoch ends, now and once the log is reopened as a restart does."""
    assert {e: log.end_offset_for_epoch(e) for e in expected} == expected
    log = logs.reopen(log)
    assert {e: log.end_offset_for_epoch(e) for e in expected} == expected, "the same after a restart"


def test_epochs_below_the_log_start_stay_known(logs):
    log = logs.open()
    for epoch in (1, 2, 3):
        log.append_as_leader(batch(5), epoch=epoch)  # epoch 1: 0-4, 2: 5-9, 3: 10-14
    log.flush()
    log.advance_start_offset(10)
    assert (log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)) == (OffsetAndEpoch(5, 1), OffsetAndEpoch(10, 2))
    log.advance_start_offset(15)
    assert log.latest_epoch is None, "no batch left in the log"
    check_ends_before_and_after_a_restart(logs, log, {
        1: OffsetAndEpoch(5, 1), 2: OffsetAndEpoch(10, 2), 3: OffsetAndEpoch(15, 3), 4: OffsetAndEpoch(15, 3)})


def test_a_restart_from_a_snapshot_this_log_agrees_with_keeps_its_history(logs):
    log = logs.open()
    for epoch in (1, 2, 4):
        log.append_as_leader(batch(5), epoch=epoch)  # epoch 1: 0-4, 2: 5-9, 4: 10-14
    log.truncate_fully_and_start_at(8, epoch_before=2)  # offset 7 was ours in epoch 2: so was all before it
    assert log.epoch_entries() == [(1, 0), (2, 5)]
    log.append_as_leader(batch(5), epoch=7)
    log.flush()
    check_ends_before_and_after_a_restart(logs, log, {
        1: OffsetAndEpoch(5, 1), 2: OffsetAndEpoch(8, 2), 4: OffsetAndEpoch(8, 2), 7: OffsetAndEpoch(13, 7)})


def test_a_restart_from_a_snapshot_this_log_disagrees_with_knows_only_the_snapshots_epoch(logs):
    log = logs.open()
    log.append_as_leader(batch(5), epoch=1)
    log.append_as_leader(batch(5), epoch=3)  # offset 7 is epoch 3 here, epoch 2 in the snapshot
    log.truncate_fully_and_start_at(8, epoch_before=2)
    assert log.epoch_entries() == [(2, 7)]
    assert (log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)) == (OffsetAndEpoch(-1, -1), OffsetAndEpoch(8, 2))
    log.truncate_fully_and_start_at(50, epoch_before=6)  # past the end: nothing of ours to agree with
    log.flush()
    for restarted in (False, True):
        log = logs.reopen(log) if restarted else log
        assert log.epoch_entries() == [(6, 49)]
        assert (log.end_offset_for_epoch(5), log.end_offset_for_epoch(6)) == (OffsetAndEpoch(-1, -1), OffsetAndEpoch(50, 6))


def test_truncation_removes_records_and_epochs(logs):
    log = logs.open()
    log.append_as_leader(batch(3), epoch=1)
    log.append_as_leader(batch(3), epoch=2)
    log.append_as_leader(batch(3), epoch=3)
    log.flush()
    log.truncate_to(6)
    assert (log.end_offset, log.latest_epoch, log.epoch_entries()) == (6, 2, [(1, 0), (2, 3)])
    assert log.last_flushed_offset == 6
    log.truncate_to(100)  # past the end: nothing to do
    assert log.end_offset == 6
    log.append_as_leader(batch(1), epoch=4)
    assert offsets_and_values(log)[-1][0] == 6 and log.epoch_entries()[-1] == (4, 6)
    log.truncate_to(3)
    log.truncate_to(0)
    assert (log.end_offset, log.latest_epoch) == (0, None)


@pytest.mark.parametrize(
    "diverging,expected_end",
    [
        (OffsetAndEpoch(5, 2), 3),   # same epoch, leader's ends inside our batch 3..5: it goes whole
        (OffsetAndEpoch(6, 2), 6),   # same epoch, same end
        (OffsetAndEpoch(8, 2), 6),   # same epoch, ours ends earlier
        (OffsetAndEpoch(4, 1), 3),   # we never had epoch... we had 1, ending at 3
        (OffsetAndEpoch(9, 4), 9),   # epoch 4 unknown here: ours of epoch 3 ends at 9
        (OffsetAndEpoch(0, 0), 0),
    ],
)
def test_truncate_to_the_leaders_diverging_epoch(logs, diverging, expected_end):
    log = logs.open()
    log.append_as_follower(batch(3, epoch=1, base_offset=0))
    log.append_as_follower(batch(3, epoch=2, base_offset=3))
    log.append_as_follower(batch(3, epoch=3, base_offset=6))
    assert log.truncate_to_end_offset(diverging) == expected_end
    assert log.end_offset == expected_end


def test_truncate_fully_and_start_at(logs):
    log = logs.open()
    log.append_as_leader(batch(3), epoch=1)
    log.truncate_fully_and_start_at(50)
    assert (log.start_offset, log.end_offset, log.latest_epoch, log.last_flushed_offset) == (50, 50, None, 50)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    log.append_as_leader(batch(2), epoch=3)
    assert [o for o, _ in offsets_and_values(log)] == [50, 51]
    log = logs.reopen(log)
    assert (log.start_offset, log.end_offset) == (50, 50 if logs.kind == "memory" else 52)


def test_advancing_the_start_offset(logs):
    log = logs.open()
    for epoch in (1, 1, 2, 2):
        log.append_as_leader(batch(5), epoch=epoch)
    log.advance_start_offset(10)
    assert (log.start_offset, log.end_offset) == (10, 20)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert [o for o, _ in offsets_and_values(log)] == list(range(10, 20))
    assert log.epoch_entries() == [(1, 0), (2, 10)], "epochs below the start stay known"
    log.advance_start_offset(5)  # never backwards
    assert log.start_offset == 10
    log.advance_start_offset(20)
    assert (log.start_offset, log.end_offset) == (20, 20)
    log.append_as_leader(batch(1), epoch=2)
    assert offsets_and_values(log) == [(20, b"v0")]
    with pytest.raises(ValueError, match="pass the log end"):
        log.advance_start_offset(25)
    log.append_as_leader(batch(3), epoch=2)
    with pytest.raises(ValueError, match="inside a batch"):
        log.advance_start_offset(22)


def test_flush_covers_appends_and_survives_a_restart(logs):
    log = logs.open()
    log.append_as_leader(batch(3), epoch=1)
    assert log.last_flushed_offset == 0
    assert log.flush() == 3
    log.append_as_leader(batch(3, value=b"later"), epoch=1)
    log = logs.reopen(log)
    if logs.kind == "memory":
        assert log.end_offset == 3, "what was not flushed is lost in a crash"
    assert log.end_offset >= 3
    assert offsets_and_values(log)[:3] == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    log.append_as_leader(batch(1), epoch=2)
    assert log.epoch_entries()[-1][0] == 2


def test_bytes_from_an_offset(logs):
    log = logs.open()
    sizes = []
    for _ in range(4):
        b = batch(5)
        sizes.append(len(b))
        log.append_as_leader(b, epoch=1)
    assert log.size_in_bytes == sum(sizes)
    assert log.bytes_from(0) == sum(sizes)
    assert log.bytes_from(10) == sum(sizes[2:])
    assert log.bytes_from(12) == sum(sizes[2:]), "from the start of the batch holding it"
    assert log.bytes_from(20) == 0
