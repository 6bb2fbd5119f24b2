"""Real partition directories for the Spark tests, written with kraft.storage, and what a
reader must find in them, computed from what was written (not by reading it back)."""

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from kraft.metadata import MetadataImage, apply_records, encode_record, snapshot_records
from kraft.metadata import operations as ctl
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import BrokerEndpoint
from kraft.records import (
    Compression,
    LeaderChangeMessage,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_control_record,
)
from kraft.storage import FileLog, FileSnapshotStore, SnapshotId

T0 = 1_700_000_000_000
TOPIC = "__cluster_metadata"


def undecodable_batch(value: bytes = b"v") -> bytes:
    """A batch whose CRC holds but whose header counts one record more than it holds: bytes
    a buggy writer could leave, which no CRC check catches."""
    data = bytearray(build_batch([SimpleRecord(None, value)] * 3, timestamp=T0))
    struct.pack_into(">i", data, 57, 4)  # records_count
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


@dataclass(frozen=True)
class Row:
    """A record as the reader must return it (a subset of RECORD_SCHEMA's columns)."""

    offset: int
    epoch: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    timestamp_type: int
    control: bool


def check_rows(rows: list[dict], expected) -> None:
    """Every column of every row, control records by their decoded message."""
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert (row["topic"], row["partition"]) == (TOPIC, 0)
        assert (row["offset"], row["leaderEpoch"], row["isControl"]) == (want.offset, want.epoch, want.control)
        # Arrow gives an aware UTC datetime, Spark's collect() a naive local one: both are
        # the same instant, which .timestamp() reads back.
        assert round(row["timestamp"].timestamp() * 1000) == want.timestamp_ms
        assert row["timestampType"] == want.timestamp_type
        if want.control:
            assert decode_control_record(SimpleRecord(row["key"], row["value"])).leader_id == 1
            assert row["headers"] == []
        else:
            assert (row["key"], row["value"]) == (want.key, want.value)
            assert [(h["key"], h["value"]) for h in row["headers"]] == list(want.headers)


@dataclass
class RecordLog:
    """A log written with FileLog.append_as_leader, and the rows it holds."""

    path: Path
    segment_bytes: int = 2048
    rows: list[Row] = field(default_factory=list)
    batch_ends: list[int] = field(default_factory=list)  # every batch boundary, 0 first

    def __post_init__(self) -> None:
        self.log = FileLog(self.path, segment_bytes=self.segment_bytes)
        self.batch_ends.append(self.log.end_offset)

    def leader_change(self, epoch: int, leader: int = 1) -> None:
        message = LeaderChangeMessage(leader, (1, 2, 3), (1, 2))
        info = self.log.append_as_leader(build_control_batch(message, timestamp=T0 + epoch), epoch)
        self.rows.append(Row(info.first_offset, epoch, None, None, (), T0 + epoch, 0, True))
        self.batch_ends.append(info.last_offset + 1)

    def append(self, epoch: int, records: list[SimpleRecord], *, log_append_time: int | None = None, **kw) -> None:
        if log_append_time is not None:
            kw.update(timestamp=log_append_time, timestamp_type=TimestampType.LOG_APPEND_TIME)
        info = self.log.append_as_leader(build_batch(records, **kw), epoch)
        for i, r in enumerate(records):
            ts = log_append_time if log_append_time is not None else r.timestamp
            kind = 1 if log_append_time is not None else 0
            self.rows.append(Row(info.first_offset + i, epoch, r.key, r.value, tuple(r.headers), ts, kind, False))
        self.batch_ends.append(info.last_offset + 1)

    def close(self) -> None:
        self.log.close()


def record_log(directory: Path, *, segment_bytes: int = 2048) -> RecordLog:
    """Two leader epochs, each opened by a LeaderChange: batches of various sizes, null
    keys and values, headers, a gzip batch and a LogAppendTime batch; several segments."""
    log = RecordLog(directory / f"{TOPIC}-0", segment_bytes)
    rng = random.Random(7)
    n = 0
    for epoch in (1, 2):
        log.leader_change(epoch)
        for b in range(12):
            records = []
            for _ in range(rng.randint(1, 8)):
                key = None if n % 5 == 0 else b"k%d" % n
                value = None if n % 11 == 3 else bytes([n % 256]) * rng.randint(0, 90)
                headers = (("h", b"x%d" % n), ("none", None)) if n % 7 == 0 else ()
                records.append(SimpleRecord(key, value, headers, T0 + 1000 * n))
                n += 1
            compression = Compression.GZIP if b == 5 else Compression.NONE
            log.append(epoch, records, compression=compression, log_append_time=T0 + 999 if b == 8 else None)
    log.close()
    return log


@dataclass
class MetadataLog:
    """A metadata log written as a controller would: LeaderChange batches and controller
    results, with the image after every batch, keyed by the log's end offset then."""

    path: Path
    segment_bytes: int = 600
    images: dict[int, MetadataImage] = field(default_factory=dict)
    timestamp: int = T0  # of the batches written next

    def __post_init__(self) -> None:
        self.log = FileLog(self.path, segment_bytes=self.segment_bytes)
        self.store = FileSnapshotStore(self.path)
        self.image = MetadataImage()
        self.images[0] = self.image
        self.rng = random.Random(3)
        self.epoch = 0

    def leader_change(self) -> None:
        self.epoch += 1
        batch = build_control_batch(LeaderChangeMessage(1, (1,), (1,)), timestamp=T0)
        info = self.log.append_as_leader(batch, self.epoch)
        self._applied([], info.last_offset)

    def commit(self, result: ControllerResult) -> object:
        if result.records:
            batch = build_batch([SimpleRecord(None, encode_record(r)) for r in result.records],
                                timestamp=self.timestamp)
            info = self.log.append_as_leader(batch, self.epoch)
            self._applied(result.records, info.last_offset)
        return result.response

    def _applied(self, records, last_offset: int) -> None:
        self.image = apply_records(self.image, records, offset=last_offset, epoch=self.epoch)
        self.images[last_offset + 1] = self.image

    def add_brokers(self, *ids: int) -> None:
        for b in ids:
            listener = BrokerEndpoint("PLAINTEXT", "localhost", 9092 + b, 0)
            registration = ctl.register_broker(
                self.image, b, incarnation_id=bytes([b]) * 16, broker_epoch=self.log.end_offset, endpoints=[listener]
            )
            epoch = self.commit(registration)
            self.commit(ctl.unfence_broker(self.image, b, epoch))

    def create(self, name: str, partitions: int, rf: int = 3, configs: dict | None = None) -> None:
        self.commit(ctl.create_topic(self.image, ctl.NewTopic(name, partitions, rf, configs or {}), self.rng))

    def snapshot(self) -> SnapshotId:
        """A snapshot of the current image, as the Raft layer would freeze it."""
        snapshot_id = SnapshotId(self.image.end_offset, self.epoch)
        with self.store.create_writer(snapshot_id, T0, records_per_batch=4) as writer:
            writer.append(list(snapshot_records(self.image)))
            writer.freeze()
        return snapshot_id

    def close(self) -> None:
        self.log.close()


def metadata_log(directory: Path) -> MetadataLog:
    """Brokers, topics, configs, fencing, a deletion, across two epochs and several
    segments, with a snapshot in the middle."""
    m = MetadataLog(directory / f"{TOPIC}-0")
    m.leader_change()
    m.add_brokers(1, 2, 3, 4)
    m.create("orders", 6, configs={"retention.ms": "60000"})
    m.create("payments", 3)
    m.commit(ctl.fence_broker(m.image, 2))
    m.snapshot()
    m.leader_change()
    m.create("refunds", 2, rf=2)
    m.commit(ctl.delete_topic(m.image, "payments"))
    m.commit(ctl.unfence_broker(m.image, 2, m.image.broker(2).epoch))
    m.leader_change()
    m.create("audit", 8, configs={"cleanup.policy": "compact"})
    m.commit(ctl.fence_broker(m.image, 3))
    m.commit(ctl.allocate_producer_ids(m.image, 1, m.image.broker(1).epoch))
    m.close()
    return m
