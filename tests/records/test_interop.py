"""Our batches against implementations nobody here wrote: kafka-python, aiokafka, kio.

Both directions: what we write they parse field for field, and what they write we parse.
"""

import io
import struct

import pytest
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage as KioLeaderChange
from kio.schema.leader_change_message.v0.data import Voter as KioVoter
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord as KioFooter
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord as KioHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

from kraft.records import (
    Compression,
    ControlType,
    LeaderChangeMessage,
    SimpleRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TimestampType,
    assign_offsets,
    build_batch,
    build_control_batch,
    decode_control_record,
    read_batches,
)
from kraft.records.batch import CRC_START, TIMESTAMP_TYPE_BIT
from kraft.records.control import encode_control_value

CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]
RECORDS = [
    SimpleRecord(b"k0", b"v0", [("trace", b"abc"), ("empty", None)], 1_700_000_000_000),
    SimpleRecord(None, b"v1", (), 1_700_000_000_005),
    SimpleRecord(b"k2", None, [("x", b"")], 1_699_999_999_990),
    SimpleRecord(b"", b"\x00" * 300, (), 1_700_000_000_001),
]


BUILDERS = {"kafka-python": KpBuilder, "aiokafka": AioBuilder}
BATCHES = {"kafka-python": KpBatch, "aiokafka": AioBatch}
# What each peer's builder writes as the partition leader epoch, a field it leaves to the broker.
PEER_EPOCH = {"kafka-python": 0, "aiokafka": -1}
PEERS = list(BUILDERS)
NO_PRODUCER = (-1, -1, -1)


def expected(base_offset):
    return [
        (base_offset + i, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
        for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", PEERS)
def test_peers_parse_what_we_write(peer, codec):
    buf = build_batch(RECORDS, base_offset=1234, partition_leader_epoch=17, compression=codec)
    batch = BATCHES[peer](buf)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.is_control_batch) == (1234, False)
    if peer == "kafka-python":  # aiokafka's C batch does not expose the partition leader epoch
        assert batch.leader_epoch == 17
    assert batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == expected(1234)


@pytest.mark.parametrize("peer", PEERS)
def test_peers_walk_a_stream_of_our_batches_and_see_control_batches(peer):
    stream = build_batch(RECORDS, base_offset=0, partition_leader_epoch=1)
    stream += build_control_batch(LeaderChangeMessage(2, (1, 2, 3), (2, 3)), base_offset=4, partition_leader_epoch=2)
    stream += build_batch(RECORDS[:1], base_offset=5, partition_leader_epoch=2)
    memory = KpMemoryRecords(stream) if peer == "kafka-python" else AioMemoryRecords(bytes(stream))  # its C reader takes bytes only
    seen = []
    while memory.has_next():
        b = memory.next_batch()
        records = list(b)
        epoch = b.leader_epoch if peer == "kafka-python" else None
        seen.append((b.base_offset, epoch, b.is_control_batch, len(records)))
        if b.is_control_batch:
            kind = records[0].type if peer == "kafka-python" else AioControlRecord.parse(records[0].key).type_
            assert kind == ControlType.LEADER_CHANGE
    epochs = [1, 2, 2] if peer == "kafka-python" else [None] * 3
    assert seen == [(0, epochs[0], False, 4), (4, epochs[1], True, 1), (5, epochs[2], False, 1)]


def peer_build(peer, codec, records, producer=NO_PRODUCER, transactional=False):
    """A batch as `peer`'s producer builds it: base offset 0, offsets 0..n-1."""
    producer_id, producer_epoch, base_sequence = producer
    builder = BUILDERS[peer](
        magic=2, compression_type=codec, is_transactional=int(transactional), producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 20,
    )
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


def decoded(batch):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", PEERS)
def test_we_parse_what_peers_write(peer, codec):
    """Read as the peer wrote it: nothing of ours (assign_offsets) touches the header first."""
    buf = peer_build(peer, codec, RECORDS)
    (batch,) = list(read_batches(buf, expected_offset=0))
    h = batch.header
    assert h.compression == codec
    assert h.partition_leader_epoch == PEER_EPOCH[peer]
    if peer == "kafka-python":
        assert KpBatch(buf).leader_epoch == h.partition_leader_epoch
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (0, len(RECORDS) - 1, len(RECORDS))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == NO_PRODUCER
    assert (h.timestamp_type, h.is_transactional, h.is_control) == (TimestampType.CREATE_TIME, False, False)
    assert decoded(batch) == expected(0)


@pytest.mark.parametrize("peer", PEERS)
def test_a_leader_stamps_a_peer_written_batch_and_the_peer_still_accepts_its_crc(peer):
    buf = bytearray(peer_build(peer, Compression.ZSTD, RECORDS))
    assign_offsets(buf, 1000, 5)
    (batch,) = list(read_batches(bytes(buf)))
    assert (batch.header.base_offset, batch.header.partition_leader_epoch) == (1000, 5)
    assert decoded(batch) == expected(1000)
    theirs = BATCHES[peer](bytes(buf))
    assert theirs.validate_crc() and theirs.base_offset == 1000


@pytest.mark.parametrize("peer", PEERS)
def test_transactional_batches_carry_their_producer_both_ways(peer):
    producer = (4242, 7, 100)
    ours = build_batch(RECORDS, transactional=True, producer_id=4242, producer_epoch=7, base_sequence=100,
                       compression=Compression.GZIP)
    theirs = BATCHES[peer](bytes(ours))
    assert theirs.validate_crc() and theirs.is_transactional and not theirs.is_control_batch
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == producer
    assert [(r.offset, r.key, r.value) for r in theirs] == [(o, k, v) for o, _, k, v, _ in expected(0)]

    (batch,) = list(read_batches(peer_build(peer, Compression.GZIP, RECORDS, producer, transactional=True)))
    h = batch.header
    assert h.is_transactional and not h.is_control
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == producer
    assert decoded(batch) == expected(0)


APPEND_TIME = 1_800_000_000_000


@pytest.mark.parametrize("peer", PEERS)
def test_peers_read_our_log_append_time_batches_with_the_append_time_on_every_record(peer):
    ours = build_batch(RECORDS, timestamp=APPEND_TIME, timestamp_type=TimestampType.LOG_APPEND_TIME)
    theirs = BATCHES[peer](bytes(ours))
    assert theirs.validate_crc() and theirs.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [(r.timestamp, r.timestamp_type) for r in theirs] == [(APPEND_TIME, 1)] * len(RECORDS)


@pytest.mark.parametrize("peer", PEERS)
def test_we_read_a_peer_batch_that_a_broker_set_to_log_append_time(peer):
    """Producers leave the timestamp type to the broker, which sets the bit and the max
    timestamp and recomputes the CRC; every record then reads as the append time."""
    buf = bytearray(peer_build(peer, Compression.LZ4, RECORDS))
    attributes = struct.unpack_from(">h", buf, CRC_START)[0] | TIMESTAMP_TYPE_BIT
    struct.pack_into(">h", buf, CRC_START, attributes)
    struct.pack_into(">q", buf, 35, APPEND_TIME)  # max_timestamp
    struct.pack_into(">I", buf, 17, crc32c(buf[CRC_START:]))
    (batch,) = list(read_batches(bytes(buf)))
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [APPEND_TIME] * len(RECORDS)
    assert [r.timestamp for r in BATCHES[peer](bytes(buf))] == [APPEND_TIME] * len(RECORDS)


CONTROL_CASES = [
    (
        LeaderChangeMessage(3, (1, 2, 3), (3, 1)),
        KioLeaderChange(
            version=i16(0),
            leader_id=i32(3),
            voters=tuple(KioVoter(voter_id=i32(v)) for v in (1, 2, 3)),
            granting_voters=tuple(KioVoter(voter_id=i32(v)) for v in (3, 1)),
        ),
    ),
    (SnapshotHeaderRecord(1_700_000_000_123), KioHeader(version=i16(0), last_contained_log_timestamp=i64(1_700_000_000_123))),
    (SnapshotFooterRecord(), KioFooter(version=i16(0))),
]


@pytest.mark.parametrize("ours,theirs", CONTROL_CASES, ids=lambda c: type(c).__name__)
def test_control_values_match_kios_generated_schemas(ours, theirs):
    out = io.BytesIO()
    entity_writer(type(theirs))(out, theirs)
    assert encode_control_value(ours) == out.getvalue()
    parsed, size = entity_reader(type(theirs))(encode_control_value(ours), 0)
    assert parsed == theirs and size == len(out.getvalue())
    (batch,) = list(read_batches(build_control_batch(ours)))
    assert batch.header.is_control
    assert decode_control_record(batch.records()[0]) == ours
