"""Our batches against implementations nobody here wrote: kafka-python, aiokafka, kio.

Both directions: what we write they parse field for field, and what they write we parse.
"""

import io

import pytest
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
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
    assign_offsets,
    build_batch,
    build_control_batch,
    decode_control_record,
    read_batches,
)
from kraft.records.control import encode_control_value

CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]
RECORDS = [
    SimpleRecord(b"k0", b"v0", [("trace", b"abc"), ("empty", None)], 1_700_000_000_000),
    SimpleRecord(None, b"v1", (), 1_700_000_000_005),
    SimpleRecord(b"k2", None, [("x", b"")], 1_699_999_999_990),
    SimpleRecord(b"", b"\x00" * 300, (), 1_700_000_000_001),
]


def expected(base_offset):
    return [
        (base_offset + i, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
        for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_peers_parse_what_we_write(peer, codec):
    buf = build_batch(RECORDS, base_offset=1234, partition_leader_epoch=17, compression=codec)
    batch = KpBatch(buf) if peer == "kafka-python" else AioBatch(buf)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.is_control_batch) == (1234, False)
    if peer == "kafka-python":  # aiokafka's C batch does not expose the partition leader epoch
        assert batch.leader_epoch == 17
    assert batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == expected(1234)


@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
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


def kp_build(codec, records):
    builder = KpBuilder(
        magic=2, compression_type=codec, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


def aio_build(codec, records):
    builder = AioBuilder(
        magic=2, compression_type=codec, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("build", [kp_build, aio_build], ids=["kafka-python", "aiokafka"])
def test_we_parse_what_peers_write(build, codec):
    buf = bytearray(build(codec, RECORDS))
    assign_offsets(buf, 0, 5)
    (batch,) = list(read_batches(bytes(buf)))
    assert batch.header.compression == codec
    assert batch.header.partition_leader_epoch == 5
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]
    assert got == expected(0)


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
