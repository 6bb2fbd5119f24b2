"""Decoded metadata records (`decode=metadata`): Kafka's JSON and typed columns for every
record type and version, UNKNOWN rows, topic names across tasks; in Arrow and in Spark."""

import json
import math

import pyarrow as pa
import pytest

from kraft.cli.kafka_json import control_json, metadata_payload
from kraft.cli.kafka_json import record_data as kafka_json
from kraft.metadata import encode_record
from kraft.metadata.records import RECORD_TYPES, ClientQuotaRecord, ConfigRecord, EntityData, NoOpRecord
from kraft.records import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    SimpleRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    build_batch,
    build_control_batch,
    decode_control_record,
    read_batches,
)
from kraft.spark.files import view_topic_names
from kraft.spark.history import HISTORY_ARROW_SCHEMA, HISTORY_SCHEMA, TopicNames, decode, type_name
from kraft.spark.json_columns import object_texts
from kraft.spark.logdir import LogDirectory, read_slice
from kraft.spark.metadata_view import metadata_image
from kraft.spark.rows import to_arrow
from tests.cli.kafka_files import cluster_image, write_cluster_dir, write_kafka_snapshot
from tests.metadata.test_golden import sample_record
from tests.spark.kafka_logs import DIR_A, DIR_B, PARTITION_DIR, UNKNOWN_VALUES, check_history, snapshot_only

EVERY_VERSION = [(cls, v) for cls in RECORD_TYPES for v in range(cls.__schema__.versions[0],
                                                                 cls.__schema__.versions[1] + 1)]


@pytest.mark.parametrize("cls, version", EVERY_VERSION, ids=[f"{c.__name__}-v{v}" for c, v in EVERY_VERSION])
def test_every_type_and_version_is_kafkas_json(cls, version):
    """Every field set (tagged ones written), then every field at its default (tagged ones
    left out), several records per group as the reader makes them."""
    records = [sample_record(cls, version, n) for n in range(3)] + [cls()]
    texts, _ = object_texts(cls, version, records)
    assert [json.loads(t) for t in texts.to_pylist()] == [kafka_json(r, version) for r in records]


def test_strings_numbers_and_empty_groups_are_valid_json():
    awkward = ["", 'say "hi"', "back\\slash", "tab\there\nnew line\x01", "ünïcødé ✓", "\x1f"]
    records = [ConfigRecord(resource_type=2, resource_name=s, name="k", value=s or None) for s in awkward]
    texts, _ = object_texts(ConfigRecord, 0, records)
    assert [json.loads(t) for t in texts.to_pylist()] == [kafka_json(r, 0) for r in records]
    values = [0.0, 1048576.0, 1e20, 1e-9, -2.5, math.inf, -math.inf, math.nan]
    quotas = [ClientQuotaRecord(entity=(EntityData("user", None),), key="k", value=v) for v in values]
    decoded = [json.loads(t)["value"] for t in object_texts(ClientQuotaRecord, 0, quotas)[0].to_pylist()]
    assert decoded[:5] == values[:5] and decoded[5:7] == ["Infinity", "-Infinity"] and decoded[7] == "NaN"
    assert object_texts(NoOpRecord, 0, [NoOpRecord()] * 2)[0].to_pylist() == ["{}", "{}"]
    assert object_texts(ConfigRecord, 0, [])[0].to_pylist() == []


def history_of(data: bytes) -> list[dict]:
    return [r for a in to_arrow(read_batches(data), topic="t", partition=0) for r in decode(a, TopicNames()).to_pylist()]


CONTROLS = [LeaderChangeMessage(1, (1, 2, 3), (1, 2)), LeaderChangeMessage(2, (1, 2), (2,), 1, (DIR_A, DIR_B), (DIR_B,)),
            SnapshotHeaderRecord(1_700_000_000_000), SnapshotFooterRecord(), KRaftVersionRecord(1),
            VotersRecord((Voter(1, DIR_A, (VoterEndpoint("CONTROLLER", "h", 9093),), 0, 1),))]


@pytest.mark.parametrize("message", CONTROLS, ids=[f"{type(m).__name__}-v{m.version}" for m in CONTROLS])
def test_control_records_are_kafkas_json(message):
    (row,) = history_of(build_control_batch(message, timestamp=0))
    assert row["isControl"] and row["version"] == message.version and row["topic"] is None
    assert json.loads(row["fields"]) == json.loads(control_json(message))
    assert row["type"] == {LeaderChangeMessage: "LEADER_CHANGE", SnapshotHeaderRecord: "SNAPSHOT_HEADER",
                           SnapshotFooterRecord: "SNAPSHOT_FOOTER", KRaftVersionRecord: "KRAFT_VERSION",
                           VotersRecord: "KRAFT_VOTERS"}[type(message)]


def test_a_control_type_kraft_does_not_know_is_unknown():
    newer = SimpleRecord(b"\x00\x00\x00\x63", b"\x00\x00whatever")  # control type 99
    (row,) = history_of(build_batch([newer], timestamp=0, control=True))
    assert (row["type"], row["version"], row["fields"], row["isControl"]) == ("UNKNOWN", None, None, True)


def test_type_names_are_kafkas_metadata_record_types():
    names = {type_name(cls) for cls in RECORD_TYPES}
    assert {"REGISTER_BROKER_RECORD", "NO_OP_RECORD", "ZK_MIGRATION_STATE_RECORD", "CLEAR_ELR_RECORD",
            "USER_SCRAM_CREDENTIAL_RECORD", "UNREGISTER_CONTROLLER_RECORD"} <= names
    assert len(names) == len(RECORD_TYPES) == 27


def arrow_history(path, **plan) -> list[dict]:
    """The history rows of a directory, decoded without Spark, a Kafka batch per Arrow batch
    (many small groups: the hardest case for the column-wise decoder)."""
    view = LogDirectory(path).plan_view(from_snapshot=False, **plan)
    names = view_topic_names(view)
    out = []
    for piece in view.slices:
        for arrow in to_arrow(read_slice(piece, view.low, view.high), topic="t", partition=0, rows_per_batch=1):
            batch = decode(arrow, names)
            assert batch.schema == HISTORY_ARROW_SCHEMA
            out += batch.to_pylist()
    return out


def test_every_row_of_a_kafka_shaped_log(kafka_unknown):
    rows = arrow_history(kafka_unknown.root)
    check_history(rows, kafka_unknown.rows)
    types = {r["type"] for r in rows}
    assert {type_name(cls) for cls in RECORD_TYPES} | {"LEADER_CHANGE", "UNKNOWN"} == types
    written = {(r["type"], r["version"]) for r in rows if r["type"] != "UNKNOWN" and not r["isControl"]}
    assert written == {(type_name(cls), v) for cls, v in EVERY_VERSION}


def test_values_kraft_cannot_decode_are_unknown_rows_with_their_bytes(kafka_unknown):
    unknown = [r for r in arrow_history(kafka_unknown.root) if r["type"] == "UNKNOWN"]
    assert [r["value"] for r in unknown] == list(UNKNOWN_VALUES)
    assert [r["version"] for r in unknown] == [0, 7, 0, None]  # as far as each frame reads
    assert all(r["fields"] is None and r["topic"] is None for r in unknown)


def test_topic_names_come_from_the_views_topic_records_wherever_they_are(kafka):
    view = LogDirectory(kafka.root).plan_view(from_snapshot=False)
    names = view_topic_names(view)
    assert sorted(names.names) == ["doomed", "ghost", "orders", "payments"]  # the aborted one too: its rows exist
    ids = pa.array([kafka.rows[0].topic_id, None, next(r.topic_id for r in kafka.rows if r.topic == "orders")])
    assert names.lookup(ids).to_pylist() == [None, None, "orders"]
    assert TopicNames().lookup(ids).to_pylist() == [None] * 3
    # Decoding a batch of PartitionChangeRecords alone: only the map knows their names.
    changes = [r for r in kafka.rows if r.type == "PARTITION_CHANGE_RECORD"]
    segment = next(s for s in view.slices if s.first_offset <= changes[0].offset < (s.next_offset or 1 << 62))
    arrows = to_arrow(read_slice(segment), topic="t", partition=0)
    decoded = [r for a in arrows for r in decode(a, names).to_pylist() if r["type"] == "PARTITION_CHANGE_RECORD"]
    assert {r["topic"] for r in decoded} == {"orders"}
    assert not any(r.type == "TOPIC_RECORD" and r.offset >= segment.first_offset for r in changes)


def read(spark, path, **options):
    return spark.read.format("kraft-files").option("decode", "metadata").options(**options).load(str(path))


def collected(df) -> list[dict]:
    """The rows as the source returns them: in log order, snapshot rows first."""
    return [r.asDict(recursive=True) for r in df.collect()]


def test_kraft_files_reads_the_history_in_parallel_tasks(spark, kafka_unknown):
    df = read(spark, kafka_unknown.root)
    assert df.schema == HISTORY_SCHEMA
    assert df.rdd.getNumPartitions() == len(list(kafka_unknown.path.glob("*.log"))) > 2
    check_history(collected(df), kafka_unknown.rows)
    per_broker = {r.broker: r["count"] for r in df.where("broker IS NOT NULL").groupBy("broker").count().collect()}
    assert per_broker == {b: sum(1 for e in kafka_unknown.rows if e.broker == b) for b in (1, 2, 3, 4, 5)}


def test_the_snapshot_view_starts_with_the_snapshots_rows(spark, kafka):
    (snapshot,) = LogDirectory(kafka.root).snapshots
    end = snapshot.snapshot_id.end_offset
    rows = collected(read(spark, kafka.root, startingOffsets="snapshot"))
    state = [r for r in rows if r["snapshot"] is not None]
    assert (state[0]["type"], state[-1]["type"]) == ("SNAPSHOT_HEADER", "SNAPSHOT_FOOTER")
    data = [r for r in state if not r["isControl"]]
    assert len(data) == len(kafka.snapshot_rows)
    check_history(data, kafka.snapshot_rows)  # one task, in the snapshot's order
    check_history([r for r in rows if r["snapshot"] is None], [e for e in kafka.rows if e.offset >= end])


def test_a_snapshot_only_directory_reads_its_snapshot(spark, kafka, tmp_path):
    """A backup of snapshots alone (no segments): "earliest" is the latest snapshot."""
    root = snapshot_only(kafka, tmp_path / "backup")
    for path in (root, root / PARTITION_DIR):
        rows = collected(read(spark, path))
        assert (rows[0]["type"], rows[-1]["type"]) == ("SNAPSHOT_HEADER", "SNAPSHOT_FOOTER")
        check_history([r for r in rows if not r["isControl"]], kafka.snapshot_rows)
        plain = spark.read.format("kraft-files").load(str(path))
        assert plain.where("NOT isControl").count() == len(kafka.snapshot_rows)


def test_unknown_decode_values_are_refused(spark, kafka):
    with pytest.raises(Exception, match=r"option decode is 'json'; expected one of \['none', 'metadata'\]"):
        read(spark, kafka.root, decode="json").collect()
    assert encode_record(NoOpRecord()) == b"\x01\x14\x00\x00"


def test_every_row_is_what_dump_log_prints_for_a_directory_laid_out_by_kafka(spark, tmp_path):
    """The directory the file tools' tests lay out byte by byte as Kafka 4.x writes it
    (KRaftVersion and Voters control records, transactions, a record of a newer type): each
    row is kraft dump-log's --cluster-metadata-decoder line for its record. Then a snapshot
    in Kafka's layout (its own KRaftVersion and Voters batches) alone in a metadata.log.dir."""
    segment = write_cluster_dir(tmp_path / "kafka") / "00000000000000000000.log"
    rows = collected(read(spark, tmp_path / "kafka"))
    records = [(b.header.is_control, r) for b in read_batches(segment.read_bytes()) for r in b.records()]
    assert [row["offset"] for row in rows] == [r.offset for _, r in records]
    for row, (control, record) in zip(rows, records):
        if control:
            assert json.loads(row["fields"]) == json.loads(control_json(decode_control_record(record)))
            continue
        printed = metadata_payload(record.value, record.offset)
        if printed.kind == "record":
            assert json.loads(printed.text) == {"type": row["type"], "version": row["version"],
                                                "data": json.loads(row["fields"])}
        else:
            assert (printed.kind, row["type"], row["fields"], row["value"]) == ("unknown", "UNKNOWN", None, record.value)
    assert {"LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS", "UNKNOWN", "ABORT_TRANSACTION_RECORD"} <= {
        row["type"] for row in rows}
    image = cluster_image(tmp_path / "image")
    snapshot = write_kafka_snapshot(tmp_path / "backup" / PARTITION_DIR, image, epoch=2)
    rows = collected(read(spark, tmp_path / "backup"))
    assert [row["type"] for row in rows if row["isControl"]] == [
        "SNAPSHOT_HEADER", "KRAFT_VERSION", "KRAFT_VOTERS", "SNAPSHOT_FOOTER"], "Kafka's layout, row for row"
    assert len([row for row in rows if not row["isControl"]]) == image.record_count()
    assert {row["offset"] for row in rows} == {image.offset}
    assert {(row["snapshot"]["endOffset"], row["snapshot"]["epoch"]) for row in rows} == {(image.offset + 1, 2)}
    assert metadata_image(str(snapshot.parent.parent)).digest() == image.digest()
