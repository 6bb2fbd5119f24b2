"""The "kraft" and "kraft-files" Spark sources against Spark's Parquet reader, on the same rows.

A log of 1 000 000 records (100-byte values, each a framed ConfigRecord so that a node can
apply them; batches of 1000) is written with FileLog. A one-voter node is started on a
copy of it, and the log is read with spark.read.format("kraft") from that live node over
Kafka's protocol, and with spark.read.format("kraft-files") from the original directory;
the rows are written to Parquet by Spark and read back with spark.read.parquet. Every read
runs the same query, which touches every column of every row (Parquet would otherwise
skip the columns a query does not name), in the same local[2] session, and must give the
same answer; the time is the best of ROUNDS, the readers taking turns, session start-up
excluded. Target (issue 9): the batch sources at least 0.3x Parquet's rows per second.

A third row, for context: a Python data source that does no work per row at all (it yields
one prebuilt Arrow batch of the same rows, over and over). It is the most any Python data
source can reach through Spark, and shows how much of kraft-files' time is its own.

Then streams (issue 17): spark.readStream.format("kraft") from the live node, from earliest,
with Trigger.AvailableNow into Spark's noop sink, without maxOffsetsPerTrigger (one
micro-batch) and with it (THROTTLES: many micro-batches). Records/s is the rows the query's
progress reports over the wall time from start() to its end; the best of STREAM_ROUNDS, the
settings taking turns. The ratios are each throttled stream's records/s over the unthrottled
one's: what cutting a stream into micro-batches costs.
"""

import json
import shutil
import sys
import time
from pathlib import Path

from common import RESULTS, all_met, goal, print_goals, print_table, write_results
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import kraft.spark
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, ConsumerError, TopicPartition
from kraft.metadata import ConfigResourceType, encode_record
from kraft.metadata.records import ConfigRecord
from kraft.records import SimpleRecord, build_batch, read_batches
from kraft.spark.rows import DEFAULT_ROWS_PER_ARROW_BATCH, RECORD_SCHEMA, to_arrow
from kraft.storage import ElectionState, FileLog, FileQuorumStateStore

RECORDS = 1_000_000
PER_BATCH = 1000
VALUE = 100
ROUNDS = 7
TARGET = 0.3
THROTTLES = (None, 100_000, 10_000)  # maxOffsetsPerTrigger of each stream (None: not set)
STREAM_ROUNDS = 3

# Every column of the default row (Spark's headers column only comes with includeHeaders),
# so that every source produces all of it.
QUERY = [
    "count(*) AS records",
    "sum(length(value)) AS value_bytes",
    "count(key) AS keys",
    "count(DISTINCT topic) AS topics",
    "sum(partition) AS partitions",
    "max(offset) AS last_offset",
    "max(timestamp) AS last_timestamp",
    "sum(timestampType) AS timestamp_types",
    "max(leaderEpoch) AS epoch",
    "sum(CAST(isControl AS INT)) AS controls",
    "count(snapshot) AS snapshot_rows",
]


def config_value(i: int) -> bytes:
    """A ConfigRecord (for a topic no one creates) whose framed bytes are VALUE long."""
    empty = len(encode_record(ConfigRecord(ConfigResourceType.TOPIC, "spark-bench", "k", "")))
    return encode_record(ConfigRecord(ConfigResourceType.TOPIC, "spark-bench", "k", f"{i:0{VALUE - empty}d}"))


VALUES = [config_value(i) for i in range(PER_BATCH)]
LAST_EPOCH = RECORDS // PER_BATCH // 100


def batch(b: int) -> bytes:
    records = [SimpleRecord(None, VALUES[(b + i) % PER_BATCH]) for i in range(PER_BATCH)]
    return build_batch(records, timestamp=1_700_000_000_000 + b)


def write_log(directory: Path) -> None:
    log = FileLog(directory)
    for b in range(RECORDS // PER_BATCH):
        log.append_as_leader(batch(b), epoch=1 + b // 100)
    log.close()


def start_node(work: Path, log_dir: Path) -> LocalCluster:
    """A one-voter node whose log starts as a copy of `log_dir`; returned once it serves
    the first RECORDS offsets as committed. Snapshots are off: a one-voter leader would
    otherwise move its log start past the first one at once (KIP-630)."""
    cluster = LocalCluster(work / "cluster", voters=1, observers=0, overrides={
        "metadata.log.max.record.bytes.between.snapshots": str(2**62),
        "metadata.log.max.snapshot.interval.ms": "0",
    })
    partition = cluster.nodes[1].partition_dir
    shutil.copytree(log_dir, partition)
    FileQuorumStateStore(partition).write(ElectionState(epoch=LAST_EPOCH, voters=(1,)))
    cluster.start()
    tp = TopicPartition("__cluster_metadata", 0)
    deadline = time.monotonic() + 120
    with Consumer(cluster.bootstrap_servers()) as consumer:
        while True:
            try:
                if consumer.end_offsets([tp])[tp].offset >= RECORDS:
                    return cluster
            except ConsumerError:
                pass  # not elected yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"the node did not commit its log; see {cluster.nodes[1].log_path}")
            time.sleep(0.2)


class FloorReader(DataSourceReader):
    """Four tasks, each yielding a quarter of the rows as kraft-files does (Arrow batches of
    DEFAULT_ROWS_PER_ARROW_BATCH rows), but the same prebuilt batch every time."""

    TASKS = 4

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.TASKS)]

    def read(self, partition: InputPartition):
        size = DEFAULT_ROWS_PER_ARROW_BATCH
        kafka_batches = read_batches(b"".join(batch(b) for b in range(-(-size // PER_BATCH))))
        arrow = next(to_arrow(kafka_batches, topic="__cluster_metadata", partition=0, rows_per_batch=size))
        left = RECORDS // self.TASKS
        while left:
            yield arrow.slice(0, min(size, left))
            left -= min(size, left)


class Floor(DataSource):
    """Defined in __main__, so Spark ships the class itself to its workers."""

    @classmethod
    def name(cls) -> str:
        return "floor"

    def schema(self):
        return RECORD_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return FloorReader()


def best_interleaved(runs: list) -> list[tuple[float, list]]:
    """Best time and result of each run, the runs taking turns round after round, so that
    a busy moment of the machine falls on all of them alike."""
    times: list[list[float]] = [[] for _ in runs]
    results: list = [None] * len(runs)
    for _ in range(ROUNDS):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            results[i] = run()
            times[i].append(time.perf_counter() - start)
    return [(min(t), r) for t, r in zip(times, results)]


def stream_once(spark, bootstrap: str, checkpoint: Path, throttle: int | None) -> tuple[float, int, int]:
    """(seconds, rows, micro-batches) of one AvailableNow stream of the whole log into noop."""
    reader = (spark.readStream.format("kraft").option("kafka.bootstrap.servers", bootstrap)
              .option("startingOffsets", "earliest"))
    if throttle is not None:
        reader = reader.option("maxOffsetsPerTrigger", throttle)
    shutil.rmtree(checkpoint, ignore_errors=True)
    start = time.perf_counter()
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    # From the last progress, not a sum over recentProgress, which keeps only the last 100.
    last = query.lastProgress
    end = json.loads(last["sources"][0]["endOffset"])["__cluster_metadata"]["0"]["offset"]
    return elapsed, end, last["batchId"] + 1  # the log starts at 0: the end offset is the rows read


def stream_rates(spark, bootstrap: str, work: Path) -> list[dict]:
    """One row per throttle: the best records/s of STREAM_ROUNDS, the throttles taking turns."""
    runs: dict[int | None, list[tuple[float, int, int]]] = {t: [] for t in THROTTLES}
    for _ in range(STREAM_ROUNDS):
        for throttle in THROTTLES:
            runs[throttle].append(stream_once(spark, bootstrap, work / "checkpoint", throttle))
    rows = []
    for throttle, measured in runs.items():
        seconds, records, batches = max(measured, key=lambda m: m[1] / m[0])
        assert records >= RECORDS, (throttle, records)  # the whole log, and what the node added since
        rows.append({"maxOffsetsPerTrigger": throttle or "not set", "micro_batches": batches, "records": records,
                     "seconds": seconds, "records_s": records / seconds})
    return rows


def main() -> int:
    work = RESULTS / "spark-bench"
    shutil.rmtree(work, ignore_errors=True)
    log_dir = work / "__cluster_metadata-0"
    parquet = work / "records.parquet"
    write_log(log_dir)
    cluster = start_node(work, log_dir)
    try:
        spark = kraft.spark.session("kraft-spark-bench")
        spark.dataSource.register(Floor)
        live = (spark.read.format("kraft").option("bootstrap.servers", cluster.bootstrap_servers())
                .option("endingOffsets", json.dumps({"__cluster_metadata": {"0": RECORDS}})).load())
        files = spark.read.format("kraft-files").load(str(log_dir))
        files.write.parquet(str(parquet))
        frames = {
            "kraft (live node)": live,
            "kraft-files": files,
            "parquet (baseline)": spark.read.parquet(str(parquet)),
            "python data source, no work per row": spark.read.format("floor").load(),
        }
        timed = best_interleaved([lambda df=df: df.selectExpr(*QUERY).collect() for df in frames.values()])
        tasks = [df.rdd.getNumPartitions() for df in frames.values()]
        streams = stream_rates(spark, cluster.bootstrap_servers(), work)
        spark.stop()
    finally:
        cluster.stop()
    shutil.rmtree(work)

    (t_live, r_live), (t_files, r_files), (t_parquet, r_parquet), (t_floor, r_floor) = timed
    assert r_live == r_files == r_parquet, (r_live, r_files, r_parquet)
    assert r_files[0]["records"] == r_floor[0]["records"] == RECORDS and r_files[0]["value_bytes"] == RECORDS * VALUE
    rows = [
        {"reader": name, "seconds": t, "rows_s": RECORDS / t, "tasks": n}
        for name, (t, _), n in zip(frames, timed, tasks)
    ]
    goals = [goal(f"rows/s, {name}", RECORDS / t, "rows/s", goal=f">= {TARGET}x the peer's",
                  met=t_parquet / t >= TARGET, peer="Spark's parquet reader, same rows", peer_value=RECORDS / t_parquet)
             for name, t in (("kraft (live node)", t_live), ("kraft-files", t_files))]
    print(f"{RECORDS:,} records of {VALUE} B in batches of {PER_BATCH}, local[2], best of {ROUNDS}\n")
    print_table(rows, ["reader", "seconds", "rows_s", "tasks"])
    print_goals(goals)
    print(f"a Python data source that does no work per row: {t_parquet / t_floor:.2f}x parquet's rows/s")
    print(f"\nstreams of the live log, AvailableNow into noop, best of {STREAM_ROUNDS}\n")
    print_table(streams, ["maxOffsetsPerTrigger", "micro_batches", "records", "seconds", "records_s"])
    unthrottled = streams[0]["records_s"]
    stream_ratios = {str(row["maxOffsetsPerTrigger"]): row["records_s"] / unthrottled for row in streams[1:]}
    for throttle, ratio in stream_ratios.items():
        print(f"ratio = records/s with maxOffsetsPerTrigger {throttle} / without = {ratio:.2f}")
    print(f"results: {write_results('spark', rows, goals, streams=streams, stream_ratios=stream_ratios)}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    sys.exit(main())
