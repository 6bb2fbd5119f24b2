"""Code written for Spark's own Kafka source (`format("kafka")`, option names and values as
Spark's documentation writes them) runs unchanged against `format("kraft")`, in a real
local[2] Spark against a real three-voter cluster; and the options with a meaning of their
own (offsets by timestamp, minOffsetsPerTrigger, includeHeaders) do what Spark's do."""

import json

import pytest
from pyspark.sql.streaming.datasource import ReadMinRows

from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, ConsumerRecord, TopicPartition
from kraft.spark.live import KraftDataSource
from tests.server.cluster_helpers import create_topics, wait_for

TOPIC = "__cluster_metadata"
TP = TopicPartition(TOPIC, 0)


# ------------------------------------------------------------------ code written for format("kafka")

def kafka_batch(spark, source: str, servers: str):
    df = (spark.read.format(source)
          .option("kafka.bootstrap.servers", servers)
          .option("subscribe", "__cluster_metadata")
          .option("startingOffsets", "earliest")
          .option("endingOffsets", "latest")
          .option("includeHeaders", "true")
          .option("kafka.client.id", "reports")
          .option("kafka.request.timeout.ms", "20000")
          .load())
    return df.selectExpr("CAST(key AS STRING) AS key", "value", "headers", "topic", "partition", "offset",
                         "timestamp", "timestampType")


def kafka_window(spark, source: str, servers: str, start_ms: int, end_ms: int):
    return (spark.read.format(source)
            .option("kafka.bootstrap.servers", servers)
            .option("assign", json.dumps({"__cluster_metadata": [0]}))
            .option("startingOffsetsByTimestamp", json.dumps({"__cluster_metadata": {"0": start_ms}}))
            .option("endingOffsetsByTimestamp", json.dumps({"__cluster_metadata": {"0": end_ms}}))
            .load()
            .select("offset", "timestamp"))


def kafka_stream(spark, source: str, servers: str, sink: str, checkpoint: str):
    df = (spark.readStream.format(source)
          .option("kafka.bootstrap.servers", servers)
          .option("subscribePattern", "__cluster_.*")
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 10)
          .option("minOffsetsPerTrigger", 1)
          .option("maxTriggerDelay", "5s")
          .option("failOnDataLoss", "false")
          .load())
    query = (df.selectExpr("CAST(value AS STRING) AS text", "offset", "timestamp")
             .writeStream.format("parquet").option("path", sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return query.recentProgress


# ------------------------------------------------------------------ the same against kraft

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("kafka-options"), voters=3, observers=0)
    cluster.start()
    try:
        create_topics(cluster, "orders", 6)
        yield cluster
    finally:
        cluster.stop()


def committed(cluster: LocalCluster) -> list[ConsumerRecord]:
    """Every committed record up to the high watermark now, as kraft's own consumer reads them."""
    out: list[ConsumerRecord] = []
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        hw = consumer.end_offsets([TP])[TP].offset
        wait_for(lambda: bool(out.extend(consumer.poll(200))) or consumer.position(TP) >= hw, what=f"offset {hw}")
    return [r for r in out if r.offset < hw]


def test_a_batch_read_written_for_spark_kafka_source_runs_unchanged(spark, cluster):
    reference = committed(cluster)
    df = kafka_batch(spark, "kraft", cluster.bootstrap_servers())
    assert df.columns == ["key", "value", "headers", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.orderBy("offset").collect()
    assert [(r.offset, r.value, r.headers) for r in rows[:len(reference)]] == [
        (r.offset, r.value, list(r.headers)) for r in reference]
    assert {(r.topic, r.partition) for r in rows} == {(TOPIC, 0)}
    assert "headers" not in spark.read.format("kraft").option("kafka.bootstrap.servers", cluster.bootstrap_servers()) \
        .load().columns  # only when asked, as Spark's Kafka source


def test_offsets_by_timestamp_are_the_first_records_at_or_after_each_time(spark, cluster):
    reference = committed(cluster)
    start, end = reference[len(reference) // 4], reference[3 * len(reference) // 4]
    df = kafka_window(spark, "kraft", cluster.bootstrap_servers(), start.timestamp, end.timestamp)
    first = next(r.offset for r in reference if r.timestamp >= start.timestamp)
    stop = next(r.offset for r in reference if r.timestamp >= end.timestamp)
    assert [r.offset for r in df.orderBy("offset").collect()] == list(range(first, stop))
    # No record that recent: Spark's strategies, "error" by default, or start at the latest.
    future = end.timestamp + 3_600_000
    with pytest.raises(Exception, match=f"no record at or after timestamp {future}"):
        kafka_window(spark, "kraft", cluster.bootstrap_servers(), future, future).collect()
    latest = (spark.read.format("kraft").option("kafka.bootstrap.servers", cluster.bootstrap_servers())
              .option("startingTimestamp", str(future)).option("startingOffsetsByTimestampStrategy", "latest")
              .load())
    assert latest.count() == 0
    everything = (spark.read.format("kraft").option("kafka.bootstrap.servers", cluster.bootstrap_servers())
                  .option("startingTimestamp", "0").option("endingTimestamp", str(future)).load())
    assert everything.count() >= len(reference)


def test_a_stream_written_for_spark_kafka_source_runs_unchanged(spark, cluster, tmp_path):
    reference = committed(cluster)
    progress = kafka_stream(spark, "kraft", cluster.bootstrap_servers(), str(tmp_path / "sink"),
                            str(tmp_path / "checkpoint"))
    offsets = sorted(r.offset for r in spark.read.parquet(str(tmp_path / "sink")).select("offset").collect())
    assert offsets == list(range(len(offsets))) and len(offsets) >= len(reference)
    assert max(p["numInputRows"] for p in progress) == 10  # maxOffsetsPerTrigger


def test_min_offsets_per_trigger_holds_a_micro_batch_back_until_enough_are_new(cluster):
    """The reader as Spark drives it: the first trigger runs at once (Spark's rule); then
    fewer new offsets than minOffsetsPerTrigger run nothing (latestOffset returns the
    start) until enough are there, or maxTriggerDelay passed since the last run."""
    def reader(**options):
        source = KraftDataSource({"kafka.bootstrap.servers": cluster.bootstrap_servers(),
                                  "startingOffsets": "earliest", **options})
        return source.streamReader(source.schema())

    waiting = reader(minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    try:
        limit = waiting.getDefaultReadLimit()
        assert limit == ReadMinRows(5)
        start = waiting.initialOffset()
        first = waiting.latestOffset(start, limit)
        assert first != start
        assert waiting.latestOffset(first, limit) == first  # nothing new yet
        create_topics(cluster, "more", 3)  # a handful of records each: enough
        later = waiting.latestOffset(first, limit)
        assert later[TOPIC]["0"]["offset"] >= first[TOPIC]["0"]["offset"] + 5
    finally:
        waiting.stop()
    never_waits = reader(minOffsetsPerTrigger="1000000", maxTriggerDelay="0ms")
    try:
        start = never_waits.initialOffset()
        first = never_waits.latestOffset(start, never_waits.getDefaultReadLimit())
        create_topics(cluster, "late", 1)
        assert never_waits.latestOffset(first, never_waits.getDefaultReadLimit()) != first  # the delay has passed
    finally:
        never_waits.stop()
