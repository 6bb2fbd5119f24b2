"""The simulator's disk faults on MemoryLog: a crash keeps what was flushed plus a prefix of
the unflushed batches and maybe part of the next, and reopening (`recover()`) cuts a torn
tail but refuses flushed data gone bad, as opening a FileLog does."""

import pytest

from kraft.records import build_batch, read_batches
from kraft.storage import CorruptLogError, MemoryLog


def write(log: MemoryLog, values: list[bytes], epoch: int = 1) -> None:
    for value in values:
        log.append_as_leader(build_batch([(None, value)], timestamp=1), epoch)


def values(log: MemoryLog) -> list[bytes | None]:
    data = log.read(log.start_offset, 1 << 20).data
    return [record.value for batch in read_batches(data) for record in batch.records()]


def a_log(flushed: int, unflushed: int) -> MemoryLog:
    log = MemoryLog()
    write(log, [b"v%d" % i for i in range(flushed)])
    log.flush()
    write(log, [b"v%d" % i for i in range(flushed, flushed + unflushed)], epoch=2)
    return log


def test_a_plain_crash_keeps_exactly_what_was_flushed():
    log = a_log(3, 2)
    assert len(log.unflushed_batch_sizes()) == 2
    log.simulate_crash()
    assert log.recover() == 0
    assert (log.end_offset, log.last_flushed_offset, log.latest_epoch) == (3, 3, 1)
    assert values(log) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("kept", [0, 1, 2, 3])
def test_a_crash_may_keep_a_prefix_of_the_unflushed_batches(kept):
    log = a_log(2, 3)
    log.simulate_crash(kept_batches=kept)
    assert log.recover() == 0
    assert values(log) == [b"v%d" % i for i in range(2 + kept)]
    assert log.last_flushed_offset == log.end_offset == 2 + kept  # reopening made them durable
    assert log.epoch_entries() == ([(1, 0), (2, 2)] if kept else [(1, 0)])


def test_a_torn_batch_is_cut_and_the_log_goes_on_after_it():
    log = a_log(2, 3)
    size = log.unflushed_batch_sizes()[1]
    for torn in (1, 11, size - 1):  # inside the length field, the header, the last byte
        log = a_log(2, 3)
        log.simulate_crash(kept_batches=1, torn_bytes=torn)
        assert log.recover() == torn
        assert values(log) == [b"v0", b"v1", b"v2"] and log.end_offset == 3
        write(log, [b"after"], epoch=3)
        assert log.end_offset == 4 and log.epoch_for_offset(3) == 3


def test_every_flipped_byte_of_flushed_data_is_refused():
    """Every byte of every flushed batch, including the header fields the CRC does not
    cover (base offset, length, leader epoch, magic, the CRC itself)."""
    flushed = a_log(3, 1).flushed_bytes
    assert flushed > 3 * 61  # three whole batches (61 bytes of header each, and a record)
    for index in range(flushed):
        for mask in (0x01, 0x80, 0xFF):
            log = a_log(3, 1)
            log.simulate_crash()
            hit = log.flip_flushed_byte(index, mask)
            with pytest.raises(CorruptLogError, match="below the recovery point 3: this data was flushed"):
                log.recover()
            assert hit in (0, 1, 2)
            with pytest.raises(CorruptLogError):  # refused again: nothing was dropped
                log.recover()


def test_faults_that_cannot_happen_are_refused():
    log = a_log(2, 2)
    with pytest.raises(ValueError, match="cannot keep 3 whole batches"):
        log.simulate_crash(kept_batches=3)
    with pytest.raises(ValueError, match="cannot keep 2 whole batches and 1 bytes of the next"):
        log.simulate_crash(kept_batches=2, torn_bytes=1)
    with pytest.raises(ValueError, match="is not in the"):
        log.flip_flushed_byte(log.flushed_bytes, 1)
    with pytest.raises(ValueError, match="mask 0"):
        log.flip_flushed_byte(0, 0)
