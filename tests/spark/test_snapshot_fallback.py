"""Spark readers behind the log start, in a real local[2] Spark against a real cluster whose
snapshots are small and frequent and whose retention keeps only the latest: without
snapshotFallback they meet failOnDataLoss; with it they go on from the snapshot, and a
lagging stream loses no offset (each is in a log row or covered by a snapshot's rows)."""

import json
import time

import pytest

from kraft.records.control import ControlType, parse_control_key
from kraft.spark.history import HISTORY_SCHEMA
from kraft.spark.rows import RECORD_SCHEMA
from tests.server.cluster_helpers import METADATA_TP, QUIET, create_topics, log_ends, trimmed_cluster, wait_for

TOPIC = "__cluster_metadata"
TP = METADATA_TP


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory):
    """A cluster whose log start retention moved past offset 0, and the topics created; quiet
    (no idle NoOps), so the log comes to rest when nothing is written and a stream can catch up."""
    with trimmed_cluster(tmp_path_factory.mktemp("trimmed"), **QUIET) as found:
        yield found


def read(spark, cluster, **options):
    return (spark.read.format("kraft").option("kafka.bootstrap.servers", cluster.bootstrap_servers())
            .option("startingOffsets", json.dumps({TOPIC: {"0": 0}})).options(**options).load())


def covered(rows) -> tuple[list[int], set[int]]:
    """The log rows' offsets, and the offsets the snapshot rows cover ([0, end) each)."""
    log = sorted(r.offset for r in rows if r.snapshot is None)
    snapshots = {r.snapshot.endOffset for r in rows if r.snapshot is not None}
    return log, {o for end in snapshots for o in range(end)}


def test_a_batch_read_from_before_the_log_start_fails_skips_or_reads_the_snapshot(spark, trimmed):
    cluster, names = trimmed
    start, hw = log_ends(cluster)
    with pytest.raises(Exception, match=r"offset 0 is outside the log .* snapshotFallback=true"):
        read(spark, cluster).collect()
    skipped = read(spark, cluster, failOnDataLoss="false", endingOffsets=json.dumps({TOPIC: {"0": hw}}))
    assert [r.offset for r in skipped.orderBy("offset").collect()] == list(range(start, hw))  # from the log start

    rows = read(spark, cluster, snapshotFallback="true", endingOffsets=json.dumps({TOPIC: {"0": hw}})).collect()
    snapshot = [r for r in rows if r.snapshot is not None]
    sid = snapshot[0].snapshot
    assert {(r.offset, r.leaderEpoch, r.snapshot) for r in snapshot} == {(sid.endOffset - 1, sid.epoch, sid)}
    kinds = [ControlType(parse_control_key(r.key)) for r in snapshot if r.isControl]
    assert kinds == [ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER]  # one whole snapshot, in order
    log, state = covered(rows)
    assert log == list(range(sid.endOffset, hw)) and state | set(log) >= set(range(hw))
    earliest = (spark.read.format("kraft").option("kafka.bootstrap.servers", cluster.bootstrap_servers())
                .option("snapshotFallback", "true").option("endingOffsets", json.dumps({TOPIC: {"0": hw}})).load())
    assert earliest.schema == RECORD_SCHEMA and earliest.where("snapshot IS NOT NULL").count() > 0  # as kraft-files


def test_the_decoded_history_names_topics_created_before_the_log_start(spark, trimmed):
    cluster, names = trimmed
    df = read(spark, cluster, snapshotFallback="true", decode="metadata")
    assert df.schema == HISTORY_SCHEMA
    partitions = df.where("type = 'PARTITION_RECORD'").select("topic").collect()
    assert None not in {r.topic for r in partitions} and {r.topic for r in partitions} >= set(names)


def test_a_lagging_stream_loses_no_offset_to_retention(spark, trimmed, tmp_path):
    """A stream of 5 offsets a trigger falls behind topics created as fast as the cluster
    takes them; retention moves the log start past the stream's position (waited for, not
    assumed), the stream goes on from a snapshot, and once the writing stops it catches
    up: every offset below the high watermark is in a log row or covered by a snapshot."""
    cluster, _ = trimmed
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    query = (spark.readStream.format("kraft").option("kafka.bootstrap.servers", cluster.bootstrap_servers())
             .option("startingOffsets", "earliest").option("snapshotFallback", "true")
             .option("maxOffsetsPerTrigger", 5).load()
             .writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="200 milliseconds").start())
    try:
        def position() -> int:
            progress = query.lastProgress
            end = progress["sources"][0]["endOffset"] if progress else None
            return json.loads(end)[TOPIC]["0"]["offset"] if end else -1

        wait_for(lambda: position() >= 0, timeout=60, what="the stream's first micro-batch")
        created = 0
        deadline = time.monotonic() + 120
        while log_ends(cluster)[0] <= position():  # until retention passed what the stream has read
            assert time.monotonic() < deadline, "the log start never passed the stream"
            create_topics(cluster, f"lag{created}", 1)
            created += 1
        hw = log_ends(cluster)[1]
        wait_for(lambda: position() >= hw, timeout=120, what=f"the stream to reach {hw}")
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.read.schema(RECORD_SCHEMA).parquet(str(sink)).collect()
    log, state = covered(rows)
    assert len(log) == len(set(log))  # the log rows once each
    assert set(range(hw)) <= set(log) | state, sorted(set(range(hw)) - set(log) - state)[:20]
    assert any(r.snapshot is not None and r.snapshot.endOffset > min(log) for r in rows)  # it fell behind, and back
