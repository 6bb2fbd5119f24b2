"""spark.read.format("kraft") and spark.readStream.format("kraft") in a real local[2] Spark
against a real three-voter cluster on loopback."""

import json
from dataclasses import replace

import pyarrow as pa
import pytest

from kraft.cli.cluster_client import leader
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, ConsumerRecord, TopicPartition
from kraft.metadata import decode_record
from kraft.metadata.kafka_form import type_name
from kraft.records.control import ControlType, parse_control_key
from kraft.spark import RECORD_SCHEMA
from kraft.spark.history import HISTORY_SCHEMA
from kraft.spark.live import DataLossError, OffsetRange, read_range
from kraft.spark.live_options import ConsumerSettings
from tests.server.cluster_helpers import back_up_a_snapshot, create_topics, kraft_cli, wait_for

TOPIC = "__cluster_metadata"
TP = TopicPartition(TOPIC, 0)


def committed(cluster: LocalCluster, end: int) -> list[ConsumerRecord]:
    """Every record below `end`, as kraft's own consumer reads them (the reference)."""
    out: list[ConsumerRecord] = []
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        wait_for(lambda: bool(out.extend(consumer.poll(200))) or consumer.position(TP) >= end, what=f"offset {end}")
    return [r for r in out if r.offset < end]


def rows_of(records: list[ConsumerRecord]) -> list[tuple]:
    return [(r.offset, r.leader_epoch, r.is_control, r.key, r.value) for r in records]


def as_rows(df) -> list[tuple]:
    return [(r.offset, r.leaderEpoch, r.isControl, r.key, r.value)
            for r in df.orderBy("offset").collect()]


def offsets_json(offset: int, epoch: int | None = None) -> str:
    value = offset if epoch is None else {"offset": offset, "leaderEpoch": epoch}
    return json.dumps({TOPIC: {"0": value}})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("live"), voters=3, observers=0)
    cluster.start()
    try:
        create_topics(cluster, "a", 8)
        old_leader, _ = leader(cluster)
        cluster.kill(old_leader)  # two epochs in the log
        leader(cluster, exclude=(old_leader,))
        create_topics(cluster, "b", 8)
        cluster.start(old_leader)
        yield cluster
    finally:
        cluster.stop()


def read(spark, cluster, **options):
    return spark.read.format("kraft").option("bootstrap.servers", cluster.bootstrap_servers()).options(**options).load()


def test_a_batch_read_is_every_committed_record_split_over_parallel_tasks(spark, cluster):
    hw = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP].offset
    df = read(spark, cluster, endingOffsets=offsets_json(hw), minPartitions=3)
    assert df.schema == RECORD_SCHEMA
    assert df.rdd.getNumPartitions() == 3
    assert as_rows(df) == rows_of(committed(cluster, hw))
    epochs = {r.leaderEpoch for r in df.select("leaderEpoch").distinct().collect()}
    assert len(epochs) >= 2


def test_offset_and_epoch_bounds_read_exactly_that_range(spark, cluster):
    reference = committed(cluster, 30)
    start = reference[9]
    df = read(spark, cluster, startingOffsets=offsets_json(10, start.leader_epoch), endingOffsets=offsets_json(25),
              maxRecordsPerPartition=4)
    assert df.rdd.getNumPartitions() == 4
    assert as_rows(df) == rows_of(reference[10:25])


def test_a_start_whose_epoch_the_log_no_longer_holds_is_data_loss(spark, cluster):
    reference = committed(cluster, 40)
    new_epoch = next(r for r in reference if r.leader_epoch > reference[0].leader_epoch)
    # As if we had read 3 records of the old epoch past where the new one began.
    stale = offsets_json(new_epoch.offset + 3, reference[0].leader_epoch)
    with pytest.raises(Exception, match=f"first diverging offset {new_epoch.offset}"):
        read(spark, cluster, startingOffsets=stale).collect()
    rows = as_rows(read(spark, cluster, startingOffsets=stale, endingOffsets=offsets_json(40), failOnDataLoss="false"))
    assert rows == rows_of(reference[new_epoch.offset:40])


@pytest.mark.parametrize("options, message", [
    ({}, r"option kafka.bootstrap.servers \(or bootstrap.servers\) is required"),
    ({"bootstrap.servers": "127.0.0.1:1", "startingOffsets": "{\"other\": {\"0\": 1}}"}, "exactly the topic"),
    ({"bootstrap.servers": "127.0.0.1:1", "startingOffsets": "[1, 2"}, "option startingOffsets"),
    ({"bootstrap.servers": "127.0.0.1:1", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"bootstrap.servers": "127.0.0.1:1", "subscribes": TOPIC}, "unknown option.*'subscribes'"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.sasl.mechanism": "PLAIN"},
     "sasl.mechanism is set but security.protocol is PLAINTEXT"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
      "kafka.ssl.ca.location": "/no/such/ca.pem", "kafka.sasl.username": "u", "kafka.sasl.password": "p"},
     "ssl.ca.location /no/such/ca.pem does not exist"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "SASL_PLAINTEXT"},
     "sasl.mechanism=GSSAPI is not one kraft speaks"),  # the Java client's default mechanism
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.ssl.keystore.password": "x", "kafka.security.protocol": "SSL"},
     "ssl.keystore.password is not a security setting kraft's clients have"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.group.id": "g"}, "kafka.group.id is not a setting"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.request.timeout.ms": "soon"}, "not an integer"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "bootstrap.servers": "127.0.0.1:2"}, "differ; give one"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "orders"}, r"\['orders'\] have no records to read"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": TOPIC, "assign": '{"x": [0]}'}, "give one of them"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribePattern": "orders.*"}, "matches no topic with records"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "assign": "[0]"}, "option assign is"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "startingOffsetsByTimestamp": '{"x": {"0": 1}}'},
     "option startingOffsetsByTimestamp"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "startingTimestamp": "yesterday"}, "not a timestamp"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "maxTriggerDelay": "soon"}, "option maxTriggerDelay"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "snapshotFallback": "maybe"}, "snapshotFallback"),
])
def test_bad_options_fail_with_a_message_that_names_them(spark, options, message):
    with pytest.raises(Exception, match=message):
        spark.read.format("kraft").options(**options).load().collect()


def test_a_topic_without_records_and_a_backwards_range_are_refused(spark, cluster):
    with pytest.raises(Exception, match=r"topic\(s\) \['a-1'\] have no records to read"):
        read(spark, cluster, topic="a-1").collect()
    with pytest.raises(Exception, match=r"assign names partition\(s\) \[3\]"):
        read(spark, cluster, assign=json.dumps({TOPIC: [3]})).collect()
    with pytest.raises(Exception, match="is before startingOffsets"):
        read(spark, cluster, startingOffsets=offsets_json(20), endingOffsets=offsets_json(10)).collect()


def test_a_task_stops_at_a_record_newer_than_the_epoch_its_range_was_planned_in(cluster):
    """read_range, the function each Spark task runs: a record of an epoch above the
    range's bound can only have replaced the planned history."""
    reference = committed(cluster, 40)
    first_epoch = reference[0].leader_epoch
    newer = next(r.offset for r in reference if r.leader_epoch > first_epoch)
    task = OffsetRange(ConsumerSettings(cluster.bootstrap_servers()), TOPIC, 0, 0, None, 40, first_epoch, True)
    with pytest.raises(DataLossError, match=f"offset {newer} now holds a record of epoch"):
        list(read_range(task))
    rows = pa.Table.from_batches(list(read_range(replace(task, fail_on_data_loss=False)))).column("offset")
    assert rows.to_pylist() == list(range(newer))


def test_a_task_whose_start_the_log_no_longer_holds_is_data_loss(cluster):
    """In the task: LogTruncationError from its consumer (a start past the end of its
    epoch), and OffsetOutOfRangeError (a start past the log end)."""
    reference = committed(cluster, 40)
    first_epoch = reference[0].leader_epoch
    newer = next(r.offset for r in reference if r.leader_epoch > first_epoch)
    stale = OffsetRange(ConsumerSettings(cluster.bootstrap_servers()), TOPIC, 0, newer + 3, first_epoch, 40, 100, True)
    with pytest.raises(DataLossError, match=f"truncated below offset {newer + 3} .first diverging offset {newer}"):
        list(read_range(stale))
    assert list(read_range(replace(stale, fail_on_data_loss=False))) == []
    hw = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP].offset
    gone = OffsetRange(ConsumerSettings(cluster.bootstrap_servers()), TOPIC, 0, hw + 1000, None, hw + 1010, 100, True)
    with pytest.raises(DataLossError, match=f"offset {hw + 1000} is no longer in the log"):
        list(read_range(gone))


def stream(spark, cluster, sink, checkpoint, where: str = "true", **options):
    """An availableNow query from `cluster` into Parquet at `sink`; returns its progress."""
    query = start_stream(spark, cluster, sink, checkpoint, where, options).trigger(availableNow=True).start()
    query.awaitTermination()
    return query.recentProgress


def start_stream(spark, cluster, sink, checkpoint, where: str, options: dict):
    df = (spark.readStream.format("kraft").option("bootstrap.servers", cluster.bootstrap_servers())
          .option("startingOffsets", "earliest").options(**options).load().where(where))
    return df.writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))


def batch_size(cluster: LocalCluster) -> int:
    """maxOffsetsPerTrigger for about five micro-batches over the log as it is now: the
    controller's idle NoOps grow the log with the time the module's cluster has run, so a
    fixed size made the number of batches (each a Spark job) grow with the machine's load."""
    return max(7, Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP].offset // 5)


def end_of(progress) -> int:
    end = progress[-1]["sources"][0]["endOffset"]
    return (json.loads(end) if isinstance(end, str) else end)[TOPIC]["0"]["offset"]


def test_a_restart_after_a_failed_micro_batch_writes_each_record_once(spark, cluster, tmp_path):
    """A micro-batch fails halfway (a task raises at one offset); the restart from the
    checkpoint reads that batch's range again, and the sink ends with every committed
    record once: nothing of the failed attempt, no gap."""
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    per = batch_size(cluster)
    fail_at = 2 * per + 3  # inside the third micro-batch, not at its start
    with pytest.raises(Exception, match=f"injected failure at offset {fail_at}"):
        stream(spark, cluster, sink, checkpoint, maxOffsetsPerTrigger=per,
               where=f"assert_true(offset != {fail_at}, 'injected failure at offset {fail_at}') IS NULL")
    written = sorted(r.offset for r in spark.read.parquet(str(sink)).select("offset").collect())
    assert written == list(range(fail_at - 3))  # the batches before the failed one, whole
    end = end_of(stream(spark, cluster, sink, checkpoint, maxOffsetsPerTrigger=per))
    assert as_rows(spark.read.parquet(str(sink))) == rows_of(committed(cluster, end))


def test_a_stream_reads_each_committed_record_once_across_batches_and_restarts(spark, cluster, tmp_path):
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    before = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP].offset
    per = batch_size(cluster)
    progress = stream(spark, cluster, sink, checkpoint, maxOffsetsPerTrigger=per)
    end = progress[-1]["sources"][0]["endOffset"]
    end = (json.loads(end) if isinstance(end, str) else end)[TOPIC]["0"]
    assert end["offset"] >= before and end["leaderEpoch"] >= 1
    batches = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert len(batches) == -(-end["offset"] // per) and max(batches) == per and sum(batches) == end["offset"]
    hw = create_topics(cluster, "c", 3)
    progress = stream(spark, cluster, sink, checkpoint)  # restarts from the checkpoint
    end = progress[-1]["sources"][0]["endOffset"]
    end = (json.loads(end) if isinstance(end, str) else end)[TOPIC]["0"]["offset"]
    assert end >= hw  # and past it the controller's idle NoOps, which the stream reads too
    got = as_rows(spark.read.parquet(str(sink)))
    assert got == rows_of(committed(cluster, end))


SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": "3000",
             "metadata.snapshot.min.changed_records.ratio": "0"}


def test_a_stream_across_a_truncation_fails_or_resumes_at_the_divergence(spark, tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=SNAPSHOTS)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    try:
        cluster.start()
        create_topics(cluster, "early", 30)
        backup, snapshot_end = back_up_a_snapshot(cluster, leader(cluster)[0], tmp_path)
        old_hw = create_topics(cluster, "late", 20)
        stream(spark, cluster, sink, checkpoint)
        old = [r.offset for r in spark.read.parquet(str(sink)).orderBy("offset").collect()]
        # From the log start offset (before it: snapshots) to the high watermark, which broker
        # registrations may have moved past old_hw meanwhile.
        assert old == list(range(old[0], old[-1] + 1)) and old[-1] + 1 >= old_hw > snapshot_end
        cluster.stop()
        for node in cluster.nodes.values():
            kraft_cli("restore", "--snapshot", str(backup), "--config", str(node.config_path), "--epoch", "100")
        cluster.start()
        new_hw = create_topics(cluster, "restored", 3)

        with pytest.raises(Exception, match=f"first diverging offset {snapshot_end}"):
            stream(spark, cluster, sink, checkpoint)
        assert spark.read.parquet(str(sink)).count() == len(old)  # nothing of the new history

        progress = stream(spark, cluster, sink, checkpoint, failOnDataLoss="false")
        # The loss is in the query's progress too, not only in the driver's log.
        reported = [json.loads(p["sources"][0]["latestOffset"]) for p in progress if p["sources"][0]["latestOffset"]]
        losses = [loss for r in reported for loss in r.get("dataLoss", [])]
        assert len(losses) == 1 and f"first diverging offset {snapshot_end}" in losses[0], reported
        rows = spark.read.parquet(str(sink)).orderBy("offset", "leaderEpoch").collect()
        new = [r.offset for r in rows if r.leaderEpoch >= 101]
        # From the divergence on, every offset once, up to a high watermark that broker
        # heartbeats after the restore may have moved past new_hw.
        assert new == list(range(snapshot_end, new[-1] + 1)) and new[-1] + 1 >= new_hw
        assert len(rows) == len(old) + len(new)
    finally:
        cluster.stop()



def test_a_running_stream_goes_on_from_the_divergence_when_the_cluster_is_restored_under_it(spark, tmp_path):
    """The query runs on (a trigger every 300 ms) while the cluster is stopped, restored
    from an older snapshot in a new epoch, and started again. With failOnDataLoss=false its
    next micro-batch finds its position gone and reads the new history from the
    divergence: every old offset once, every new one once, nothing between skipped."""
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=SNAPSHOTS)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    query = None
    try:
        cluster.start()
        create_topics(cluster, "early", 30)
        backup, snapshot_end = back_up_a_snapshot(cluster, leader(cluster)[0], tmp_path)
        old_hw = create_topics(cluster, "late", 20)
        query = start_stream(spark, cluster, sink, checkpoint, "true", {"failOnDataLoss": "false"}).trigger(
            processingTime="300 milliseconds").start()

        def offsets(epochs: range) -> list[int]:
            rows = spark.read.schema(RECORD_SCHEMA).parquet(str(sink)).where(f"leaderEpoch >= {epochs.start} and leaderEpoch < {epochs.stop}")
            return sorted(r.offset for r in rows.select("offset").collect())

        old_epochs = range(0, 100)
        wait_for(lambda: offsets(old_epochs)[-1:] >= [old_hw - 1], timeout=60, what="the old log read")
        cluster.stop()
        for node in cluster.nodes.values():
            kraft_cli("restore", "--snapshot", str(backup), "--config", str(node.config_path), "--epoch", "100")
        cluster.start()
        new_hw = create_topics(cluster, "restored", 3)
        new_epochs = range(101, 1 << 31)
        wait_for(lambda: offsets(new_epochs)[-1:] >= [new_hw - 1], timeout=90, what="the new history read")
        query.stop()
        assert query.exception() is None
        old, new = offsets(old_epochs), offsets(new_epochs)
        assert old == list(range(old[0], old[-1] + 1)) and old[-1] + 1 >= old_hw > snapshot_end
        assert new == list(range(snapshot_end, new[-1] + 1))
    finally:
        if query is not None and query.isActive:
            query.stop()
        cluster.stop()


def history_reference(records: list[ConsumerRecord]) -> list[tuple]:
    """(offset, epoch, type) of committed records, typed by kraft's own decoders."""
    out = []
    for r in records:
        kind = ControlType(parse_control_key(r.key)).name if r.is_control else type_name(type(decode_record(r.value)))
        out.append((r.offset, r.leader_epoch, kind))
    return out


def history_rows(df) -> list[tuple]:
    return [(r.offset, r.leaderEpoch, r.type, r.topic, r.partition) for r in df.orderBy("offset").collect()]


def test_the_decoded_history_of_a_live_cluster_names_topics_in_every_task(spark, cluster):
    hw = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP].offset
    df = read(spark, cluster, decode="metadata", endingOffsets=offsets_json(hw), maxRecordsPerPartition=10)
    assert df.schema == HISTORY_SCHEMA and df.rdd.getNumPartitions() > 3
    rows = history_rows(df)
    assert [r[:3] for r in rows] == history_reference(committed(cluster, hw))
    created = {r[3] for r in rows if r[2] == "PARTITION_RECORD"}
    assert created >= {f"{t}-{i}" for t in "ab" for i in range(8)}  # each named, whichever task read it
    assert None not in created
    topic = df.where("type = 'TOPIC_RECORD' AND topic = 'b-3'").first()
    assert json.loads(topic.fields) == {"name": "b-3", "topicId": topic.topicId}
    assert {r[2] for r in rows} >= {"LEADER_CHANGE", "REGISTER_BROKER_RECORD", "FEATURE_LEVEL_RECORD", "TOPIC_RECORD"}


def test_a_stream_of_the_decoded_history_is_the_batch_history(spark, cluster, tmp_path):
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    end = end_of(stream(spark, cluster, sink, checkpoint, maxOffsetsPerTrigger=25, decode="metadata"))
    streamed = history_rows(spark.read.schema(HISTORY_SCHEMA).parquet(str(sink)))
    assert streamed == history_rows(read(spark, cluster, decode="metadata", endingOffsets=offsets_json(end)))
    assert all(topic for kind, topic in ((r[2], r[3]) for r in streamed) if kind == "PARTITION_RECORD")
