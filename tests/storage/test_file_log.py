"""FileLog on disk: Kafka's layout, and recovery from what crashes and bad disks leave."""

import json
import logging
import os
import random
import socket

import crc32c
import pytest

from kraft.records import iter_batches, read_batches
from kraft.storage import (
    CorruptCheckpointError,
    CorruptLogError,
    ElectionState,
    FileLog,
    FileQuorumStateStore,
)
from kraft.storage.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from kraft.storage.segment import INDEX_ENTRY
from kraft.storage.snapshot import SnapshotId, snapshot_file_name

from .conftest import batch


@pytest.fixture
def path(tmp_path):
    return tmp_path / "__cluster_metadata-0"


def fill(log, batches=10, epochs=(1, 2)):
    for i in range(batches):
        log.append_as_leader(batch(3, value=b"r%d-" % i), epoch=epochs[i * len(epochs) // batches])


def values(log):
    out = []
    offset = log.start_offset
    while offset < log.end_offset:
        info = log.read(offset, 1 << 30)
        out += [r.value for b in read_batches(info.tobytes()) for r in b.records()]
        offset = info.next_offset
    return out


def flip(path, batch: int, byte: int, mask: int):
    """Flips bits in the first segment: `byte` bytes into its `batch`-th batch. Returns that batch."""
    seg = path / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    victim = list(iter_batches(bytes(data)))[batch]
    data[victim.position + byte] ^= mask
    seg.write_bytes(bytes(data))
    return victim


def test_files_are_in_kafkas_layout_and_formats(path):
    log = FileLog(path, segment_bytes=500)
    fill(log)
    log.flush()
    names = sorted(p.name for p in path.iterdir())
    segments = [n for n in names if n.endswith(".log")]
    assert len(segments) > 1 and all(len(n) == 24 and n[:20].isdigit() for n in segments)
    assert [int(n[:20]) for n in segments] == [s.base_offset for s in log.segments]
    assert all(n.replace(".log", ".index") in names for n in segments)
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n2 15\n"
    # Zero-padded so the recovery point can be rewritten in place on every flush; each
    # carries its CRC32C as a second entry. Kafka's reader takes both as partitions' offsets.
    for name, offset in (("log-start-offset-checkpoint", 0), ("recovery-point-offset-checkpoint", 30)):
        body = f"0\n2\n__cluster_metadata 0 {offset:020d}\n"
        text = (path.parent / name).read_text()
        assert text == body + f"__kraft_crc32c 0 {crc32c.crc32c(body.encode()):010d}\n"
        version, count, *entries = text.splitlines()
        assert (version, int(count)) == ("0", len(entries)) and all(len(e.split()) == 3 for e in entries)


def test_index_entries_name_a_batch_last_offset_and_its_position(path):
    log = FileLog(path, index_interval_bytes=200)
    fill(log, batches=30)
    log.close()  # the index is written in bulk, at the latest on close
    data = (path / "00000000000000000000.log").read_bytes()
    raw = (path / "00000000000000000000.index").read_bytes()
    entries = [INDEX_ENTRY.unpack_from(raw, i) for i in range(0, len(raw), 8)]
    assert len(entries) > 5
    by_position = {h.position: h for h in iter_batches(data)}
    for relative, position in entries:
        assert by_position[position].last_offset == relative


def test_a_torn_tail_beyond_the_recovery_point_is_cut_and_reported(path, caplog):
    log = FileLog(path)
    fill(log, batches=4)
    log.flush()
    durable = log.end_offset
    fill(log, batches=4, epochs=(3,))  # never flushed: what a crash may tear
    del log
    seg = path / "00000000000000000000.log"
    crashed = {p: p.read_bytes() for p in list(path.iterdir()) + list(path.parent.glob("*-checkpoint"))}
    full = seg.read_bytes()
    headers = list(iter_batches(full))
    durable_bytes = headers[3].position + headers[3].size
    rng = random.Random(7)
    for cut in sorted(rng.sample(range(durable_bytes + 1, len(full)), 12)):
        for p, data in crashed.items():
            p.write_bytes(data)
        seg.write_bytes(full[:cut])
        with caplog.at_level(logging.WARNING, "kraft.storage"):
            log = FileLog(path)
        kept = [h for h in headers if h.position + h.size <= cut]
        assert log.end_offset == kept[-1].next_offset >= durable
        if cut != kept[-1].position + kept[-1].size:
            assert "cut the log at position" in caplog.text
        assert log.latest_epoch == kept[-1].partition_leader_epoch
        caplog.clear()
        log.append_as_leader(batch(1), epoch=5)  # the log takes appends after recovery
        del log


@pytest.mark.parametrize("damage", ["garbage", "flipped-bit", "zeros"])
def test_damage_in_the_unflushed_tail_is_cut(path, damage):
    log = FileLog(path)
    fill(log, batches=4)
    log.flush()
    durable = log.end_offset
    fill(log, batches=3, epochs=(2,))
    del log
    seg = path / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    all_batches = list(iter_batches(bytes(data)))
    last = all_batches[-2]
    if damage == "garbage":
        data += os.urandom(300)
    elif damage == "flipped-bit":
        data[last.position + 40] ^= 0x04
    else:
        data[last.position : last.position + 30] = bytes(30)
    seg.write_bytes(bytes(data))
    log = FileLog(path)
    expected = all_batches[-1].next_offset if damage == "garbage" else last.base_offset
    assert log.end_offset == expected >= durable
    assert len(values(log)) == expected


def test_a_flipped_bit_in_flushed_data_refuses_to_open(path):
    log = FileLog(path)
    fill(log, batches=6)
    log.close()
    victim = flip(path, 2, 70, 0x80)
    with pytest.raises(CorruptLogError) as err:
        FileLog(path)
    assert err.value.path == path / "00000000000000000000.log" and err.value.position == victim.position
    assert "CRC mismatch" in str(err.value) and "fsynced" in str(err.value)


def test_a_flipped_leader_epoch_in_flushed_data_is_caught_by_the_epoch_checkpoint(path):
    """The one header field Kafka leaves outside the CRC besides the base offset."""
    log = FileLog(path)
    fill(log, batches=6, epochs=(1, 2))
    log.close()
    victim = flip(path, 1, 15, 0x08)  # epoch 1 -> 9
    with pytest.raises(CorruptLogError, match="leader epoch 9") as err:
        FileLog(path)
    assert err.value.position == victim.position


def test_a_flipped_base_offset_in_flushed_data_is_caught_by_contiguity(path):
    log = FileLog(path)
    fill(log, batches=6)
    log.close()
    flip(path, 4, 7, 0x01)
    with pytest.raises(CorruptLogError, match="expected 12"):
        FileLog(path)


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated"])
def test_a_missing_or_bad_index_is_rebuilt(path, damage):
    log = FileLog(path, index_interval_bytes=150)
    fill(log, batches=20)
    log.close()
    index = path / "00000000000000000000.index"
    good = index.read_bytes()
    if damage == "missing":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(os.urandom(len(good)))
    else:
        index.write_bytes(good[:-5])
    log = FileLog(path, index_interval_bytes=150)
    assert index.read_bytes() == good
    assert log.read(31, 1).first_offset == 30  # lookups through the rebuilt index work
    assert len(values(log)) == 60


def test_epoch_checkpoint_missing_corrupt_or_ahead_of_the_log_is_reconciled(path):
    log = FileLog(path)
    fill(log, batches=6, epochs=(1, 2))
    log.close()
    ckpt = path / "leader-epoch-checkpoint"
    good = ckpt.read_text()
    for bad in [None, "garbage\n", good.replace("0\n2\n", "0\n3\n") + "7 18\n", b"0\n1\n\xff\xfe 0\n"]:
        if bad is None:
            ckpt.unlink()
        elif isinstance(bad, bytes):
            ckpt.write_bytes(bad)  # not even text
        else:
            ckpt.write_text(bad)
        log = FileLog(path)
        assert log.epoch_entries() == [(1, 0), (2, 9)]
        assert ckpt.read_text() == good
        log.close()


def test_a_crash_inside_truncate_fully_leaves_a_log_that_opens_at_the_new_start(path):
    log = FileLog(path)
    fill(log, batches=4)
    log.close()
    # A snapshot at 100 is installed: truncate_fully_and_start_at writes the start offset
    # first; crash right after it.
    (path / snapshot_file_name(SnapshotId(100, 3))).write_bytes(b"")
    write_offset_checkpoint(path.parent / "log-start-offset-checkpoint", "__cluster_metadata", 0, 100)
    log = FileLog(path)
    assert (log.start_offset, log.end_offset, log.latest_epoch) == (100, 100, None)
    assert [p.name for p in path.glob("*.log")] == ["00000000000000000100.log"]


def test_a_start_offset_that_names_no_snapshot_deletes_nothing(path, caplog):
    """KIP-630 moves the start only to a snapshot's end: a checkpoint saying otherwise is
    damaged (a flipped digit once made a node delete a segment no snapshot covered)."""
    log = FileLog(path, segment_bytes=500)
    fill(log, batches=12)
    second = log.segments[1].base_offset
    log.close()
    segments = sorted(p.name for p in path.glob("*.log"))
    for claimed in (second, 100):  # inside the log, and past its end
        write_offset_checkpoint(path.parent / "log-start-offset-checkpoint", "__cluster_metadata", 0, claimed)
        with caplog.at_level(logging.WARNING):
            log = FileLog(path)
        assert (log.start_offset, log.end_offset) == (0, 36)
        assert sorted(p.name for p in path.glob("*.log")) == segments
        assert f"says the log starts at {claimed}, but no snapshot ends there" in caplog.text
        log.close()
    # With a snapshot there, the same checkpoint is believed and the segment below goes.
    (path / snapshot_file_name(SnapshotId(second, 1))).write_bytes(b"")
    write_offset_checkpoint(path.parent / "log-start-offset-checkpoint", "__cluster_metadata", 0, second)
    log = FileLog(path)
    assert log.start_offset == log.segments[0].base_offset == second
    log.close()


def test_an_append_made_while_a_flush_fsyncs_is_fsynced_by_the_next_flush(path, monkeypatch):
    """Group commit: the server appends on its loop while a worker thread fsyncs."""
    log = FileLog(path)
    log.append_as_leader(batch(3), epoch=1)
    real_fsync, calls = os.fsync, []

    def fsync_with_an_append_during_it(fd):
        calls.append(fd)
        if len(calls) == 1:
            log.append_as_leader(batch(3), epoch=1)  # lands while the first fsync runs
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_with_an_append_during_it)
    assert log.flush() == 3
    fsyncs_of_first_flush = len(calls)
    assert log.flush() == 6
    assert len(calls) > fsyncs_of_first_flush, "the second append was reported flushed without an fsync"


def test_the_recovery_point_is_durable_when_flush_returns(path):
    log = FileLog(path)
    fill(log, batches=3)
    flushed = log.flush()
    rp = path.parent / "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint(rp, "__cluster_metadata", 0) == flushed  # not later, on a timer
    log.truncate_to(3)
    assert read_offset_checkpoint(rp, "__cluster_metadata", 0) == 3  # lowered with the data it covered
    log.close()


def test_a_flipped_bit_in_the_last_flushed_batch_refuses_to_open(path):
    log = FileLog(path)
    fill(log, batches=6)
    log.flush()
    del log  # a crash right after the flush: no close
    flip(path, -1, 70, 0x01)
    with pytest.raises(CorruptLogError, match="recovery point"):
        FileLog(path)


def test_with_a_lazy_recovery_point_damage_flushed_since_it_was_written_is_cut(path, caplog):
    """Kafka's trade (log.flush.offset.checkpoint.interval.ms): one device flush fewer per flush."""
    log = FileLog(path, recovery_point_interval_ms=60_000)
    fill(log, batches=3)
    log.close()  # the recovery point is written on close
    log = FileLog(path, recovery_point_interval_ms=60_000)
    fill(log, batches=3, epochs=(2,))
    assert log.flush() == 18
    del log
    flip(path, -1, 70, 0x01)
    with caplog.at_level(logging.WARNING, "kraft.storage"):
        log = FileLog(path)
    assert log.end_offset == 15 and "cut the log" in caplog.text


@pytest.mark.parametrize("loss", ["last segment deleted", "last segment cut at a batch boundary", "first segment deleted"])
def test_fsynced_segments_that_are_missing_or_cut_short_refuse_to_open(path, loss):
    log = FileLog(path, segment_bytes=400)
    fill(log, batches=10)
    log.flush()
    del log
    segments = sorted(path.glob("*.log"))
    assert len(segments) >= 3
    if loss == "last segment deleted":
        segments[-1].unlink()
    elif loss == "first segment deleted":
        segments[0].unlink()
    else:
        data = segments[-1].read_bytes()
        first = next(iter(iter_batches(data)))
        segments[-1].write_bytes(data[: first.size])
    with pytest.raises(CorruptLogError):
        FileLog(path)


def test_a_missing_middle_segment_is_refused_when_flushed(path):
    log = FileLog(path, segment_bytes=400)
    fill(log, batches=10)
    log.close()
    middle = sorted(path.glob("*.log"))[1]
    middle.unlink()
    with pytest.raises(CorruptLogError, match="expected"):
        FileLog(path)


def test_segments_roll_by_size_and_by_time(path):
    now = [0]
    log = FileLog(path, segment_bytes=10_000, segment_ms=1000, clock=lambda: now[0])
    log.append_as_leader(batch(2), epoch=1)
    now[0] = 999
    log.append_as_leader(batch(2), epoch=1)
    assert len(log.segments) == 1
    now[0] = 1000
    log.append_as_leader(batch(2), epoch=1)
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.append_as_leader(batch(200, value=b"x" * 40), epoch=1)
    log.append_as_leader(batch(200, value=b"x" * 40), epoch=1)
    assert [s.base_offset for s in log.segments] == [0, 4, 6, 206]


def test_reads_are_file_regions_that_sendfile_sends(path):
    log = FileLog(path)
    fill(log, batches=5)
    info = log.read(3, 1 << 20)
    a, b = socket.socketpair()
    with a, b:
        info.data.sendfile(a)
        a.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := b.recv(65536):
            received += chunk
    assert received == info.tobytes() and len(received) == info.size


def test_segments_wholly_below_the_start_offset_are_deleted(path):
    log = FileLog(path, segment_bytes=400)
    fill(log, batches=10)
    bases = [s.base_offset for s in log.segments]
    log.advance_start_offset(bases[2])
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert sorted(int(p.name[:20]) for p in path.glob("*.log")) == bases[2:]
    assert sorted(int(p.name[:20]) for p in path.glob("*.index")) == bases[2:]
    log.close()
    log = FileLog(path, segment_bytes=400)
    assert log.start_offset == bases[2]


def test_quorum_state_is_kafkas_json_and_survives(tmp_path):
    store = FileQuorumStateStore(tmp_path)
    assert store.read() is None
    store.write(ElectionState(epoch=5, leader_id=None, voted_id=2, voters=(1, 2, 3)))
    first, checksum = (tmp_path / "quorum-state").read_text().splitlines()
    assert json.loads(checksum) == {"crc32c": crc32c.crc32c(first.encode())}  # Kafka reads only the first line
    data = json.loads(first)
    assert data == {"clusterId": "", "leaderId": -1, "leaderEpoch": 5, "votedId": 2, "appliedOffset": 0,
                    "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}
    assert FileQuorumStateStore(tmp_path).read() == ElectionState(5, None, 2, (1, 2, 3))
    store.write(ElectionState(epoch=6, leader_id=3))
    assert store.read() == ElectionState(6, 3, None, ())
    for bad in (b'{"leaderEpoch": "x"', b"\xff\xfe{}"):
        (tmp_path / "quorum-state").write_bytes(bad)
        with pytest.raises(CorruptCheckpointError, match="quorum-state"):
            store.read()


@pytest.mark.parametrize("content", [b"0\n1\n__cluster_metadata x 5\n", b"0\n1\n\xff 0 5\n", b"0\n1\n__cluster_metadata 0 five\n"])
def test_a_log_dir_checkpoint_that_does_not_parse_is_named_and_not_believed(path, content, caplog):
    log = FileLog(path)
    fill(log, batches=4)
    log.close()
    (path.parent / "log-start-offset-checkpoint").write_bytes(content)
    with caplog.at_level(logging.WARNING):
        log = FileLog(path)
    assert "log-start-offset-checkpoint" in caplog.text and "not believed" in caplog.text
    assert (log.start_offset, log.end_offset) == (0, 12)


def test_a_directory_not_named_topic_partition_is_refused(tmp_path):
    with pytest.raises(ValueError, match="<topic>-<partition>"):
        FileLog(tmp_path / "metadata")


def test_a_second_partition_in_the_log_dir_keeps_its_own_offset_checkpoints(path):
    """The log dir's checkpoints hold one partition each: a __consumer_offsets partition
    beside the metadata one keeps its own in its directory, and neither overwrites the
    other's recovery point (which would make a fsynced log look torn, or a torn one fsynced)."""
    metadata = FileLog(path)
    offsets_dir = path.parent / "__consumer_offsets-1"
    offsets = FileLog(offsets_dir, checkpoint_dir=offsets_dir)
    fill(metadata, batches=3)
    fill(offsets, batches=1)
    assert (metadata.flush(), offsets.flush()) == (9, 3)
    rp = "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint(path.parent / rp, "__cluster_metadata", 0) == 9
    assert read_offset_checkpoint(offsets_dir / rp, "__consumer_offsets", 1) == 3
    assert read_offset_checkpoint(path.parent / rp, "__consumer_offsets", 1) is None
    metadata.close()
    offsets.close()
    assert (FileLog(path).end_offset, FileLog(offsets_dir, checkpoint_dir=offsets_dir).end_offset) == (9, 3)
