"""RecordBatch v2: layout, attributes, timestamps, compression and error reporting."""

import copy
import gc
import pickle
import struct
import weakref

import pytest
from crc32c import crc32c

from kraft.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    IncompleteBatchError,
    Record,
    RecordBatch,
    SimpleRecord,
    TimestampType,
    UnsupportedCompressionError,
    assign_offsets,
    build_batch,
    crc_is_valid,
    iter_batches,
    parse_header,
    read_batches,
)
from kraft.records.batch import CRC_START
from tests.records.crafted import BASE_TIMESTAMP_AT, LAST_OFFSET_DELTA_AT, restamp_crc, with_offset_deltas


def one(buf: bytes):
    (batch,) = list(read_batches(buf))
    return batch


def test_header_fields_land_where_kafka_puts_them():
    buf = build_batch(
        [SimpleRecord(b"k", b"v", (), 1_000), SimpleRecord(None, b"w", (), 1_005)],
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=99,
        producer_epoch=3,
        base_sequence=11,
        transactional=True,
    )
    base_offset, length, epoch, magic, crc = struct.unpack_from(">qiibI", buf)
    assert (base_offset, epoch, magic) == (42, 7, 2)
    assert length == len(buf) - 12
    assert crc == crc32c(buf[CRC_START:])
    h = one(buf).header
    assert (h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (1, 1_000, 1_005)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (99, 3, 11, 2)
    assert h.is_transactional and not h.is_control
    assert (h.last_offset, h.next_offset, h.size) == (43, 44, len(buf))


def test_records_round_trip_with_keys_values_headers_and_nulls():
    records = [
        SimpleRecord(b"key", b"value", [("a", b"1"), ("b", None)], 5),
        SimpleRecord(None, None, (), 6),
        SimpleRecord(b"", b"", [("", b"")], 4),
    ]
    decoded = one(build_batch(records, base_offset=100)).records()
    assert [r.offset for r in decoded] == [100, 101, 102]
    assert [(r.key, r.value, r.timestamp) for r in decoded] == [
        (b"key", b"value", 5),
        (None, None, 6),
        (b"", b"", 4),
    ]
    assert decoded[0].headers == (("a", b"1"), ("b", None))
    assert decoded[2].headers == (("", b""),)


def test_records_without_timestamp_take_the_batch_default():
    decoded = one(build_batch([(b"k", b"v"), SimpleRecord(None, b"x", (), 77)], timestamp=50)).records()
    assert [r.timestamp for r in decoded] == [50, 77]


def test_log_append_time_stamps_every_record_with_the_max_timestamp():
    buf = build_batch(
        [SimpleRecord(None, b"a", (), 1), SimpleRecord(None, b"b", (), 2)],
        timestamp=900,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    batch = one(buf)
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [900, 900]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_every_codec_round_trips(codec):
    records = [SimpleRecord(str(i).encode(), b"payload-%d" % i * 20, [("h", b"%d" % i)], i) for i in range(200)]
    buf = build_batch(records, compression=codec)
    batch = one(buf)
    assert batch.header.compression == codec
    assert [(r.key, r.value, r.headers, r.timestamp) for r in batch.records()] == [
        (r.key, r.value, tuple(r.headers), r.timestamp) for r in records
    ]
    if codec != Compression.NONE:
        assert len(buf) < len(build_batch(records))


def test_snappy_is_refused_clearly_in_both_directions():
    with pytest.raises(UnsupportedCompressionError, match="SNAPPY"):
        build_batch([(None, b"x")], compression=Compression.SNAPPY)
    buf = bytearray(build_batch([(None, b"x")]))
    struct.pack_into(">h", buf, CRC_START, Compression.SNAPPY)
    struct.pack_into(">I", buf, 17, crc32c(buf[CRC_START:]))
    with pytest.raises(UnsupportedCompressionError, match="snappy"):
        one(bytes(buf)).records()


def test_empty_batch_is_refused():
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


def test_bad_record_types_are_type_errors_naming_the_record():
    with pytest.raises(TypeError, match="record 1"):
        build_batch([(None, b"ok"), (None, 12)])
    with pytest.raises(TypeError, match="record 0 must be a tuple"):
        build_batch([b"not a tuple"])
    with pytest.raises(TypeError, match="header 0 key must be str"):
        build_batch([(None, b"v", [(5, b"x")])])


def test_bytes_like_keys_and_values_are_accepted():
    decoded = one(build_batch([(bytearray(b"k"), memoryview(b"v"), [("h", bytearray(b"x"))])])).records()
    assert (decoded[0].key, decoded[0].value, decoded[0].headers) == (b"k", b"v", (("h", b"x"),))


def test_walker_gives_absolute_positions_and_checks_contiguity():
    a = build_batch([(None, b"a")] * 3, base_offset=0)
    b = build_batch([(None, b"b")] * 2, base_offset=3)
    headers = list(iter_batches(a + b, position=1000, expected_offset=0))
    assert [(h.position, h.base_offset, h.last_offset) for h in headers] == [(1000, 0, 2), (1000 + len(a), 3, 4)]
    with pytest.raises(CorruptRecordError, match="base offset 3, expected 0") as err:
        list(iter_batches(b + a, position=10, expected_offset=0))
    assert err.value.position == 10


def test_torn_tail_is_incomplete_or_stops_on_request():
    a = build_batch([(None, b"a")] * 3)
    b = build_batch([(None, b"b")] * 3, base_offset=3)
    torn = a + b[:-5]
    with pytest.raises(IncompleteBatchError) as err:
        list(iter_batches(torn))
    assert err.value.position == len(a)
    assert [h.base_offset for h in iter_batches(torn, partial_tail="stop")] == [0]
    with pytest.raises(IncompleteBatchError, match="fewer than a batch header"):
        list(iter_batches(a + b[:HEADER_SIZE - 1]))


def test_crc_mismatch_names_the_batch_position():
    a = build_batch([(None, b"a")])
    b = bytearray(build_batch([(None, b"b")], base_offset=1))
    b[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match=f"position {len(a)}: CRC mismatch"):
        list(iter_batches(a + bytes(b)))


def test_decoder_reports_the_record_position_when_the_crc_is_right_but_content_is_not():
    buf = bytearray(build_batch([(None, b"a"), (None, b"b")]))
    buf[HEADER_SIZE] = 0x7E  # first record's length varint now claims 63 bytes
    struct.pack_into(">I", buf, 17, crc32c(buf[CRC_START:]))
    with pytest.raises(CorruptRecordError, match="record length out of range") as err:
        one(bytes(buf)).records()
    assert err.value.position == HEADER_SIZE


def test_record_count_larger_than_the_batch_is_corrupt_not_a_huge_allocation():
    buf = bytearray(build_batch([(None, b"a")]))
    struct.pack_into(">i", buf, 57, 2**31 - 1)
    struct.pack_into(">I", buf, 17, crc32c(buf[CRC_START:]))
    with pytest.raises(CorruptRecordError, match="record count"):
        one(bytes(buf)).records()


def test_a_leader_stamps_offsets_and_its_epoch_in_place_without_breaking_the_crc():
    stream = bytearray(build_batch([(None, b"a")] * 4) + build_batch([(None, b"b")] * 2, base_offset=77))
    headers = assign_offsets(stream, 500, 9)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in headers] == [(500, 503, 9), (504, 505, 9)]
    assert [(b.header.base_offset, b.header.partition_leader_epoch) for b in read_batches(bytes(stream))] == [
        (500, 9), (504, 9)
    ]
    assert [r.offset for b in read_batches(bytes(stream)) for r in b.records()] == [500, 501, 502, 503, 504, 505]


def test_a_leader_refuses_a_corrupt_batch_and_bytes_it_cannot_stamp():
    good = build_batch([(None, b"a")])
    bad = bytearray(build_batch([(None, b"b")]))
    bad[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match=f"position {len(good)}: CRC mismatch"):
        assign_offsets(good + bad, 0, 1)
    with pytest.raises(BufferError, match="not writable"):
        assign_offsets(bytes(good), 0, 1)


def test_the_walker_checks_contiguity_and_positions_past_many_batches():
    """More batches than one call into the C walker takes, with a bad one far in."""
    batches = [build_batch([(None, b"%d" % i)] * 2, base_offset=2 * i) for i in range(300)]
    stream = b"".join(batches)
    headers = list(iter_batches(stream, position=7, expected_offset=0))
    assert [h.base_offset for h in headers] == list(range(0, 600, 2))
    assert headers[250].position == 7 + sum(map(len, batches[:250]))
    broken = bytearray(stream)
    broken[sum(map(len, batches[:200])) + 16] = 3  # batch 200's magic byte
    seen = []
    with pytest.raises(CorruptRecordError, match="magic byte is 3") as err:
        seen.extend(iter_batches(broken, expected_offset=0))
    assert len(seen) == 200 and err.value.position == sum(map(len, batches[:200]))


def test_wrong_magic_is_reported():
    buf = bytearray(build_batch([(None, b"a")]))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic byte is 1"):
        list(iter_batches(bytes(buf)))


def test_offsets_past_the_int64_range_are_corrupt_not_an_overflow():
    top = build_batch([(None, b"a")] * 3, base_offset=2**63 - 2)  # its last offset would pass int64
    with pytest.raises(CorruptRecordError, match="passes the largest offset"):
        list(iter_batches(top, expected_offset=2**63 - 2))
    with pytest.raises(CorruptRecordError, match="passes the largest offset"):
        assign_offsets(bytearray(build_batch([(None, b"a")] * 3)), 2**63 - 2, 1)


def _decode_offsets(buf: bytes) -> list[int]:
    return [r.offset for batch in read_batches(buf) for r in batch.records()]


def test_records_claiming_offsets_past_the_batch_are_corrupt():
    """A batch spanning 100..101 whose second record claims offset 105."""
    buf = with_offset_deltas([0, 5], base_offset=100)
    record_size = (len(buf) - HEADER_SIZE) // 2
    with pytest.raises(CorruptRecordError, match=r"record 1: offset delta 5 is outside the batch's offsets 100\.\.101") as err:
        _decode_offsets(buf)
    assert err.value.position == HEADER_SIZE + record_size


@pytest.mark.parametrize("deltas", [[0, 0], [1, 0], [0, 2, 1]])
def test_records_whose_offsets_repeat_or_go_back_are_corrupt(deltas):
    buf = with_offset_deltas(deltas, base_offset=100, last_offset_delta=len(deltas))
    with pytest.raises(CorruptRecordError, match="does not follow the previous record's offset"):
        _decode_offsets(buf)


def test_gaps_between_offsets_are_read_as_kafkas_log_cleaner_leaves_them():
    """Compaction drops records and keeps the batch's last offset delta: 2 records over 5 offsets."""
    assert _decode_offsets(with_offset_deltas([1, 4], base_offset=100, last_offset_delta=4)) == [101, 104]


def test_more_records_than_the_batch_has_offsets_fail_at_the_first_one_past_them():
    buf = bytearray(build_batch([(None, b"a")] * 3, base_offset=100))
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, 1)
    buf = restamp_crc(buf)
    record_size = (len(buf) - HEADER_SIZE) // 3
    with pytest.raises(CorruptRecordError, match=r"record 2: offset delta 2 is outside the batch's offsets 100\.\.101") as err:
        _decode_offsets(buf)
    assert err.value.position == HEADER_SIZE + 2 * record_size


def _unwalked(buf: bytes) -> RecordBatch:
    """A batch taken on its header alone, as a reader holding a header from elsewhere does."""
    return RecordBatch(parse_header(memoryview(buf), 0, 500), buf)


def test_offsets_past_the_int64_range_are_corrupt_even_in_a_batch_the_walker_never_saw():
    past_int64 = build_batch([(None, b"a")] * 3, base_offset=2**63 - 2)
    with pytest.raises(CorruptRecordError, match="outside the offset range") as err:
        _unwalked(past_int64).records()
    assert err.value.position == 500


def test_a_timestamp_delta_past_the_int64_range_is_corrupt_not_a_wrapped_timestamp():
    buf = bytearray(build_batch([SimpleRecord(None, b"a", (), 0), SimpleRecord(None, b"b", (), 5)]))
    struct.pack_into(">q", buf, BASE_TIMESTAMP_AT, 2**63 - 1)
    with pytest.raises(CorruptRecordError, match="record 1: timestamp delta takes the timestamp past the int64 range"):
        _decode_offsets(restamp_crc(buf))


def test_a_short_buffer_is_an_incomplete_batch_for_the_public_header_and_crc_helpers():
    batch = build_batch([(None, b"a")] * 2)
    with pytest.raises(IncompleteBatchError, match="10 bytes left, fewer than a batch header") as err:
        parse_header(memoryview(batch[:10]), 0, 4096)
    assert err.value.position == 4096
    with pytest.raises(IncompleteBatchError, match="fewer than a batch header"):
        parse_header(memoryview(batch), len(batch) - 5, 0)
    with pytest.raises(IncompleteBatchError, match="fewer than a batch header"):
        crc_is_valid(batch[:HEADER_SIZE - 1])
    with pytest.raises(IncompleteBatchError, match=f"batch of {len(batch)} bytes but only {len(batch) - 1}") as err:
        crc_is_valid(batch[:-1], position=77)
    assert err.value.position == 77
    assert crc_is_valid(batch) and crc_is_valid(batch + b"next batch")  # judged on its own span
    flipped = bytearray(batch)
    flipped[-1] ^= 1
    assert not crc_is_valid(flipped)


def test_a_record_is_an_immutable_tuple_with_named_fields_that_pickles():
    (rec,) = one(build_batch([SimpleRecord(b"k", b"v", [("h", b"x")], 7)], base_offset=3)).records()
    assert isinstance(rec, Record) and isinstance(rec, tuple)
    assert rec == (3, 7, b"k", b"v", (("h", b"x"),))
    assert (rec.offset, rec.timestamp, rec.key, rec.value, rec.headers) == tuple(rec)
    assert repr(rec) == "Record(offset=3, timestamp=7, key=b'k', value=b'v', headers=(('h', b'x'),))"
    for copied in (pickle.loads(pickle.dumps(rec)), copy.deepcopy(rec)):
        assert type(copied) is Record and copied == rec and copied.value == b"v"
    with pytest.raises(AttributeError):
        rec.offset = 4
    assert Record((1, 2, None, None, ())).key is None
    with pytest.raises(TypeError, match="takes 5 items"):
        Record((1, 2))


def test_decoded_records_stay_out_of_the_cycle_collector_and_built_ones_do_not():
    """A decoded record holds only ints, bytes and tuples of str/bytes, so it cannot be in a
    cycle; one built from Python may hold anything, and a cycle through it must be found."""
    records = one(build_batch([SimpleRecord(b"k", b"v", [("h", b"x")], 7)] * 3)).records()
    assert not any(gc.is_tracked(r) for r in records)

    class Holder:
        record: Record

    holder = Holder()
    holder.record = Record((1, 2, None, holder, ()))  # a cycle through a record
    assert gc.is_tracked(holder.record)
    alive = weakref.ref(holder)
    del holder
    gc.collect()
    assert alive() is None
