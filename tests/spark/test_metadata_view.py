"""The metadata image at an offset, from files, and as Spark tables."""

import pytest
from pyspark.errors import PySparkException

from kraft.metadata import encode_record, uuid_str
from kraft.metadata.records import FeatureLevelRecord
from kraft.records import SimpleRecord, build_batch
from kraft.spark import TABLES, LogDirError, demo_tables, metadata_frames, metadata_image
from kraft.storage import CorruptLogError, FileLog
from tests.spark.kafka_logs import ACL_READ, DIR_A, DIR_B, DIR_C, PARTITION_DIR, T0, snapshot_only
from tests.spark.logs import undecodable_batch


def test_the_image_at_every_batch_boundary_is_the_one_the_controller_built(metadata):
    (snapshot,) = metadata.path.glob("*.checkpoint")
    assert 0 < int(snapshot.name.split("-")[0]) < max(metadata.images)  # both paths are taken
    for end, image in metadata.images.items():
        assert metadata_image(str(metadata.path), end) == image
    assert metadata_image(str(metadata.path)) == metadata.image


def test_offsets_that_are_not_an_image(metadata):
    ends = sorted(metadata.images)
    inside = next(e + 1 for e, n in zip(ends, ends[1:]) if n - e > 1)
    with pytest.raises(LogDirError, match=f"end offset {inside} falls inside the batch"):
        metadata_image(str(metadata.path), inside)
    with pytest.raises(LogDirError, match="past the end of the log"):
        metadata_image(str(metadata.path), ends[-1] + 1)


def test_the_image_as_tables(spark, metadata):
    image = metadata.image
    frames = metadata_frames(spark, str(metadata.path))
    assert {name: df.schema for name, df in frames.items()} == TABLES
    brokers = frames["brokers"].collect()
    assert [(b.brokerId, b.epoch, b.fenced) for b in brokers] == [
        (i, image.broker(i).epoch, image.broker(i).fenced) for i in (1, 2, 3, 4)
    ]
    assert [b.fenced for b in brokers] == [False, False, True, False]
    assert brokers[0].incarnationId == uuid_str(bytes([1]) * 16) and brokers[0].rack is None
    assert [tuple(e) for e in brokers[1].listeners] == [("PLAINTEXT", "localhost", 9094, 0)]
    topics = {t.name: (t.topicId, t.partitions) for t in frames["topics"].collect()}
    counts = {"audit": 8, "orders": 6, "refunds": 2}
    assert topics == {name: (uuid_str(image.topic(name).id), n) for name, n in counts.items()}
    partitions = frames["partitions"].collect()
    assert len(partitions) == 16
    for p in partitions:
        want = image.topic(p.topic).partitions[p.partition]
        assert (p.leader, p.leaderEpoch, p.partitionEpoch) == (want.leader, want.leader_epoch, want.partition_epoch)
        assert (tuple(p.replicas), tuple(p.isr)) == (want.replicas, want.isr)
        assert 3 not in p.isr or p.isr == [3]  # fenced broker 3 left every ISR it was not alone in
    configs = {(c.resourceType, c.resourceName, c.name): c.value for c in frames["configs"].collect()}
    assert configs == {("TOPIC", "orders", "retention.ms"): "60000", ("TOPIC", "audit", "cleanup.policy"): "compact"}
    assert frames["features"].count() == 0
    assert [tuple(r) for r in frames["producerIds"].collect()] == [(image.next_producer_id,)]
    assert [tuple(r) for r in frames["provenance"].collect()] == [(image.offset, image.epoch, None)]
    for empty in ("controllers", "acls", "clientQuotas", "scramCredentials", "delegationTokens"):
        assert frames[empty].count() == 0, empty


def test_one_table_through_the_kraft_metadata_source(spark, metadata):
    (snapshot,) = metadata.path.glob("*.checkpoint")
    end = int(snapshot.name.split("-")[0])
    df = (
        spark.read.format("kraft-metadata")
        .option("table", "topics")
        .option("endingOffsets", str(end))
        .load(str(metadata.path))
    )
    assert df.schema == TABLES["topics"]
    assert sorted(t.name for t in df.collect()) == ["orders", "payments"]  # payments is deleted later
    with pytest.raises(PySparkException) as e:
        spark.read.format("kraft-metadata").option("table", "quotas").load(str(metadata.path)).collect()
    assert f"option table is 'quotas'; expected one of {list(TABLES)}" in str(e.value)


def test_demo_tables_print_the_log_and_the_image(spark, metadata, capsys):
    demo_tables(spark, str(metadata.path), rows=50)
    out = capsys.readouterr().out
    assert f"kraft-files: {max(metadata.images)} records" in out
    assert "LEADER_CHANGE" in out and "RegisterBrokerRecord" in out and "UnfenceBrokerRecord" in out
    assert "audit" in out and "refunds" in out and "payments" not in out.split("metadata image")[1]


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (undecodable_batch(), CorruptLogError, "corrupt at position"),
        (
            build_batch([SimpleRecord(None, b"\x01\x63\x00")], timestamp=0),
            LogDirError,
            "the batch at offsets 1..1 .* does not apply to the metadata image: .*offset 1: unknown metadata record API key 99",
        ),
    ],
    ids=["undecodable", "unknown-record"],
)
def test_a_batch_that_does_not_decode_or_apply_names_its_file(tmp_path, bad, error, message):
    log = FileLog(tmp_path / "__cluster_metadata-0")
    feature = FeatureLevelRecord(name="metadata.version", feature_level=7)
    log.append_as_leader(build_batch([SimpleRecord(None, encode_record(feature))], timestamp=0), 1)
    log.append_as_leader(bad, 1)
    log.close()
    with pytest.raises(error, match=f"{log.directory / '00000000000000000000.log'}: {message}"):
        metadata_image(str(log.directory))
    assert dict(metadata_image(str(log.directory), 1).features) == {"metadata.version": 7}


def table(spark, path, name, **options):
    """One table through the kraft-metadata source (a Spark job that builds the image)."""
    return [r.asDict(recursive=True) for r in
            spark.read.format("kraft-metadata").option("table", name).options(**options).load(str(path)).collect()]


def test_every_part_of_a_kafka_shaped_image_by_kafkas_replay(spark, kafka):
    """The aborted transaction's topic and config are absent, the committed one's present;
    removals, unregistrations and ClearElr applied; SCRAM shows no salt or key. Every table
    from one image (metadata_frames); the source's own path is checked on two of them."""
    image = kafka.cache.image
    assert metadata_image(str(kafka.root)) == image
    frames = metadata_frames(spark, str(kafka.root))
    assert {name: df.schema for name, df in frames.items()} == TABLES

    def rows(name):
        return [r.asDict(recursive=True) for r in frames[name].collect()]

    for name in ("acls", "partitions"):
        assert table(spark, kafka.root, name) == rows(name)
    brokers = {b["brokerId"]: b for b in rows("brokers")}
    assert sorted(brokers) == [1, 2, 3, 4]  # 5 unregistered
    assert [brokers[b]["fenced"] for b in (1, 2, 3, 4)] == [False] * 4  # BrokerRegistrationChange, Unfence
    assert [brokers[b]["inControlledShutdown"] for b in (1, 2, 3, 4)] == [False, True, False, False]
    assert brokers[1]["logDirs"] == [uuid_str(DIR_A), uuid_str(DIR_B)] and brokers[4]["logDirs"] == [uuid_str(DIR_C)]
    assert brokers[3]["logDirs"] == [] and brokers[1]["rack"] == "rack-1" and not brokers[1]["isMigratingZkBroker"]
    controllers = rows("controllers")
    assert [(c["controllerId"], c["listeners"][0]["port"]) for c in controllers] == [(1, 9093), (2, 9093)]
    assert {t["name"]: t["partitions"] for t in rows("topics")} == {"orders": 3, "payments": 2}
    partitions = {(p["topic"], p["partition"]): p for p in rows("partitions")}
    assert sorted(partitions) == [("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0), ("payments", 1)]
    for (topic, pid), p in partitions.items():
        want = image.topic(topic).partitions[pid]
        assert (p["leader"], p["isr"], p["replicas"], p["leaderEpoch"], p["partitionEpoch"]) == (
            want.leader, list(want.isr), list(want.replicas), want.leader_epoch, want.partition_epoch)
        assert p["directories"] == [uuid_str(d) for d in want.directories]
        assert (p["eligibleLeaderReplicas"], p["lastKnownElr"]) == (
            None if want.eligible_leader_replicas is None else list(want.eligible_leader_replicas),
            None if want.last_known_elr is None else list(want.last_known_elr))
    assert partitions[("orders", 0)]["leader"] == -1 and partitions[("orders", 0)]["replicas"] == [2, 3, 1]
    assert partitions[("orders", 1)]["directories"] == [uuid_str(d) for d in (DIR_B, DIR_B, DIR_C)]
    assert partitions[("orders", 2)]["isr"] == [3] and not partitions[("orders", 2)]["eligibleLeaderReplicas"]
    configs = {(c["resourceType"], c["resourceName"], c["name"]): c["value"] for c in rows("configs")}
    assert configs == {("TOPIC", "orders", "retention.ms"): "60000", ("BROKER", "1", "log.cleaner.threads"): '4 "quoted"\n'}
    assert {f["name"]: f["level"] for f in rows("features")} == {"metadata.version": 21,
                                                                                    "group.version": 1}
    assert rows("acls") == [{
        "id": uuid_str(ACL_READ), "resourceType": "TOPIC", "resourceName": "orders", "patternType": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]
    quotas = {tuple((e["entityType"], e["entityName"]) for e in q["entity"]) + (q["key"],): q["value"]
              for q in rows("clientQuotas")}
    assert quotas == {(("user", "alice"), "request_percentage"): 50.0,
                      (("client-id", "app"), ("user", None), "consumer_byte_rate"): 2048.5}  # by type
    assert rows("scramCredentials") == [
        {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096}]
    (token,) = rows("delegationTokens")
    assert (token["tokenId"], token["owner"], token["renewers"]) == ("token-1", "User:alice", ["User:bob", "User:carol"])
    assert round(token["expirationTimestamp"].timestamp() * 1000) == T0 + 86_400_000
    assert rows("producerIds") == [{"nextProducerId": 2000}]
    assert rows("provenance") == [{"offset": image.offset, "epoch": 3, "zkMigrationState": 0}]


def test_the_image_inside_and_after_a_transaction(kafka):
    """An image exists only where no transaction is open: the one before the Begin holds
    neither payments nor ghost; the one after the End holds payments; after the Abort, no ghost."""
    begin, end, abort = (next(r.offset for r in kafka.rows if r.type == t)
                         for t in ("BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"))
    before = metadata_image(str(kafka.root), begin)
    assert before.topic("payments") is None and before.topic("ghost") is None
    assert sorted(metadata_image(str(kafka.root), end + 1).topics_by_name.keys()) == ["doomed", "orders", "payments"]
    assert metadata_image(str(kafka.root), abort + 1).topic("ghost") is None


def test_a_metadata_log_dir_and_a_snapshot_backup_read_as_the_partition_directory(spark, kafka, tmp_path):
    assert metadata_image(str(kafka.path)) == metadata_image(str(kafka.root))
    backup = snapshot_only(kafka, tmp_path / "backup")
    (snapshot,) = (backup / PARTITION_DIR).glob("*.checkpoint")
    end = int(snapshot.name.split("-")[0])
    for path in (backup, backup / PARTITION_DIR):
        assert metadata_image(str(path)) == kafka.images[end]
        assert {t["name"] for t in table(spark, path, "topics")} == {"orders", "doomed"}
    with pytest.raises(LogDirError, match=f"end offset {end + 1} is past the end of the log .{end}."):
        metadata_image(str(backup), end + 1)
    with pytest.raises(LogDirError, match="nor a metadata.log.dir holding __cluster_metadata-0"):
        metadata_image(str(tmp_path))
