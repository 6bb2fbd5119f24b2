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
from kraft.records.control import encode_control_value
from kraft.varint import uvarint

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
        (key(ControlType.LEADER_CHANGE), struct.pack(">hi", 0, 3) + uvarint(0), "LEADER_CHANGE has a null array"),
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


def _kio_bytes(entity) -> bytes:
    import io

    from kio.serial import entity_writer

    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def test_kip_853_control_records_match_kios_schemas_both_ways():
    """KRaftVersionRecord, VotersRecord and LeaderChangeMessage v1 (Kafka 3.9+): the bytes
    kio's generated classes write are what kraft writes, and kraft reads them back."""
    import uuid

    from kio.schema.k_raft_version_record.v0 import data as kv
    from kio.schema.leader_change_message.v1 import data as lc
    from kio.schema.voters_record.v0 import data as vr
    from kio.static.primitive import i16, i32, u16

    from kraft.records import KRaftVersionRecord, Voter, VoterEndpoint, VotersRecord

    dirs = [uuid.UUID(int=n * 0x1111) for n in (1, 2)]
    theirs = vr.VotersRecord(version=i16(0), voters=tuple(
        vr.Voter(voter_id=i32(n), voter_directory_id=d,
                 endpoints=(vr.Endpoint(name="CONTROLLER", host=f"h{n}", port=u16(9093 + n)),),
                 k_raft_version_feature=vr.KRaftVersionFeature(min_supported_version=i16(0),
                                                                max_supported_version=i16(1)))
        for n, d in zip((1, 2), dirs)))
    ours = VotersRecord(tuple(Voter(n, d.bytes, (VoterEndpoint("CONTROLLER", f"h{n}", 9093 + n),), 0, 1)
                              for n, d in zip((1, 2), dirs)))
    assert encode_control_value(ours) == _kio_bytes(theirs)
    assert read_back(key(ControlType.KRAFT_VOTERS), _kio_bytes(theirs)) == ours

    version = KRaftVersionRecord(1)
    assert encode_control_value(version) == _kio_bytes(kv.KRaftVersionRecord(version=i16(0), k_raft_version=i16(1)))
    assert read_back(key(ControlType.KRAFT_VERSION), encode_control_value(version)) == version

    change = LeaderChangeMessage(1, (1, 2), (1,), 1, (dirs[0].bytes, dirs[1].bytes), (dirs[0].bytes,))
    kio_change = lc.LeaderChangeMessage(
        version=i16(1), leader_id=i32(1),
        voters=tuple(lc.Voter(voter_id=i32(n), voter_directory_id=d) for n, d in zip((1, 2), dirs)),
        granting_voters=(lc.Voter(voter_id=i32(1), voter_directory_id=dirs[0]),))
    assert encode_control_value(change) == _kio_bytes(kio_change)
    assert read_back(key(ControlType.LEADER_CHANGE), _kio_bytes(kio_change)) == change
