"""`__consumer_offsets` records byte for byte, against bytes worked out by hand from Kafka's
schemas (group-coordinator/src/main/resources/common/message/*.json), and the partition of a
group against Java's String.hashCode."""

import pytest

from kraft.groups import GroupRecordError, partition_for
from kraft.groups.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from kraft.groups.partitioning import java_string_hash


def h(text: str) -> bytes:
    """Hex with spaces and | separators for reading; the separators carry nothing."""
    return bytes.fromhex(text.replace("|", " "))


# ---------------------------------------------------------------- keys

OFFSET_KEY = OffsetCommitKey("g1", "t", 3)
OFFSET_KEY_V1 = h("0001 | 0002 6731 | 0001 74 | 00000003")  # version 1 | group | topic | partition


def test_offset_commit_key_is_written_as_version_1():
    assert encode_key(OFFSET_KEY) == OFFSET_KEY_V1


def test_offset_commit_key_versions_0_and_1_read_alike():
    assert decode_key(OFFSET_KEY_V1) == OFFSET_KEY
    assert decode_key(h("0000") + OFFSET_KEY_V1[2:]) == OFFSET_KEY


def test_group_metadata_key_is_version_2():
    raw = h("0002 | 0003 677270")
    assert encode_key(GroupMetadataKey("grp")) == raw
    assert decode_key(raw) == GroupMetadataKey("grp")


def test_a_key_of_another_record_type_is_refused_by_name():
    # 3 is ConsumerGroupMetadataKey (KIP-848), which kraft's coordinator does not keep.
    with pytest.raises(GroupRecordError, match="record type 3"):
        decode_key(h("0003 | 0001 67"))


# ---------------------------------------------------------------- offset commit values

OFFSET = 0x2A
EPOCH = 7
COMMIT_TS = 1000
V3 = h("0003 | 000000000000002a | 00000007 | 0001 6d | 00000000000003e8")


def test_offset_commit_value_v3_carries_the_leader_epoch():
    value = OffsetCommitValue(OFFSET, EPOCH, "m", COMMIT_TS)
    assert encode_value(value) == V3  # v3 is what Kafka writes
    assert decode_value(OFFSET_KEY, V3) == value


@pytest.mark.parametrize("version, raw", [
    (0, h("0000 | 000000000000002a | 0001 6d | 00000000000003e8")),
    (2, h("0002 | 000000000000002a | 0001 6d | 00000000000003e8")),
])
def test_offset_commit_value_v0_and_v2_have_no_epoch(version, raw):
    value = OffsetCommitValue(OFFSET, -1, "m", COMMIT_TS)
    assert encode_value(value, version) == raw
    assert decode_value(OFFSET_KEY, raw) == value


def test_offset_commit_value_v1_is_written_for_an_expire_timestamp():
    value = OffsetCommitValue(OFFSET, -1, "m", COMMIT_TS, expire_timestamp=5000)
    raw = h("0001 | 000000000000002a | 0001 6d | 00000000000003e8 | 0000000000001388")
    assert encode_value(value) == raw
    assert decode_value(OFFSET_KEY, raw) == value


def test_offset_commit_value_v4_is_flexible():
    raw = h("0004 | 000000000000002a | 00000007 | 02 6d | 00000000000003e8 | 00")
    value = OffsetCommitValue(OFFSET, EPOCH, "m", COMMIT_TS)
    assert encode_value(value, 4) == raw
    assert decode_value(OFFSET_KEY, raw) == value


def test_a_v4_tagged_field_from_a_newer_writer_is_skipped():
    # One tagged field: tag 5, 3 bytes of data.
    raw = h("0004 | 000000000000002a | 00000007 | 02 6d | 00000000000003e8 | 01 05 03 aabbcc")
    assert decode_value(OFFSET_KEY, raw) == OffsetCommitValue(OFFSET, EPOCH, "m", COMMIT_TS)


def test_a_version_that_cannot_hold_a_field_is_refused():
    with pytest.raises(GroupRecordError, match="cannot hold a leader epoch"):
        encode_value(OffsetCommitValue(1, leader_epoch=3), 1)
    with pytest.raises(GroupRecordError, match="cannot hold an expire timestamp"):
        encode_value(OffsetCommitValue(1, leader_epoch=3, expire_timestamp=9), 3)
    with pytest.raises(GroupRecordError, match="cannot hold a leader epoch"):  # no version holds both
        encode_value(OffsetCommitValue(1, leader_epoch=3, expire_timestamp=9))
    with pytest.raises(GroupRecordError, match="version 5"):
        decode_value(OFFSET_KEY, h("0005") + V3[2:])


def test_a_short_or_long_value_is_refused_saying_where():
    with pytest.raises(GroupRecordError, match="ends early at byte 10"):  # in the leader epoch
        decode_value(OFFSET_KEY, V3[:13])
    with pytest.raises(GroupRecordError, match="1 bytes after its last field"):
        decode_value(OFFSET_KEY, V3 + b"\x00")


def test_a_field_that_does_not_fit_is_named():
    with pytest.raises(GroupRecordError, match="OffsetCommitKey.partition"):
        encode_key(OffsetCommitKey("g", "t", 2**31))
    with pytest.raises(GroupRecordError, match="OffsetCommitValue.metadata: 32768 bytes"):
        encode_value(OffsetCommitValue(1, metadata="x" * 32768))


# ---------------------------------------------------------------- group metadata values

MEMBER = MemberMetadata("m1", "c", "/h", session_timeout=10_000, subscription=b"\x01", assignment=b"\x02",
                        rebalance_timeout=300_000)
GROUP = GroupMetadataValue("consumer", 2, "range", "m1", (MEMBER,), current_state_timestamp=99)
GROUP_V3 = h(
    "0003 | 0008 636f6e73756d6572 | 00000002 | 0005 72616e6765 | 0002 6d31 | 0000000000000063 | 00000001"
    "| 0002 6d31 | ffff | 0001 63 | 0002 2f68 | 000493e0 | 00002710 | 00000001 01 | 00000001 02")


def test_group_metadata_value_v3():
    # protocolType | generation | protocol | leader | currentStateTimestamp | members: 1 |
    # memberId | groupInstanceId (null) | clientId | clientHost | rebalanceTimeout | sessionTimeout |
    # subscription | assignment
    assert encode_value(GROUP) == GROUP_V3
    assert decode_value(GroupMetadataKey("g"), GROUP_V3) == GROUP


def test_group_metadata_value_v0_lacks_timestamp_instance_id_and_rebalance_timeout():
    raw = h("0000 | 0008 636f6e73756d6572 | 00000002 | 0005 72616e6765 | 0002 6d31 | 00000001"
            "| 0002 6d31 | 0001 63 | 0002 2f68 | 00002710 | 00000001 01 | 00000001 02")
    old = GroupMetadataValue("consumer", 2, "range", "m1", (
        MemberMetadata("m1", "c", "/h", 10_000, b"\x01", b"\x02"),))
    assert encode_value(old, 0) == raw
    assert decode_value(GroupMetadataKey("g"), raw) == old


def test_group_metadata_value_v4_is_flexible_with_nulls_as_zero():
    empty = GroupMetadataValue("", 5, None, None, (), current_state_timestamp=99)
    raw = h("0004 | 01 | 00000005 | 00 | 00 | 0000000000000063 | 01 | 00")
    assert encode_value(empty, 4) == raw
    assert decode_value(GroupMetadataKey("g"), raw) == empty
    member_raw = h("0004 | 09 636f6e73756d6572 | 00000002 | 06 72616e6765 | 03 6d31 | 0000000000000063 | 02"
                   "| 03 6d31 | 00 | 02 63 | 03 2f68 | 000493e0 | 00002710 | 02 01 | 02 02 | 00 | 00")
    assert encode_value(GROUP, 4) == member_raw
    assert decode_value(GroupMetadataKey("g"), member_raw) == GROUP


def test_an_empty_group_as_kafka_writes_it():
    # Kafka's empty group record: no protocol (null), no leader (null), no members.
    raw = h("0003 | 0000 | 00000000 | ffff | ffff | 0000000000000063 | 00000000")
    assert encode_value(GroupMetadataValue("", 0, None, None, (), 99)) == raw


def test_a_tombstone_has_no_value():
    key, value = encode_record((GroupMetadataKey("grp"), None))
    assert value is None
    assert decode_record(key, None) == (GroupMetadataKey("grp"), None)
    with pytest.raises(GroupRecordError, match="no key"):
        decode_record(None, b"")


# ---------------------------------------------------------------- the partition of a group


@pytest.mark.parametrize("text, expected", [
    ("", 0),
    ("hello", 99162322),  # "hello".hashCode()
    ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair counts as two code units
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_partition_for_is_utils_abs_of_the_hash_modulo_the_partitions():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 7) == 0  # Utils.abs(MIN_VALUE) is 0, not negative
    assert partition_for("Aa", 50) == partition_for("BB", 50)  # Java's classic collision
    with pytest.raises(ValueError, match="at least 1"):
        partition_for("g", 0)
