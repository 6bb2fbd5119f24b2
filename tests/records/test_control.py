"""Control records read back: every malformed key or value is a ControlRecordError naming
the record's offset, newer control types are kept rather than refused, and tagged fields
from newer writers are skipped wherever the schema allows them."""

import struct

import pytest

from kraft.records import (
    ControlRecordError,
    ControlType,
    LeaderChangeMessage,
    SimpleRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    UnparsedControl,
    build_batch,
    decode_control_record,
    read_batches,
)
from kraft.records.control import encode_control_value, uvarint

LEADER_CHANGE = encode_control_value(LeaderChangeMessage(3, (1, 2, 3), (3, 1)))
SNAPSHOT_HEADER = encode_control_value(SnapshotHeaderRecord(1_700_000_000_000))


def read_back(key: bytes | None, value: bytes | None, offset: int = 40):
    """The record as a reader meets it: in a control batch at `offset`, decoded."""
    buf = build_batch([SimpleRecord(key, value)], control=True, base_offset=offset)
    ((record,),) = [batch.records() for batch in read_batches(buf)]
    return decode_control_record(record)


def key(kind: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, kind)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, length, bytes) each."""
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


def voter(voter_id: int, *fields: tuple[int, bytes]) -> bytes:
    """One entry of LeaderChangeMessage's voter arrays, with its own tagged fields."""
    return struct.pack(">i", voter_id) + tags(*fields)


@pytest.mark.parametrize(
    "record_key,value,reason",
    [
        (None, LEADER_CHANGE, "key must be 4 bytes, got None"),
        (b"\x00\x00\x02", LEADER_CHANGE, "key must be 4 bytes"),
        (key(ControlType.LEADER_CHANGE, version=-1), LEADER_CHANGE, "key has negative version -1"),
        (key(ControlType.LEADER_CHANGE), None, "LEADER_CHANGE without a value"),
        (key(ControlType.LEADER_CHANGE), LEADER_CHANGE[:-4], "LEADER_CHANGE value ends early at byte"),
        (key(ControlType.LEADER_CHANGE), LEADER_CHANGE + b"\x00", "LEADER_CHANGE has 1 trailing bytes"),
        (key(ControlType.LEADER_CHANGE), struct.pack(">hi", 0, 3) + uvarint(0), "LEADER_CHANGE has a null voter array"),
        (key(ControlType.LEADER_CHANGE), struct.pack(">hi", 0, 3) + b"\xff" * 5, "varint longer than 5 bytes at byte 11"),
        (key(ControlType.SNAPSHOT_HEADER), SNAPSHOT_HEADER[:5], "SNAPSHOT_HEADER value ends early at byte 2"),
        (key(ControlType.SNAPSHOT_FOOTER), b"\x00", "SNAPSHOT_FOOTER value ends early at byte 0"),
        (key(ControlType.COMMIT), None, "transaction marker without a value"),
        (key(ControlType.ABORT), b"\x00\x00\x00", "EndTxnMarker value ends early at byte 2"),
        # A tagged field that says it is longer than what is left of the value.
        (key(ControlType.SNAPSHOT_FOOTER), b"\x00\x00" + uvarint(1) + uvarint(0) + uvarint(9) + b"ab", "ends early"),
    ],
)
def test_a_malformed_control_record_is_an_error_naming_its_offset(record_key, value, reason):
    with pytest.raises(ControlRecordError, match=reason) as err:
        read_back(record_key, value, offset=40)
    assert err.value.offset == 40
    assert str(err.value).startswith("control record at offset 40: ")
    assert reason in err.value.reason


def test_a_record_not_in_a_log_has_no_offset_to_name():
    with pytest.raises(ControlRecordError, match="^control record: key must be 4 bytes") as err:
        decode_control_record(SimpleRecord(None, LEADER_CHANGE))
    assert err.value.offset is None


def test_control_types_this_build_does_not_interpret_are_kept_as_bytes():
    voters = read_back(key(ControlType.KRAFT_VOTERS), b"\x00\x01opaque")
    assert voters == UnparsedControl(ControlType.KRAFT_VOTERS, b"\x00\x01opaque")
    assert isinstance(voters.type, ControlType)
    assert read_back(key(99), b"future") == UnparsedControl(99, b"future")
    assert read_back(key(99), None) == UnparsedControl(99, None)


def test_a_newer_key_version_is_still_read_by_its_type():
    assert read_back(key(ControlType.SNAPSHOT_HEADER, version=1), SNAPSHOT_HEADER) == SnapshotHeaderRecord(
        1_700_000_000_000
    )


def test_tagged_fields_from_newer_writers_are_skipped_at_every_level():
    value = (
        struct.pack(">hi", 0, 3)
        + uvarint(3) + voter(1, (5, b"zz")) + voter(2)  # voters 1 and 2, one with a tag of its own
        + uvarint(2) + voter(2, (0, b""), (7, b"\x01\x02\x03"))
        + tags((0, b"abc"), (300, b"x" * 130))  # a tag number and a length that take two varint bytes
    )
    assert read_back(key(ControlType.LEADER_CHANGE), value) == LeaderChangeMessage(3, (1, 2), (2,))
    header = struct.pack(">hq", 0, 1234) + tags((1, b"\x00" * 8))
    assert read_back(key(ControlType.SNAPSHOT_HEADER), header) == SnapshotHeaderRecord(1234)
    footer = struct.pack(">h", 0) + tags((2, b"later"))
    assert read_back(key(ControlType.SNAPSHOT_FOOTER), footer) == SnapshotFooterRecord()
