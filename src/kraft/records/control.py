"""Control records: the key is (version int16, type int16); the value depends on the type.

KRaft writes LeaderChangeMessage (a new leader's first record in its epoch) and
SnapshotHeaderRecord / SnapshotFooterRecord (the first and last batch of a snapshot); Kafka
3.9+ also writes KRaftVersionRecord and VotersRecord (KIP-853's dynamic quorum), which are
read here too. Their values use Kafka's flexible-version encoding (compact arrays, tagged
fields), which is small enough to write here by hand; tests check it against kio's
generated schemas.
"""

import enum
import struct
from dataclasses import dataclass

from kraft.records.batch import NO_PARTITION_LEADER_EPOCH, Record, SimpleRecord, build_batch
from kraft.records.record_errors import RecordError
from kraft.varint import uvarint

CONTROL_KEY = struct.Struct(">hh")
CONTROL_KEY_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class ControlRecordError(RecordError):
    """A control record whose key or value does not parse.

    `offset` is the record's offset in the log (None for a record not in one yet): a
    control record is found by offset, as CorruptRecordError's `position` finds bytes.
    """

    def __init__(self, offset: int | None, reason: str) -> None:
        where = "control record" if offset is None else f"control record at offset {offset}"
        super().__init__(f"{where}: {reason}")
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    """Version 1 adds each voter's directory id (KIP-853): `*_directory_ids`, in the voters'
    order, empty at version 0."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]
    version: int = 0
    voter_directory_ids: tuple[bytes, ...] = ()
    granting_directory_ids: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class SnapshotHeaderRecord:
    last_contained_log_timestamp: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotFooterRecord:
    version: int = 0


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """Value of ABORT and COMMIT markers; KRaft never writes them but may read them."""

    committed: bool
    coordinator_epoch: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class KRaftVersionRecord:
    """The kraft.version finalized from this offset on (KIP-853)."""

    kraft_version: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    directory_id: bytes
    endpoints: tuple[VoterEndpoint, ...]
    min_kraft_version: int
    max_kraft_version: int


@dataclass(frozen=True, slots=True)
class VotersRecord:
    """The voter set from this offset on (KIP-853)."""

    voters: tuple[Voter, ...]
    version: int = 0


@dataclass(frozen=True, slots=True)
class UnparsedControl:
    """A control type this build does not interpret: kept as bytes."""

    type: ControlType | int
    value: bytes | None


ControlMessage = (
    LeaderChangeMessage
    | SnapshotHeaderRecord
    | SnapshotFooterRecord
    | KRaftVersionRecord
    | VotersRecord
    | EndTxnMarker
    | UnparsedControl
)


class _Reader:
    """Cursor over a flexible-version value; every short read becomes a ControlRecordError."""

    def __init__(self, data: bytes, what: str, offset: int | None) -> None:
        self.data = data
        self.pos = 0
        self.what = what
        self.offset = offset

    def error(self, reason: str) -> ControlRecordError:
        return ControlRecordError(self.offset, f"{self.what} {reason}")

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise self.error(f"value ends early at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def uint16(self) -> int:
        return struct.unpack(">H", self._take(2))[0]

    def uuid(self) -> bytes:
        return self._take(16)

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise self.error(f"has a null string at byte {self.pos}")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise self.error(f"has a string that is not UTF-8 ({e})") from None

    def array(self, read_item) -> tuple:  # noqa: ANN001 - a bound reader method
        n = self.uvarint() - 1
        if n < 0:
            raise self.error("has a null array")
        if n > len(self.data) - self.pos:  # every item takes at least one byte
            raise self.error(f"has an array of {n} items in {len(self.data) - self.pos} bytes")
        return tuple(read_item() for _ in range(n))

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise self.error(f"varint longer than 5 bytes at byte {self.pos}")

    def skip_tagged_fields(self) -> None:
        """Tagged fields from newer writers are skipped, as Kafka's readers do."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def leader_change_voters(self, version: int) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
        """LeaderChangeMessage's voters: ids, and directory ids from version 1."""

        def voter() -> tuple[int, bytes | None]:
            voter_id = self.int32()
            directory = self.uuid() if version >= 1 else None
            self.skip_tagged_fields()
            return voter_id, directory

        voters = self.array(voter)
        return tuple(v for v, _ in voters), tuple(d for _, d in voters if d is not None)

    def voter(self) -> Voter:
        voter_id, directory = self.int32(), self.uuid()

        def endpoint() -> VoterEndpoint:
            found = VoterEndpoint(self.string(), self.string(), self.uint16())
            self.skip_tagged_fields()
            return found

        endpoints = self.array(endpoint)
        low, high = self.int16(), self.int16()
        self.skip_tagged_fields()  # the KRaftVersionFeature struct's
        self.skip_tagged_fields()  # the voter's
        return Voter(voter_id, directory, endpoints, low, high)

    def end(self) -> None:
        self.skip_tagged_fields()
        if self.pos != len(self.data):
            raise self.error(f"has {len(self.data) - self.pos} trailing bytes")


def _voters(ids: tuple[int, ...], directories: tuple[bytes, ...], version: int) -> bytes:
    if version >= 1 and len(directories) != len(ids):
        raise ValueError(f"LeaderChangeMessage v{version} needs a directory id per voter")
    dirs = directories if version >= 1 else (b"",) * len(ids)
    return uvarint(len(ids) + 1) + b"".join(struct.pack(">i", v) + d + b"\x00" for v, d in zip(ids, dirs))


def _string(text: str) -> bytes:
    data = text.encode()
    return uvarint(len(data) + 1) + data


def _voter(v: Voter) -> bytes:
    endpoints = b"".join(_string(e.name) + _string(e.host) + struct.pack(">H", e.port) + b"\x00" for e in v.endpoints)
    return (struct.pack(">i", v.voter_id) + v.directory_id + uvarint(len(v.endpoints) + 1) + endpoints
            + struct.pack(">hh", v.min_kraft_version, v.max_kraft_version) + b"\x00\x00")


def encode_control_value(message: ControlMessage) -> bytes:
    if isinstance(message, LeaderChangeMessage):
        return (
            struct.pack(">hi", message.version, message.leader_id)
            + _voters(message.voters, message.voter_directory_ids, message.version)
            + _voters(message.granting_voters, message.granting_directory_ids, message.version)
            + b"\x00"
        )
    if isinstance(message, SnapshotHeaderRecord):
        return struct.pack(">hq", message.version, message.last_contained_log_timestamp) + b"\x00"
    if isinstance(message, SnapshotFooterRecord):
        return struct.pack(">h", message.version) + b"\x00"
    if isinstance(message, KRaftVersionRecord):
        return struct.pack(">hh", message.version, message.kraft_version) + b"\x00"
    if isinstance(message, VotersRecord):
        voters = b"".join(_voter(v) for v in message.voters)
        return struct.pack(">h", message.version) + uvarint(len(message.voters) + 1) + voters + b"\x00"
    if isinstance(message, EndTxnMarker):
        return struct.pack(">hi", message.version, message.coordinator_epoch)
    raise TypeError(f"cannot encode control message {message!r}")


def control_type_of(message: ControlMessage) -> ControlType:
    if isinstance(message, LeaderChangeMessage):
        return ControlType.LEADER_CHANGE
    if isinstance(message, SnapshotHeaderRecord):
        return ControlType.SNAPSHOT_HEADER
    if isinstance(message, SnapshotFooterRecord):
        return ControlType.SNAPSHOT_FOOTER
    if isinstance(message, KRaftVersionRecord):
        return ControlType.KRAFT_VERSION
    if isinstance(message, VotersRecord):
        return ControlType.KRAFT_VOTERS
    if isinstance(message, EndTxnMarker):
        return ControlType.COMMIT if message.committed else ControlType.ABORT
    raise TypeError(f"not a control message: {message!r}")


_PARSED = (ControlType.LEADER_CHANGE, ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER,
           ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS)


def control_key(kind: ControlType) -> bytes:
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, kind)


def parse_control_key(key: bytes | None, offset: int | None = None) -> int:
    """The control type of a control record's key (an int, since newer types may be unknown).
    `offset`, the record's, goes into errors."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise ControlRecordError(offset, f"key must be 4 bytes, got {key!r}")
    version, kind = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ControlRecordError(offset, f"key has negative version {version}")
    return kind


def decode_control_record(record: Record | SimpleRecord) -> ControlMessage:
    """Decodes a record from a control batch into its typed message. A type this build does
    not interpret comes back as UnparsedControl; a key or value that does not parse raises
    ControlRecordError naming the record's offset (a SimpleRecord, not in a log, has none)."""
    offset = record.offset if isinstance(record, Record) else None
    kind = parse_control_key(record.key, offset)
    value = record.value
    if kind in (ControlType.ABORT, ControlType.COMMIT):
        if value is None:
            raise ControlRecordError(offset, "transaction marker without a value")
        r = _Reader(value, "EndTxnMarker", offset)
        version = r.int16()
        return EndTxnMarker(kind == ControlType.COMMIT, r.int32(), version)
    if kind not in _PARSED:
        try:
            return UnparsedControl(ControlType(kind), value)
        except ValueError:
            return UnparsedControl(kind, value)
    name = ControlType(kind).name
    if value is None:
        raise ControlRecordError(offset, f"{name} without a value")
    r = _Reader(value, name, offset)
    version = r.int16()
    message: ControlMessage
    if kind == ControlType.LEADER_CHANGE:
        leader_id = r.int32()
        voters, voter_dirs = r.leader_change_voters(version)
        granting, granting_dirs = r.leader_change_voters(version)
        message = LeaderChangeMessage(leader_id, voters, granting, version, voter_dirs, granting_dirs)
    elif kind == ControlType.SNAPSHOT_HEADER:
        message = SnapshotHeaderRecord(r.int64(), version)
    elif kind == ControlType.KRAFT_VERSION:
        message = KRaftVersionRecord(r.int16(), version)
    elif kind == ControlType.KRAFT_VOTERS:
        message = VotersRecord(r.array(r.voter), version)
    else:
        message = SnapshotFooterRecord(version)
    r.end()
    return message


def build_control_batch(
    *messages: ControlMessage,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytearray:
    """A batch of control records: one, as Kafka writes LeaderChange and snapshot markers, or
    several (KIP-853's KRaftVersion and Voters records, written together)."""
    records = [SimpleRecord(control_key(control_type_of(m)), encode_control_value(m)) for m in messages]
    return build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        timestamp=timestamp,
        control=True,
    )
