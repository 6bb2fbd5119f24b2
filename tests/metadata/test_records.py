"""The metadata records on the wire: Kafka's framing and layouts, every version, bad bytes."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.metadata import MetadataRecordError, RecordEncodeError, decode_record, encode_record, uuid_str
from kraft.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from tests.metadata.wire import any_record

TOPIC_ID = bytes(range(16))


@given(any_record())
@settings(max_examples=400)
def test_every_record_round_trips_at_every_version(case):
    version, record = case
    value = encode_record(record, version)
    assert value[:3] == bytes([1, type(record).__schema__.api_key, version])
    assert decode_record(value) == record


def test_layouts_match_kafka_byte_for_byte():
    # kafka-dump-log --cluster-metadata-decoder shows this record as valueSize 20 (KAFKA-18979).
    assert len(encode_record(FeatureLevelRecord(name="kraft.version", feature_level=1))) == 20
    # frame 1, API key 7, version 0, int32 id, int64 epoch, no tagged fields
    assert encode_record(FenceBrokerRecord(id=5, epoch=9)) == bytes([1, 7, 0]) + struct.pack(">iq", 5, 9) + b"\x00"
    p = PartitionRecord(partition_id=2, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1,), leader=1, leader_epoch=4,
                        partition_epoch=6)
    assert encode_record(p) == (
        bytes([1, 3, 0]) + struct.pack(">i", 2) + TOPIC_ID
        + b"\x03" + struct.pack(">ii", 1, 2)  # replicas: compact array, length + 1
        + b"\x02" + struct.pack(">i", 1)  # isr
        + b"\x01\x01"  # removing and adding replicas, empty
        + struct.pack(">iii", 1, 4, 6)  # leader, leader epoch, partition epoch
        + b"\x00"  # LeaderRecoveryState (tag 0) is at its default: not written
    )
    change = PartitionChangeRecord(partition_id=2, topic_id=TOPIC_ID, isr=(3,), leader=3)
    assert encode_record(change) == (
        bytes([1, 5, 0]) + struct.pack(">i", 2) + TOPIC_ID
        + b"\x02"  # two tagged fields, in tag order
        + b"\x00\x05\x02" + struct.pack(">i", 3)  # tag 0 (Isr), 5 bytes
        + b"\x01\x04" + struct.pack(">i", 3)  # tag 1 (Leader), 4 bytes
    )
    assert encode_record(ConfigRecord(resource_type=2, resource_name="t", name="k", value=None)).endswith(b"\x00\x00")


def test_uuids_print_in_kafkas_form():
    assert uuid_str(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_str(bytes(15) + b"\x01") == "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's METADATA_TOPIC_ID


def test_unknown_tagged_fields_are_skipped():
    value = encode_record(FenceBrokerRecord(id=1, epoch=2))
    with_tags = value[:-1] + b"\x02" + b"\x07\x03abc" + b"\x63\x00"  # tags 7 and 99, unknown
    assert decode_record(with_tags) == FenceBrokerRecord(id=1, epoch=2)


def test_newer_version_fields_are_read_and_refused_on_an_older_write():
    broker = RegisterBrokerRecord(broker_id=1, incarnation_id=TOPIC_ID, broker_epoch=3, log_dirs=(TOPIC_ID,),
                                  end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),),
                                  features=(BrokerFeature(name="metadata.version", max_supported_version=9),))
    assert decode_record(encode_record(broker, 3)) == broker
    assert encode_record(broker) == encode_record(broker, 3), "the lowest version that holds it"
    with pytest.raises(RecordEncodeError, match=r"RegisterBrokerRecord\.log_dirs: version 0 cannot hold a non-default"):
        encode_record(broker, 0)


@pytest.mark.parametrize(
    "value, message",
    [
        (b"", "without a value"),
        (bytes([2, 7, 0]) + bytes(13), "frame version 2"),
        (bytes([1, 99, 0]), "unknown metadata record API key 99"),
        (bytes([1, 7, 1]) + bytes(13), "FenceBrokerRecord version 1 is not supported"),
        (bytes([1, 0x80, 0x01, 0]), "unknown metadata record API key 128"),  # a two-byte varint
        (b"\x01\x07", "value of 2 bytes ends early in its header"),
        (bytes([1, 7, 0]) + bytes(5), r"FenceBrokerRecord\.epoch: the value ends early: 8 bytes needed at byte 7"),
        (encode_record(FenceBrokerRecord(id=1, epoch=2)) + b"\x00", "1 trailing bytes"),
        (bytes([1, 2, 0, 3]) + b"\xff\xfe" + TOPIC_ID + b"\x00", r"TopicRecord\.name: .* does not decode as UTF-8"),
        (bytes([1, 4, 0, 2, 0]) + b"\x02k\x02v\x00",
         r"ConfigRecord\.resource_name: null string at byte 4 where the schema does not allow null"),
        (bytes([1, 4, 0, 2, 5]) + b"ab", r"ConfigRecord\.resource_name: string of 4 bytes at byte 5 runs past the end"),
        (bytes([1, 4, 0, 2]) + b"\x80", r"ConfigRecord\.resource_name: the value ends early: a varint at byte 4"),
        (bytes([1, 4, 0, 2]) + b"\xff" * 5 + b"\x01", r"ConfigRecord\.resource_name: varint longer than 5 bytes"),
        (bytes([1, 3, 0]) + bytes(4) + TOPIC_ID + b"\x00", r"PartitionRecord\.replicas: null array at byte 23"),
        (bytes([1, 3, 0]) + bytes(4) + TOPIC_ID + b"\xff\xff\x01" + bytes(40),
         r"PartitionRecord\.replicas: array of 32766 elements at byte 23 cannot fit in 40 bytes"),
        (bytes([1, 3, 0]) + bytes(4) + TOPIC_ID + b"\x0b" + bytes(12),  # ten int32s, in 12 bytes
         r"PartitionRecord\.replicas: array of 10 elements at byte 23 cannot fit in 12 bytes"),
        (bytes([1, 7, 0]) + bytes(12) + b"\x01\x00\x09x",
         "FenceBrokerRecord: tagged field 0 of 9 bytes at byte 18 runs past the end"),
        (bytes([1, 7, 0]) + bytes(12) + b"\x01\x00", "FenceBrokerRecord tagged fields: the value ends early"),
        (bytes([1, 5, 0]) + bytes(20) + b"\x01\x01\x05" + bytes(5),  # Leader (tag 1) is an int32, not 5 bytes
         r"PartitionChangeRecord\.leader: tagged field 1 at byte 26 declares 5 bytes but holds 4"),
        (encode_record(RegisterBrokerRecord(broker_id=1, end_points=(BrokerEndpoint(name="N", host="Q"),)))
         .replace(b"\x02Q", b"\x02\xff"), r"BrokerEndpoint\.host: string of 1 bytes at byte \d+ does not decode"),
    ],
)
def test_bad_values_are_refused_with_a_clear_error(value, message):
    with pytest.raises(MetadataRecordError, match=message):
        decode_record(value)


@given(any_record(), st.data())
@settings(max_examples=200)
def test_every_truncation_is_refused(case, data):
    version, record = case
    value = encode_record(record, version)
    cut = data.draw(st.integers(0, len(value) - 1))
    with pytest.raises(MetadataRecordError):
        decode_record(value[:cut])


@given(st.binary(max_size=200))
@settings(max_examples=500)
def test_arbitrary_bytes_never_crash_the_decoder(value):
    try:
        decode_record(value)
    except MetadataRecordError:
        pass


def test_values_their_field_cannot_hold_are_refused_on_write_naming_the_field():
    with pytest.raises(RecordEncodeError, match=r"FenceBrokerRecord\.id: not a valid int32"):
        encode_record(FenceBrokerRecord(id=2**31, epoch=0))
    with pytest.raises(RecordEncodeError, match=r"FeatureLevelRecord\.name: None for a non-nullable string"):
        encode_record(FeatureLevelRecord(name=None, feature_level=1))
    with pytest.raises(RecordEncodeError, match=r"FeatureLevelRecord\.name: string of 32768 bytes is longer than 32767"):
        encode_record(FeatureLevelRecord(name="x" * 32768, feature_level=1))
    with pytest.raises(RecordEncodeError, match=r"PartitionRecord\.replicas: not a valid \[\]int32"):
        encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2**31)))
    assert issubclass(RecordEncodeError, ValueError), "a bad value for a codec, as before"
