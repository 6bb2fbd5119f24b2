"""Property tests: any batch round-trips, and damage is always reported, never a crash.

About the two header fields outside the CRC: Kafka leaves base_offset and
partition_leader_epoch uncovered so a leader can stamp them without recomputing the
checksum. A flip in base_offset is caught by the walker's contiguity check (the log always
knows the offset it expects next); a flip in the epoch can only be caught against the
leader-epoch cache, which the storage layer does on recovery.
"""

import struct

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.records import (
    Compression,
    CorruptRecordError,
    SimpleRecord,
    TimestampType,
    UnsupportedCompressionError,
    build_batch,
    iter_batches,
    read_batches,
)
from kraft.records.batch import CRC_START
from tests.records.crafted import with_offset_deltas

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=4)
timestamps = st.none() | st.integers(min_value=0, max_value=2**45)
records = st.lists(st.builds(SimpleRecord, maybe_bytes, maybe_bytes, headers, timestamps), min_size=1, max_size=40)
codecs = st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD])
batch_args = st.fixed_dictionaries(
    {
        "base_offset": st.integers(min_value=0, max_value=2**62),
        "partition_leader_epoch": st.integers(min_value=-1, max_value=2**31 - 1),
        "compression": codecs,
        "timestamp": st.integers(min_value=0, max_value=2**45),
        "control": st.booleans(),
        "transactional": st.booleans(),
        "producer_id": st.integers(min_value=-1, max_value=2**63 - 1),
        "producer_epoch": st.integers(min_value=-1, max_value=2**15 - 1),
        "base_sequence": st.integers(min_value=-1, max_value=2**31 - 1),
    }
)


@given(records, batch_args)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_batch_round_trips(recs, args):
    buf = build_batch(recs, **args)
    (batch,) = list(read_batches(buf, expected_offset=args["base_offset"]))
    h = batch.header
    assert h.base_offset == args["base_offset"]
    assert h.partition_leader_epoch == args["partition_leader_epoch"]
    assert h.compression == args["compression"]
    assert (h.is_control, h.is_transactional) == (args["control"], args["transactional"])
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (
        args["producer_id"],
        args["producer_epoch"],
        args["base_sequence"],
    )
    assert h.timestamp_type == TimestampType.CREATE_TIME
    decoded = batch.records()
    assert [r.offset for r in decoded] == list(range(h.base_offset, h.next_offset))
    for got, want in zip(decoded, recs, strict=True):
        assert (got.key, got.value, got.headers) == (want.key, want.value, tuple(want.headers))
        assert got.timestamp == (args["timestamp"] if want.timestamp is None else want.timestamp)
    assert h.max_timestamp == max(r.timestamp for r in decoded)


def _stream(recs, args):
    """A batch between two neighbours, so flips in length also meet real following bytes."""
    before = build_batch([(None, b"before")], base_offset=0)
    middle = build_batch(recs, **{**args, "base_offset": 1})
    after = build_batch([(None, b"after")], base_offset=1 + len(recs))
    return before, middle, after


@given(records, batch_args, st.data())
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
def test_a_flipped_bit_anywhere_but_the_epoch_is_always_detected(recs, args, data):
    before, middle, after = _stream(recs, args)
    positions = [p for p in range(len(middle)) if not 12 <= p < 16]
    byte = data.draw(st.sampled_from(positions), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    damaged = bytearray(middle)
    damaged[byte] ^= 1 << bit
    stream = before + bytes(damaged) + after
    try:
        for batch in read_batches(stream, expected_offset=0):
            batch.records()
    except CorruptRecordError as e:
        assert e.position >= len(before), "damage is reported at or after the damaged batch"
        assert e.position <= len(before) + len(middle)
    else:
        raise AssertionError(f"flip of bit {bit} at byte {byte} went unnoticed")


@given(records, batch_args, st.data())
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
def test_garbage_under_a_valid_crc_is_a_corrupt_record_error_never_a_crash(recs, args, data):
    """A writer bug (right CRC, wrong content) must still surface as CorruptRecordError."""
    buf = bytearray(build_batch(recs, **args))
    start = data.draw(st.integers(CRC_START, len(buf) - 1), label="start")
    junk = data.draw(st.binary(min_size=1, max_size=8), label="junk")
    buf[start : start + len(junk)] = junk[: len(buf) - start]
    struct.pack_into(">I", buf, 17, crc32c(buf[CRC_START:]))
    try:
        for _ in iter_batches(bytes(buf)):
            pass
        for batch in read_batches(bytes(buf)):
            offsets = [r.offset for r in batch.records()]
            h = batch.header
            assert all(h.base_offset <= o <= h.last_offset for o in offsets), "offsets stay inside the batch"
            assert offsets == sorted(set(offsets)), "offsets rise strictly"
    except CorruptRecordError as e:
        assert 0 <= e.position < len(buf)
    except UnsupportedCompressionError:
        assert buf[22] & 0x07 == Compression.SNAPPY  # the junk set the codec bits to snappy


@given(st.lists(st.integers(0, 40), min_size=1, max_size=20), st.integers(0, 40))
@settings(max_examples=300)
def test_records_decode_only_when_their_offsets_rise_inside_the_batch(deltas, last_offset_delta):
    """Gaps are fine (compaction leaves them); repeats, reversals and overruns are corrupt."""
    buf = with_offset_deltas(deltas, base_offset=1000, last_offset_delta=last_offset_delta)
    valid = all(a < b for a, b in zip(deltas, deltas[1:])) and deltas[-1] <= last_offset_delta
    try:
        offsets = [r.offset for batch in read_batches(buf) for r in batch.records()]
    except CorruptRecordError:
        assert not valid
    else:
        assert valid and offsets == [1000 + d for d in deltas]
