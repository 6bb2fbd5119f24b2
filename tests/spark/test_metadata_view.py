"""The metadata image at an offset, from files, and as Spark tables."""

import pytest
from pyspark.errors import PySparkException

from kraft.metadata import encode_record, uuid_str
from kraft.metadata.records import FeatureLevelRecord
from kraft.records import SimpleRecord, build_batch
from kraft.spark import TABLES, LogDirError, demo_tables, metadata_frames, metadata_image
from kraft.storage import CorruptLogError, FileLog
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
        spark.read.format("kraft-metadata").option("table", "acls").load(str(metadata.path)).collect()
    assert f"option table is 'acls'; expected one of {list(TABLES)}" in str(e.value)


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
