"""The file tools over snapshots Kafka's tools load: built byte by byte as Kafka's
RecordsSnapshotWriter lays them out (kafka_files.py), holding what Kafka's loader takes and
kraft's replica would not (removals of entries that are not there, an UnregisterController,
a transaction), and a broker whose log directories are not in Kafka's order. The shell,
"kraft-metadata" (`metadata_image`) and "kraft-files" show what Kafka shows; a replica's
replay still stops."""

import dataclasses
import logging
import subprocess
import sys

import pytest

from kraft.metadata import MetadataCache, uuid_str
from kraft.metadata import records as r
from kraft.metadata.metadata_errors import MetadataError
from kraft.records import SnapshotFooterRecord, SnapshotHeaderRecord
from kraft.storage.snapshot import SnapshotId, SnapshotReader
from tests.cli.kafka_files import KRAFT_VERSION, TIME, VOTERS, LogBuilder, register_broker, uuid

AUDIT, GHOST, ACL_ID = uuid(2), uuid(3), uuid(50)
# Kafka's BrokerRegistration sorts log directories by Uuid.compareTo: signed longs, so a
# directory whose first byte is 0x90 comes before one whose first byte is 0x10.
LOW, HIGH = bytes([0x10]) + bytes(15), bytes([0x90]) + bytes(15)
END_OFFSET, EPOCH = 40, 3


def kafka_snapshot_records() -> list:
    acl = r.AccessControlEntryRecord(id=ACL_ID, resource_type=2, resource_name="orders", pattern_type=3,
                                     principal="User:alice", host="*", operation=3, permission_type=3)
    controller = r.RegisterControllerRecord(
        controller_id=3000, incarnation_id=uuid(31), zk_migration_ready=False,
        end_points=(r.BrokerEndpoint(name="CONTROLLER", host="c1.example", port=9093, security_protocol=0),),
        features=())
    return [
        r.FeatureLevelRecord(name="metadata.version", feature_level=21),
        dataclasses.replace(register_broker(1), log_dirs=(LOW, HIGH)),
        controller,
        acl,
        r.RemoveAccessControlEntryRecord(id=uuid(51)),  # not there: Kafka's loader logs it and goes on
        r.RemoveUserScramCredentialRecord(name="nobody", mechanism=1),  # not there: no error in Kafka
        r.RemoveDelegationTokenRecord(token_id="no-token"),
        r.UnregisterControllerRecord(controller_id=3001),
        r.BeginTransactionRecord(name="create audit"),
        r.TopicRecord(name="audit", topic_id=AUDIT),
        r.PartitionRecord(partition_id=0, topic_id=AUDIT, replicas=(1,), isr=(1,), leader=1),
        r.EndTransactionRecord(),
        r.BeginTransactionRecord(name="create ghost"),
        r.TopicRecord(name="ghost", topic_id=GHOST),
        r.AbortTransactionRecord(reason="the controller failed over"),
    ]


def write_snapshot(directory, records: list) -> object:
    builder = LogBuilder()
    builder.control([SnapshotHeaderRecord(TIME)], EPOCH)
    builder.control([KRAFT_VERSION, VOTERS], EPOCH)
    for i in range(0, len(records), 3):
        builder.records(records[i: i + 3], EPOCH)
    builder.control([SnapshotFooterRecord()], EPOCH)
    return builder.write(directory / "__cluster_metadata-0" / f"{END_OFFSET:020d}-{EPOCH:010d}.checkpoint")


@pytest.fixture
def snapshot(tmp_path):
    return write_snapshot(tmp_path, kafka_snapshot_records())


@pytest.fixture
def broker_snapshot(tmp_path):
    """Only a broker whose log directories are not in Kafka's order (nothing else to differ)."""
    return write_snapshot(tmp_path, kafka_snapshot_records()[:2])


def shell(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "metadata-shell", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("source", ["--snapshot", "--dir"])
def test_the_shell_loads_the_snapshot_as_kafkas_shell_does_and_counts_what_it_left_out(snapshot, source):
    where = str(snapshot) if source == "--snapshot" else str(snapshot.parent)
    topics = shell(source, where, "-c", "ls /image/topics/byName")
    assert (topics.returncode, topics.stdout) == (0, "audit\n"), topics.stderr
    assert ("4 record(s) do not apply to the image and were left out, as Kafka's loader leaves them out: "
            "1 RemoveAccessControlEntryRecord, 1 RemoveDelegationTokenRecord, 1 RemoveUserScramCredentialRecord, "
            "1 UnregisterControllerRecord") in topics.stderr
    rest = shell(source, where, "-c", "ls /image/acls /image/cluster/controllers")
    assert rest.stdout.split() == ["acls:", uuid_str(ACL_ID), "controllers:", "3000"]


def test_the_shell_shows_a_brokers_log_directories_in_kafkas_order(broker_snapshot):
    shown = shell("--snapshot", str(broker_snapshot), "-c", "cat /image/cluster/brokers/1")
    assert shown.returncode == 0, shown.stderr
    assert f"directories=[{uuid_str(HIGH)}, {uuid_str(LOW)}]" in shown.stdout


def test_kraft_metadata_loads_it_too_and_warns_with_the_count(snapshot, caplog):
    from kraft.spark.metadata_view import metadata_image

    with caplog.at_level(logging.WARNING, logger="kraft.spark.metadata_view"):
        image = metadata_image(str(snapshot.parent))
    assert sorted(image.topics_by_name.keys()) == ["audit"]
    assert "4 record(s) do not apply to the image and were left out" in caplog.text


def test_kraft_metadata_shows_a_brokers_log_directories_in_kafkas_order(broker_snapshot):
    from kraft.spark.metadata_view import image_table, metadata_image

    brokers = image_table(metadata_image(str(broker_snapshot.parent)), "brokers").to_pylist()
    assert brokers[0]["logDirs"] == [uuid_str(HIGH), uuid_str(LOW)]


def test_kraft_files_rows_start_with_the_snapshots_header_and_end_with_its_footer(snapshot):
    from kraft.spark.files import KraftFilesReader
    from kraft.spark.options import Options

    reader = KraftFilesReader(Options("kraft-files", {"path": str(snapshot.parent)},
                                      ("startingOffsets", "endingOffsets", "maxPartitionBytes", "decode",
                                       "includeHeaders")))
    rows = [row for partition in reader.partitions() for batch in reader.read(partition)
            for row in batch.to_pylist()]
    assert rows[0]["isControl"] and rows[-1]["isControl"]
    assert (rows[0]["key"], rows[-1]["key"]) == (b"\x00\x00\x00\x03", b"\x00\x00\x00\x04")  # header 3, footer 4
    assert sum(not row["isControl"] for row in rows) == len(kafka_snapshot_records())


def test_a_replica_still_stops_on_a_record_it_cannot_apply(snapshot):
    reader = SnapshotReader.open(snapshot, SnapshotId(END_OFFSET, EPOCH))
    with pytest.raises(MetadataError, match="RemoveAccessControlEntry: no such entry"):
        MetadataCache().load_snapshot(reader.records(), end_offset=END_OFFSET, epoch=EPOCH)
