"""Snapshot files on disk: names, Kafka's layout, cleanup on open, damage to frozen files."""

import logging
import os
import random
import socket

import pytest
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from kraft.records import Compression, iter_batches
from kraft.storage import (
    CorruptSnapshotError,
    FileLog,
    FileSnapshotStore,
    MemorySnapshotStore,
    SnapshotError,
    SnapshotId,
    parse_snapshot_file_name,
    snapshot_file_name,
    validate_snapshots_and_log,
)

from .conftest import batch
from .test_snapshot_contract import TIMESTAMP, batch_starts, some_records, whole, write


@pytest.fixture
def path(tmp_path):
    return tmp_path / "__cluster_metadata-0"


# ------------------------------------------------------------------------------ names


def test_file_names_are_kafkas():
    assert snapshot_file_name(SnapshotId(5120793, 2)) == "00000000000005120793-0000000002.checkpoint"
    assert snapshot_file_name(SnapshotId(0, 0), ".checkpoint.part") == (
        "00000000000000000000-0000000000.checkpoint.part"
    )
    largest = SnapshotId(2**63 - 1, 2**31 - 1)
    assert parse_snapshot_file_name(snapshot_file_name(largest)) == largest


@pytest.mark.parametrize(
    "name,expected",
    [
        ("00000000000005120793-0000000002.checkpoint", SnapshotId(5120793, 2)),
        ("00000000000005120793-000000000000000002.checkpoint", SnapshotId(5120793, 2)),  # the KIP's example
        ("5-2.checkpoint", SnapshotId(5, 2)),
    ],
)
def test_any_zero_padding_is_read(name, expected):
    assert parse_snapshot_file_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "snapshot.checkpoint",
        "00000000000000000010.checkpoint",
        "10-2-3.checkpoint",
        "-10-2.checkpoint",
        "10-2.checkpoint.part",
        "10-2.checkpointx",
        "10-2.snapshot",
        "leader-epoch-checkpoint",
        "\u0661\u0660-2.checkpoint",  # Arabic-Indic digits are digits to int(), not to Kafka
        "10-2147483648.checkpoint",  # epoch past int32
        "9223372036854775808-2.checkpoint",  # end offset past int64
    ],
)
def test_names_that_do_not_parse_are_clear_errors(name):
    with pytest.raises(SnapshotError, match="not a snapshot file name|not an offset|not an epoch") as e:
        parse_snapshot_file_name(name)
    assert repr(name) in str(e.value)


def test_snapshot_ids_are_checked_and_ordered_by_end_offset_then_epoch():
    with pytest.raises(ValueError, match="end offset"):
        SnapshotId(-1, 0)
    with pytest.raises(ValueError, match="epoch"):
        SnapshotId(0, -1)
    assert SnapshotId(10, 9) < SnapshotId(11, 0) < SnapshotId(11, 1)
    assert max(SnapshotId(11, 1), SnapshotId(10, 99)) == SnapshotId(11, 1)


# ------------------------------------------------------------------------------ layout and cleanup


def test_a_snapshot_is_a_part_until_frozen_then_renamed(path):
    store = FileSnapshotStore(path)
    writer = store.create_writer(SnapshotId(12345, 7), TIMESTAMP)
    writer.append(some_records(100))
    assert sorted(p.name for p in path.iterdir()) == ["00000000000000012345-0000000007.checkpoint.part"]
    writer.freeze()
    assert sorted(p.name for p in path.iterdir()) == ["00000000000000012345-0000000007.checkpoint"]
    assert FileSnapshotStore(path).list() == [SnapshotId(12345, 7)]
    store.delete(SnapshotId(12345, 7))
    assert list(path.iterdir()) == []


def test_snapshots_live_beside_the_segments(path):
    log = FileLog(path)
    log.append_as_leader(batch(5), epoch=1)
    log.flush()
    store = FileSnapshotStore(path)
    write(store, SnapshotId(5, 1), some_records(3))
    log.advance_start_offset(5)
    log.close()
    log, store = FileLog(path), FileSnapshotStore(path)
    assert validate_snapshots_and_log(store, log) == SnapshotId(5, 1)
    assert (log.start_offset, log.end_offset) == (5, 5)
    names = {p.name for p in path.iterdir()}
    assert "00000000000000000005-0000000001.checkpoint" in names and "leader-epoch-checkpoint" in names
    assert any(n.endswith(".log") for n in names)


def test_a_snapshot_named_with_other_padding_is_read_and_deleted_where_it_is(path):
    store = FileSnapshotStore(path)
    write(store, SnapshotId(10, 1), some_records(3))
    canonical = path / "00000000000000000010-0000000001.checkpoint"
    wide = path / "00000000000000000010-000000000000000001.checkpoint"  # the KIP's example padding
    canonical.rename(wide)
    store = FileSnapshotStore(path)
    assert store.list() == [SnapshotId(10, 1)]
    assert len(list(store.open_reader(SnapshotId(10, 1)).records())) == 3
    log = FileLog(path)
    assert validate_snapshots_and_log(store, log) == SnapshotId(10, 1)  # opens it to check it
    store.delete(SnapshotId(10, 1))
    assert not wide.exists() and store.list() == []


def test_two_files_with_the_same_snapshot_id_are_refused(path):
    store = FileSnapshotStore(path)
    write(store, SnapshotId(10, 1), some_records(3))
    canonical = path / "00000000000000000010-0000000001.checkpoint"
    (path / "10-1.checkpoint").write_bytes(canonical.read_bytes())
    with pytest.raises(SnapshotError, match="two files hold snapshot"):
        FileSnapshotStore(path)


def test_opening_removes_parts_and_deleted_files_and_ignores_names_that_do_not_parse(path, caplog):
    store = FileSnapshotStore(path)
    write(store, SnapshotId(10, 1), some_records(3))
    good = (path / "00000000000000000010-0000000001.checkpoint").read_bytes()
    (path / "00000000000000000020-0000000001.checkpoint.part").write_bytes(good[:50])
    (path / "00000000000000000005-0000000001.checkpoint.deleted").write_bytes(good)
    (path / "not-a-snapshot.checkpoint").write_bytes(good)
    with caplog.at_level(logging.INFO, "kraft.storage"):
        store = FileSnapshotStore(path)
    assert store.list() == [SnapshotId(10, 1)]
    assert sorted(p.name for p in path.iterdir()) == [
        "00000000000000000010-0000000001.checkpoint",
        "not-a-snapshot.checkpoint",  # not ours to delete
    ]
    assert "not-a-snapshot.checkpoint" in caplog.text and "is not a snapshot file name" in caplog.text
    assert "removed 00000000000000000020-0000000001.checkpoint.part" in caplog.text


def test_a_fetched_snapshot_is_a_part_until_frozen(path, tmp_path):
    leader = MemorySnapshotStore()
    reader = leader.open_reader(write(leader, SnapshotId(30, 2), some_records(30), records_per_batch=4))
    store = FileSnapshotStore(path)
    raw = store.create_raw_writer(SnapshotId(30, 2))
    raw.append(0, reader.read_chunk(0, 100))
    raw.append(100, reader.read_chunk(100, reader.size))
    assert [p.name for p in path.iterdir()] == ["00000000000000000030-0000000002.checkpoint.part"]
    raw.validate(reader.size)
    raw.freeze()
    assert [p.name for p in path.iterdir()] == ["00000000000000000030-0000000002.checkpoint"]
    assert (path / "00000000000000000030-0000000002.checkpoint").read_bytes() == whole(reader)


def test_file_and_memory_stores_write_the_same_bytes(path):
    records = some_records(300, seed=5)
    stores = FileSnapshotStore(path), MemorySnapshotStore()
    for store in stores:
        write(store, SnapshotId(300, 2), records, records_per_batch=64, compression=Compression.GZIP)
    file_bytes, memory_bytes = (whole(s.open_reader(SnapshotId(300, 2))) for s in stores)
    assert file_bytes == memory_bytes == (path / snapshot_file_name(SnapshotId(300, 2))).read_bytes()


def test_kafka_clients_read_every_batch_of_a_snapshot(path):
    store = FileSnapshotStore(path)
    write(store, SnapshotId(50, 4), some_records(50), records_per_batch=16, compression=Compression.ZSTD)
    data = (path / snapshot_file_name(SnapshotId(50, 4))).read_bytes()
    values = []
    for h in iter_batches(data):
        theirs = KafkaPythonBatch(data[h.position : h.position + h.size])
        assert theirs.validate_crc() and theirs.leader_epoch == 4 and theirs.base_offset == h.base_offset
        if not theirs.is_control_batch:
            values += [r.value for r in theirs]
    assert values == [r.value for r in store.open_reader(SnapshotId(50, 4)).records()]


def test_a_chunk_is_sent_with_sendfile(path):
    store = FileSnapshotStore(path)
    reader = store.open_reader(write(store, SnapshotId(400, 1), some_records(400)))
    chunk = reader.read_chunk(1000, 3000)
    a, b = socket.socketpair()
    with a, b:
        chunk.sendfile(a)
        received = b""
        while len(received) < 3000:
            received += b.recv(3000 - len(received))
    assert received == (path / snapshot_file_name(SnapshotId(400, 1))).read_bytes()[1000:4000]


# ------------------------------------------------------------------------------ damage to frozen files


def frozen(path, records: int = 200) -> tuple[FileSnapshotStore, SnapshotId, bytes]:
    store = FileSnapshotStore(path)
    sid = write(store, SnapshotId(records, 3), some_records(records), records_per_batch=25,
                compression=Compression.LZ4)
    return store, sid, (path / snapshot_file_name(sid)).read_bytes()


def sample_positions(good: bytes, rng: random.Random) -> list[int]:
    """Every byte of the header and footer batches and of one data batch's header; then
    random bytes across the records."""
    starts = batch_starts(good)
    positions = list(range(starts[1])) + list(range(starts[-1], len(good)))
    positions += list(range(starts[2], starts[2] + 61))
    positions += rng.sample(range(starts[1], starts[-1]), 150)
    return positions


def test_damage_to_a_frozen_file_is_caught_wherever_it_is(path):
    store, sid, good = frozen(path)
    file = path / snapshot_file_name(sid)
    starts = batch_starts(good)
    rng = random.Random(7)
    for position in sample_positions(good, rng):
        data = bytearray(good)
        data[position] ^= rng.randint(1, 255)
        file.write_bytes(data)
        with pytest.raises(CorruptSnapshotError) as e:
            store.open_reader(sid).validate()
        assert e.value.position == max(s for s in starts if s <= position), position
        assert e.value.name == str(file) and f"{file}: corrupt snapshot at position" in str(e.value)


def test_state_machine_reads_stop_at_damage(path):
    store, sid, good = frozen(path)
    file = path / snapshot_file_name(sid)
    starts = batch_starts(good)
    data = bytearray(good)
    data[starts[3] + 100] ^= 0x40
    file.write_bytes(data)
    reader = store.open_reader(sid)  # the header is fine
    got = []
    with pytest.raises(CorruptSnapshotError, match=f"position {starts[3]}: CRC mismatch"):
        for record in reader.records():
            got.append(record)
    assert len(got) == 50  # two good batches came first


@pytest.mark.parametrize("cut", ["last boundary", "mid batch", "mid header", "empty"])
def test_a_frozen_file_cut_short_is_refused(path, cut):
    store, sid, good = frozen(path)
    file = path / snapshot_file_name(sid)
    starts = batch_starts(good)
    size = {"last boundary": starts[-1], "mid batch": starts[4] + 70, "mid header": 30, "empty": 0}[cut]
    os.truncate(file, size)
    reason = {
        "last boundary": "the last batch .* is not a SnapshotFooter: the snapshot is incomplete",
        "mid batch": "bytes left",
        "mid header": "fewer than a batch header",
        "empty": "empty file",
    }[cut]
    with pytest.raises(CorruptSnapshotError, match=reason):
        reader = store.open_reader(sid)
        list(reader.records())
    with pytest.raises(CorruptSnapshotError, match=reason):
        store.open_reader(sid).validate()
