"""The SnapshotStore contract: every test runs against FileSnapshotStore and MemorySnapshotStore."""

import random

import pytest

from kraft.records import (
    Compression,
    SimpleRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    build_batch,
    build_control_batch,
    iter_batches,
)
from kraft.storage import (
    CorruptSnapshotError,
    FileRegion,
    FileSnapshotStore,
    MemorySnapshotStore,
    PositionOutOfRangeError,
    SnapshotError,
    SnapshotId,
    SnapshotNotFoundError,
    validate_snapshots_and_log,
)

from .conftest import LogFactory, batch


class StoreFactory:
    """Opens a store of one kind, and reopens it as a restart after a kill -9 would; `logs`
    opens the log of the same kind beside it."""

    def __init__(self, kind: str, tmp_path) -> None:
        self.kind = kind
        self.logs = LogFactory(kind, tmp_path)
        self.path = self.logs.path
        self.memory: MemorySnapshotStore | None = None

    def open(self):
        if self.kind == "file":
            return FileSnapshotStore(self.path)
        self.memory = self.memory or MemorySnapshotStore()
        return self.memory

    def damage_last_byte(self, store, snapshot_id) -> None:
        """Bit rot in a frozen snapshot: its footer's CRC no longer holds."""
        if self.kind == "file":
            path = store.path(snapshot_id)
            data = path.read_bytes()
            path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        else:
            data = store._data[snapshot_id]
            store._data[snapshot_id] = data[:-1] + bytes([data[-1] ^ 1])

    def reopen(self, store):
        if self.kind == "file":
            return FileSnapshotStore(self.path)
        store.simulate_crash()
        return store


@pytest.fixture(params=["file", "memory"])
def stores(request, tmp_path):
    return StoreFactory(request.param, tmp_path)


TIMESTAMP = 1_700_000_000_000


def some_records(n: int, seed: int = 0) -> list:
    """Every shape build_batch takes: 2-tuples, headers, own timestamps, null keys and values."""
    rng = random.Random(seed)
    shapes = [
        lambda i: (b"k%d" % i, b"v%d" % i),
        lambda i: SimpleRecord(None, rng.randbytes(rng.randint(0, 50))),
        lambda i: SimpleRecord(b"k%d" % i, None, [("h", b"x"), ("n", None)]),
        lambda i: (b"k%d" % i, b"t", (), TIMESTAMP - i),
    ]
    return [shapes[i % len(shapes)](i) for i in range(n)]


def write(store, snapshot_id, records, **kw):
    writer = store.create_writer(snapshot_id, TIMESTAMP, **kw)
    writer.append(records)
    return writer.freeze()


def whole(reader) -> bytes:
    chunk = reader.read_chunk(0, reader.size)
    return chunk.read() if isinstance(chunk, FileRegion) else bytes(chunk)


def batch_starts(data: bytes) -> list[int]:
    return [h.position for h in iter_batches(data)]


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("compression", [c for c in Compression if c != Compression.SNAPPY])
def test_round_trip_of_records_in_batches(stores, compression):
    store = stores.open()
    records = some_records(30)
    writer = store.create_writer(SnapshotId(100, 3), TIMESTAMP, records_per_batch=7, compression=compression)
    for chunk in (records[:5], records[5:20], records[20:21], [], records[21:]):  # batches span appends
        writer.append(chunk)
    assert store.list() == []  # nothing is listed before it is frozen
    assert writer.freeze() == SnapshotId(100, 3)
    assert store.list() == [SnapshotId(100, 3)]

    reader = store.open_reader(SnapshotId(100, 3))
    assert reader.header == SnapshotHeaderRecord(TIMESTAMP, version=0)
    assert reader.snapshot_id == SnapshotId(100, 3)
    data = whole(reader)
    assert len(data) == reader.size
    headers = list(iter_batches(data, expected_offset=0))
    assert [h.records_count for h in headers] == [1, 7, 7, 7, 7, 2, 1]
    assert headers[0].is_control and headers[-1].is_control and not any(h.is_control for h in headers[1:-1])
    assert {h.partition_leader_epoch for h in headers} == {3}
    assert {h.compression for h in headers[1:-1]} == {compression}

    got = list(reader.records())
    assert [r.offset for r in got] == list(range(1, 31))
    for want, r in zip(records, got):
        want = SimpleRecord(*want)
        assert (r.key, r.value, list(r.headers)) == (want.key, want.value, list(want.headers))
        assert r.timestamp == (want.timestamp if want.timestamp is not None else TIMESTAMP)
    assert sum(b.header.records_count for b in reader.batches()) == 30
    reader.validate()


def test_a_snapshot_without_records_is_a_header_and_a_footer(stores):
    store = stores.open()
    sid = store.create_writer(SnapshotId(0, 0), 7).freeze()
    reader = store.open_reader(sid)
    assert reader.header.last_contained_log_timestamp == 7
    assert list(reader.records()) == []
    assert [h.records_count for h in iter_batches(whole(reader))] == [1, 1]
    reader.validate()


def test_the_same_state_gives_the_same_bytes(stores):
    store = stores.open()
    records = some_records(50, seed=4)
    a = store.open_reader(write(store, SnapshotId(50, 1), records, records_per_batch=9))
    b = store.open_reader(write(store, SnapshotId(50, 2), records, records_per_batch=9))
    # Only the epoch differs (outside the CRC): restamp it and the bytes are identical.
    restamped = bytearray(whole(a))
    for position in batch_starts(bytes(restamped)):
        restamped[position + 12 : position + 16] = (2).to_bytes(4, "big")
    assert bytes(restamped) == whole(b)


# ------------------------------------------------------------------------------ listing and lifecycle


def test_listing_orders_by_end_offset_then_epoch(stores):
    store = stores.open()
    assert (store.list(), store.latest(), store.earliest()) == ([], None, None)
    ids = [SnapshotId(20, 3), SnapshotId(10, 5), SnapshotId(20, 1), SnapshotId(5, 9), SnapshotId(30, 0)]
    for sid in ids:
        write(store, sid, some_records(3))
    expected = [SnapshotId(5, 9), SnapshotId(10, 5), SnapshotId(20, 1), SnapshotId(20, 3), SnapshotId(30, 0)]
    assert store.list() == expected == sorted(ids)
    assert (store.earliest(), store.latest()) == (expected[0], expected[-1])
    store = stores.reopen(store)
    assert store.list() == expected


def test_writer_states_are_enforced(stores):
    store = stores.open()
    writer = store.create_writer(SnapshotId(10, 1), TIMESTAMP)
    writer.append(some_records(3))
    writer.freeze()
    for call in (lambda: writer.append(some_records(1)), writer.freeze):
        with pytest.raises(SnapshotError, match="frozen"):
            call()
    with pytest.raises(SnapshotError, match="already frozen"):
        writer.abort()

    aborted = store.create_writer(SnapshotId(20, 1), TIMESTAMP)
    aborted.append(some_records(3))
    aborted.abort()
    aborted.abort()  # a second abort does nothing
    with pytest.raises(SnapshotError, match="aborted"):
        aborted.freeze()
    assert store.list() == [SnapshotId(10, 1)]

    with pytest.raises(RuntimeError):
        with store.create_writer(SnapshotId(30, 1), TIMESTAMP) as writer:
            writer.append(some_records(3))
            raise RuntimeError("the state machine failed halfway")
    assert store.list() == [SnapshotId(10, 1)]
    with pytest.raises(ValueError, match="records_per_batch"):
        store.create_writer(SnapshotId(30, 1), TIMESTAMP, records_per_batch=0)
    # Every one of those left its id free again.
    assert write(store, SnapshotId(30, 1), some_records(2)) == SnapshotId(30, 1)
    assert write(store, SnapshotId(20, 1), some_records(2)) == SnapshotId(20, 1)


def test_bad_records_abort_the_writer_rather_than_leave_a_hole(stores):
    store = stores.open()
    writer = store.create_writer(SnapshotId(10, 1), TIMESTAMP, records_per_batch=2)
    writer.append(some_records(4))
    with pytest.raises(TypeError):
        writer.append([(b"k", b"v"), ("not bytes", 5)])
    with pytest.raises(SnapshotError, match="aborted"):
        writer.freeze()
    assert store.list() == []


def test_one_writer_per_id_and_none_for_an_existing_snapshot(stores):
    store = stores.open()
    write(store, SnapshotId(10, 1), some_records(3))
    with pytest.raises(SnapshotError, match="already exists"):
        store.create_writer(SnapshotId(10, 1), TIMESTAMP)
    with pytest.raises(SnapshotError, match="already exists"):
        store.create_raw_writer(SnapshotId(10, 1))
    writer = store.create_writer(SnapshotId(20, 1), TIMESTAMP)
    with pytest.raises(SnapshotError, match="already being written"):
        store.create_raw_writer(SnapshotId(20, 1))
    writer.freeze()
    assert store.list() == [SnapshotId(10, 1), SnapshotId(20, 1)]


def test_a_crash_loses_only_what_was_not_frozen(stores):
    store = stores.open()
    write(store, SnapshotId(10, 1), some_records(3))
    writer = store.create_writer(SnapshotId(20, 1), TIMESTAMP)
    writer.append(some_records(10))
    raw = store.create_raw_writer(SnapshotId(30, 1))
    raw.append(0, b"partial")
    store = stores.reopen(store)
    assert store.list() == [SnapshotId(10, 1)]
    store.open_reader(SnapshotId(10, 1)).validate()
    if stores.kind == "memory":  # a file store's old writers die with their process
        with pytest.raises(SnapshotError, match="lost in a crash"):
            writer.freeze()
        assert store.list() == [SnapshotId(10, 1)]
    assert write(store, SnapshotId(20, 1), some_records(1)) == SnapshotId(20, 1)
    assert store.create_raw_writer(SnapshotId(30, 1)).size == 0


def test_delete_and_delete_before(stores):
    store = stores.open()
    for end in (10, 20, 30, 40):
        write(store, SnapshotId(end, 1), some_records(2))
    store.delete(SnapshotId(20, 1))
    assert store.list() == [SnapshotId(10, 1), SnapshotId(30, 1), SnapshotId(40, 1)]
    for call in (store.delete, store.open_reader):
        with pytest.raises(SnapshotNotFoundError, match="no snapshot"):
            call(SnapshotId(20, 1))
    assert store.delete_before(30) == [SnapshotId(10, 1)]  # one ending at the offset stays
    assert store.list() == [SnapshotId(30, 1), SnapshotId(40, 1)]
    assert store.delete_before(0) == []
    store = stores.reopen(store)
    assert store.list() == [SnapshotId(30, 1), SnapshotId(40, 1)]
    assert write(store, SnapshotId(20, 1), some_records(1)) == SnapshotId(20, 1)  # deleted ids are free


def test_readers_outlive_deletion_and_newer_snapshots(stores):
    store = stores.open()
    records = some_records(40)
    write(store, SnapshotId(10, 1), records, records_per_batch=8)
    reader = store.open_reader(SnapshotId(10, 1))
    before = whole(reader)
    chunk = reader.read_chunk(100, 50)
    write(store, SnapshotId(20, 1), some_records(500, seed=9))
    store.delete(SnapshotId(10, 1))
    store.delete_before(100)
    assert store.list() == []
    assert whole(reader) == before
    assert (chunk.read() if isinstance(chunk, FileRegion) else bytes(chunk)) == before[100:150]
    assert [r.value for r in reader.records()] == [SimpleRecord(*r).value for r in records]
    reader.validate()


# ------------------------------------------------------------------------------ chunks and fetching


def test_read_chunk_shares_bytes_and_checks_the_position(stores):
    store = stores.open()
    reader = store.open_reader(write(store, SnapshotId(10, 1), some_records(60), records_per_batch=6))
    chunk = reader.read_chunk(0, 10)
    assert isinstance(chunk, FileRegion if stores.kind == "file" else memoryview)
    data = whole(reader)
    rng = random.Random(1)
    position, pieces = 0, []
    while position < reader.size:
        piece = reader.read_chunk(position, rng.randint(1, 300))
        pieces.append(piece.read() if isinstance(piece, FileRegion) else bytes(piece))
        position += len(piece)
    assert b"".join(pieces) == data
    assert len(reader.read_chunk(reader.size, 100)) == 0
    assert len(reader.read_chunk(reader.size - 3, 100)) == 3
    with pytest.raises(PositionOutOfRangeError, match=f"position {reader.size + 1}"):
        reader.read_chunk(reader.size + 1, 100)
    with pytest.raises(PositionOutOfRangeError):
        reader.read_chunk(-1, 100)
    with pytest.raises(ValueError):
        reader.read_chunk(0, -1)


def fetch(source_reader, target_store, chunk_size: int):
    """What a follower does with FetchSnapshot: chunks appended at their positions, validated, frozen."""
    raw = target_store.create_raw_writer(source_reader.snapshot_id)
    while raw.size < source_reader.size:
        chunk = source_reader.read_chunk(raw.size, chunk_size)
        raw.append(raw.size, chunk.read() if isinstance(chunk, FileRegion) else chunk)
    assert raw.validate(source_reader.size) == source_reader.header
    return raw.freeze()


def test_a_fetched_snapshot_round_trips(stores, tmp_path):
    leader = stores.open()
    records = some_records(200, seed=3)
    reader = leader.open_reader(write(leader, SnapshotId(500, 4), records, records_per_batch=16,
                                      compression=Compression.ZSTD))
    follower_factory = StoreFactory(stores.kind, tmp_path / "follower")
    follower = follower_factory.open()
    assert fetch(reader, follower, 333) == SnapshotId(500, 4)
    assert follower.list() == [SnapshotId(500, 4)]
    fetched = follower.open_reader(SnapshotId(500, 4))
    assert whole(fetched) == whole(reader)
    assert [(r.offset, r.key, r.value) for r in fetched.records()] == [
        (r.offset, r.key, r.value) for r in reader.records()
    ]


def test_raw_chunks_must_follow_each_other_and_be_validated(stores):
    store = stores.open()
    good = whole(store.open_reader(write(store, SnapshotId(10, 1), some_records(20))))
    raw = store.create_raw_writer(SnapshotId(20, 1))
    with pytest.raises(SnapshotError, match="chunk at position 5, but 0 bytes were received"):
        raw.append(5, good[5:])
    raw.append(0, good[:100])
    with pytest.raises(SnapshotError, match="chunk at position 50, but 100 bytes"):
        raw.append(50, good[50:])
    with pytest.raises(SnapshotError, match="validate"):
        raw.freeze()
    with pytest.raises(CorruptSnapshotError, match=f"100 bytes received, but .* announced {len(good)}"):
        raw.validate(len(good))
    raw.append(100, memoryview(good)[100:])
    assert raw.size == len(good)
    with pytest.raises(CorruptSnapshotError, match="announced"):
        raw.validate(len(good) + 1)
    # The bytes are epoch 1's; this id says epoch 1 too, so they validate.
    raw.validate(len(good))
    raw.append(len(good), b"x")  # anything after validation needs validating again
    with pytest.raises(SnapshotError, match="validate"):
        raw.freeze()
    raw.abort()
    assert store.list() == [SnapshotId(10, 1)]


# ------------------------------------------------------------------------------ damage


def damaged_copies(good: bytes, seed: int):
    """Every byte of the snapshot damaged in turn (XOR with a random non-zero byte)."""
    rng = random.Random(seed)
    for position in range(len(good)):
        data = bytearray(good)
        data[position] ^= rng.randint(1, 255)
        yield position, bytes(data)


def small_snapshot(store) -> bytes:
    """A snapshot's bytes (header, 3 data batches, footer), deleted from the store so its id is free."""
    sid = write(store, SnapshotId(10, 3), some_records(9), records_per_batch=4, compression=Compression.LZ4)
    data = whole(store.open_reader(sid))
    store.delete(sid)
    return data


def test_any_single_damaged_byte_is_caught_at_its_batch(stores):
    store = stores.open()
    good = small_snapshot(store)
    starts = batch_starts(good)
    assert len(starts) == 5 and len(good) < 700  # header, 3 data batches, footer: all bytes are tried
    caught = 0
    for position, data in damaged_copies(good, seed=len(stores.kind)):
        raw = store.create_raw_writer(SnapshotId(10, 3))
        raw.append(0, data)
        with pytest.raises(CorruptSnapshotError) as e:
            raw.validate(len(data))
        raw.abort()
        damaged_batch = max(s for s in starts if s <= position)
        assert e.value.position == damaged_batch, (position, str(e.value))
        assert "00000000000000000010-0000000003.checkpoint" in str(e.value)
        caught += 1
    assert caught == len(good)


def test_a_snapshot_cut_short_is_refused(stores):
    store = stores.open()
    good = small_snapshot(store)
    starts = batch_starts(good)
    cuts = [(s, "not a SnapshotFooter") for s in starts[2:]]  # at a batch boundary: the footer is missing
    cuts += [(starts[1], "not a SnapshotFooter"), (0, "empty")]  # a header alone; nothing
    cuts += [(s + d, "bytes") for s in starts for d in (1, 30, 62)]  # inside a batch: torn
    for cut, reason in cuts:
        raw = store.create_raw_writer(SnapshotId(10, 3))
        raw.append(0, good[:cut])
        with pytest.raises(CorruptSnapshotError, match=reason):
            raw.validate(cut)
        raw.abort()


def control(message, offset: int, epoch: int = 3) -> bytes:
    return build_control_batch(message, base_offset=offset, partition_leader_epoch=epoch)


def data(offset: int, epoch: int = 3) -> bytes:
    return build_batch([(b"k", b"v")], base_offset=offset, partition_leader_epoch=epoch)


HEADER, FOOTER = SnapshotHeaderRecord(1), SnapshotFooterRecord()


@pytest.mark.parametrize(
    "parts,damaged_batch,reason",
    [
        ([data(0), control(HEADER, 1), control(FOOTER, 2)], 0, "first batch is a data batch, not a SnapshotHeader"),
        ([control(FOOTER, 0), data(1), control(FOOTER, 2)], 0, "SnapshotFooterRecord.*, not a SnapshotHeader"),
        ([control(HEADER, 0), data(1), control(HEADER, 2)], 2, "last batch .* is not a SnapshotFooter"),
        ([control(HEADER, 0), data(2), control(FOOTER, 3)], 1, "base offset 2, expected 1"),
        ([control(HEADER, 0), data(1, epoch=2), control(FOOTER, 2)], 1, "epoch 2, but the snapshot's epoch"),
        ([control(HEADER, 0, epoch=4), data(1), control(FOOTER, 2)], 0, "epoch 4, but the snapshot's epoch"),
    ],
)
def test_header_first_footer_last_offsets_from_zero_one_epoch(stores, parts, damaged_batch, reason):
    store = stores.open()
    raw = store.create_raw_writer(SnapshotId(2, 3))
    raw.append(0, b"".join(parts))
    with pytest.raises(CorruptSnapshotError, match=reason) as e:
        raw.validate(raw.size)
    assert e.value.position == sum(len(p) for p in parts[:damaged_batch])
    raw.abort()
    raw = store.create_raw_writer(SnapshotId(2, 3))
    raw.append(0, control(HEADER, 0) + data(1) + control(FOOTER, 2))
    assert raw.validate(raw.size) == HEADER
    assert raw.freeze() == SnapshotId(2, 3)


# ------------------------------------------------------------------------------ with the log


def test_validation_with_a_log_starting_at_zero(stores):
    store, log = stores.open(), stores.logs.open()
    assert validate_snapshots_and_log(store, log) is None  # a new replica: nothing to do
    log.append_as_leader(batch(5), epoch=1)
    write(store, SnapshotId(3, 1), some_records(2))
    assert validate_snapshots_and_log(store, log) == SnapshotId(3, 1)
    assert (log.start_offset, log.end_offset, store.list()) == (0, 5, [SnapshotId(3, 1)])


def test_validation_deletes_snapshots_below_the_log_start(stores):
    store, log = stores.open(), stores.logs.open()
    for _ in range(4):
        log.append_as_leader(batch(5), epoch=1)
    log.flush()
    for end in (5, 10, 15):
        write(store, SnapshotId(end, 1), some_records(2))
    log.advance_start_offset(10)
    assert validate_snapshots_and_log(stores.reopen(store), stores.logs.reopen(log)) == SnapshotId(15, 1)
    assert stores.open().list() == [SnapshotId(10, 1), SnapshotId(15, 1)]


def test_validation_refuses_a_log_whose_start_no_snapshot_covers(stores):
    store, log = stores.open(), stores.logs.open()
    for _ in range(4):
        log.append_as_leader(batch(5), epoch=1)
    log.advance_start_offset(10)
    write(store, SnapshotId(5, 1), some_records(2))
    with pytest.raises(SnapshotError) as e:
        validate_snapshots_and_log(store, log)
    assert store.location in str(e.value)
    assert "starts at offset 10" in str(e.value) and "(5, 1)" in str(e.value)
    assert store.list() == [SnapshotId(5, 1)], "a refusal changes nothing"
    store.delete(SnapshotId(5, 1))
    with pytest.raises(SnapshotError, match="snapshots: none"):
        validate_snapshots_and_log(store, log)


def test_validation_moves_a_log_behind_the_latest_snapshot_to_its_end(stores):
    store, log = stores.open(), stores.logs.open()
    log.append_as_leader(batch(5), epoch=1)
    log.flush()
    write(store, SnapshotId(3, 1), some_records(2))
    write(store, SnapshotId(40, 6), some_records(2))  # fetched from the leader, then a crash
    assert validate_snapshots_and_log(store, log) == SnapshotId(40, 6)
    assert (log.start_offset, log.end_offset, log.latest_epoch) == (40, 40, None)
    assert store.list() == [SnapshotId(40, 6)]  # the others end below the new log start
    log = stores.logs.reopen(log)
    assert (log.start_offset, log.end_offset) == (40, 40), "the move is durable"
    assert validate_snapshots_and_log(stores.reopen(store), log) == SnapshotId(40, 6)
    assert stores.open().list() == [SnapshotId(40, 6)]


def test_validation_refuses_to_empty_the_log_for_a_damaged_snapshot(stores):
    store, log = stores.open(), stores.logs.open()
    for _ in range(4):
        log.append_as_leader(batch(5), epoch=1)
    log.flush()
    write(store, SnapshotId(40, 6), some_records(2))
    stores.damage_last_byte(store, SnapshotId(40, 6))  # frozen sound, gone bad on disk since
    with pytest.raises(SnapshotError, match="refusing"):
        validate_snapshots_and_log(store, log)
    assert (log.start_offset, log.end_offset) == (0, 20), "the log keeps its records"
