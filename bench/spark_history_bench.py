"""The decoded metadata history (`kraft-files` with decode=metadata) against Spark's Parquet
reader, on the same rows.

A Kafka-shaped metadata log of about 1 000 000 records is written with FileLog: bootstrap
features and controllers, 100 brokers (RegisterBrokerRecord v3 with log dirs), 20 000 topics
of 10 partitions each created a batch per topic (TopicRecord, PartitionRecords v1 with
directories, a ConfigRecord), then partition changes in batches of 1 to 100 (ISR shrinks and
expansions, leader moves, some ELR at v2), broker registration changes, NoOps, producer-id
blocks, and a LeaderChange per 1000 batches. The history is read with
spark.read.format("kraft-files").option("decode", "metadata"), written to Parquet by Spark
and read back with spark.read.parquet. Every read runs the same query, which touches every
column (Parquet would otherwise skip the columns a query does not name), and must give the
same answer; the time is the best of ROUNDS, the readers taking turns. Each read of the
source includes its planning (the driver's pass over the log for topic names). kraft-files'
Kafka rows of the same log are timed too: the difference is what decoding costs.

The readers run twice: in local[2] (tasks in the driver's JVM), then on a Spark standalone
cluster on this machine (kraft.spark.standalone: a master and a worker of 2 cores, tasks in
an executor JVM the worker starts, the driver in this process), as a cluster runs them.
"""

import random
import shutil
import sys
import time
from pathlib import Path

from common import RESULTS, print_table, write_results
from spark_bench import ROUNDS, best_interleaved

import kraft.spark
from kraft.metadata import encode_record
from kraft.metadata.image import METADATA_VERSION
from kraft.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
)
from kraft.records import LeaderChangeMessage, SimpleRecord, build_batch, build_control_batch
from kraft.spark.standalone import standalone_cluster
from kraft.storage import FileLog

RECORDS = 1_000_000
BROKERS = 100
TOPICS = 20_000
PARTITIONS = 10
T0 = 1_700_000_000_000

QUERY = [
    "count(*) AS records",
    "max(offset) AS last_offset",
    "sum(leaderEpoch) AS epochs",
    "max(timestamp) AS last_timestamp",
    "count(snapshot) AS snapshot_rows",
    "sum(CAST(isControl AS INT)) AS controls",
    "count(DISTINCT type) AS types",
    "sum(version) AS versions",
    "sum(length(fields)) AS json_bytes",
    "sum(length(value)) AS value_bytes",
    "count(topic) AS named",
    "count(DISTINCT topicId) AS topic_ids",
    "sum(partition) AS partitions",
    "sum(leader) AS leaders",
    "sum(size(isr)) AS isr",
    "sum(size(replicas)) AS replicas",
    "sum(broker) AS brokers",
]
RAW_QUERY = ["count(*) AS records", "sum(length(value)) AS value_bytes", "max(offset) AS last_offset"]
READERS = ("kraft-files, decode=metadata", "parquet of the same rows (baseline)", "kraft-files, Kafka rows")


def kafka_shaped_batches(rng: random.Random) -> list[list]:
    """The log's batches (lists of records; a LeaderChangeMessage alone is a control batch)."""
    dirs = [rng.randbytes(16) for _ in range(3)]
    listener = (BrokerEndpoint(name="PLAINTEXT", host="broker", port=9092),)
    out: list[list] = [[LeaderChangeMessage(1, (1, 2, 3), (1, 2, 3))],
                       [FeatureLevelRecord(name=METADATA_VERSION, feature_level=21),
                        *(RegisterControllerRecord(controller_id=c, incarnation_id=rng.randbytes(16)) for c in (1, 2, 3))]]
    out += [[RegisterBrokerRecord(broker_id=b, incarnation_id=rng.randbytes(16), broker_epoch=b, end_points=listener,
                                  rack=f"rack-{b % 3}", log_dirs=tuple(dirs))] for b in range(BROKERS)]
    topics = []
    for t in range(TOPICS):
        topic_id = rng.randbytes(16)
        topics.append(topic_id)
        batch: list = [TopicRecord(name=f"topic-{t:05d}", topic_id=topic_id)]
        for p in range(PARTITIONS):
            replicas = tuple(rng.sample(range(BROKERS), 3))
            batch.append(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas, isr=replicas,
                                         leader=replicas[0], leader_epoch=0, partition_epoch=0, directories=tuple(dirs)))
        batch.append(ConfigRecord(resource_type=2, resource_name=f"topic-{t:05d}", name="retention.ms", value="86400000"))
        out.append(batch)
    written = sum(map(len, out))
    while written < RECORDS:
        batch = []
        for _ in range(rng.choice((1, 1, 2, 5, 20, 100))):
            kind = rng.random()
            if kind < 0.9:
                isr = tuple(rng.sample(range(BROKERS), rng.choice((1, 2, 3))))
                elr = {"eligible_leader_replicas": (rng.randrange(BROKERS),)} if kind < 0.05 else {}
                batch.append(PartitionChangeRecord(partition_id=rng.randrange(PARTITIONS), topic_id=rng.choice(topics),
                                                   isr=isr, leader=isr[0] if kind < 0.5 else -2, **elr))
            elif kind < 0.97:
                batch.append(BrokerRegistrationChangeRecord(broker_id=rng.randrange(BROKERS), broker_epoch=1,
                                                            fenced=rng.choice((1, -1))))
            elif kind < 0.99:
                batch.append(NoOpRecord())
            else:
                batch.append(ProducerIdsRecord(broker_id=rng.randrange(BROKERS), broker_epoch=1,
                                               next_producer_id=1000 * written))
        out.append(batch)
        written += len(batch)
        if len(out) % 1000 == 0:
            out.append([LeaderChangeMessage(1 + len(out) // 1000 % 3, (1, 2, 3), (1, 2, 3))])
    return out


def write_log(directory: Path) -> int:
    log = FileLog(directory)
    epoch, count = 1, 0
    for i, records in enumerate(kafka_shaped_batches(random.Random(15))):
        timestamp = T0 + 10 * i
        if isinstance(records[0], LeaderChangeMessage):
            epoch += 1
            data = build_control_batch(records[0], timestamp=timestamp)
        else:
            data = build_batch([SimpleRecord(None, encode_record(r)) for r in records], timestamp=timestamp)
        log.append_as_leader(data, epoch)
        count += len(records)
    log.close()
    return count


def read_all(spark, work: Path) -> list[tuple[float, list, int]]:
    """(best seconds, result, tasks) of the decoded history, its Parquet, and the Kafka rows."""
    history = spark.read.format("kraft-files").option("decode", "metadata").load(str(work))
    parquet = spark.read.parquet(str(work / "history.parquet"))
    raw = spark.read.format("kraft-files").load(str(work))
    timed = best_interleaved([lambda: history.selectExpr(*QUERY).collect(),
                              lambda: parquet.selectExpr(*QUERY).collect(),
                              lambda: raw.selectExpr(*RAW_QUERY).collect()])
    return [(t, result, df.rdd.getNumPartitions()) for (t, result), df in zip(timed, (history, parquet, raw))]


def main() -> int:
    work = RESULTS / "spark-history-bench"
    shutil.rmtree(work, ignore_errors=True)
    log_dir = work / "__cluster_metadata-0"
    start = time.perf_counter()
    records = write_log(log_dir)
    print(f"wrote {records:,} records, {sum(p.stat().st_size for p in log_dir.glob('*.log')) / 1e6:.0f} MB, "
          f"in {time.perf_counter() - start:.0f} s", flush=True)
    measured = {}
    spark = kraft.spark.session("kraft-spark-history-bench")
    try:
        spark.read.format("kraft-files").option("decode", "metadata").load(str(work)).write.parquet(
            str(work / "history.parquet"))
        measured["local[2]"] = read_all(spark, work)
    finally:
        spark.stop()
    with standalone_cluster(work / "spark", cores=2) as master:
        spark = kraft.spark.session("kraft-spark-history-bench", master=master, **{"spark.cores.max": "2"})
        try:
            measured["standalone"] = read_all(spark, work)
        finally:
            spark.stop()
    shutil.rmtree(work)

    rows, ratios, decode_costs = [], {}, {}
    for where, ((t_history, r_history, _), (t_parquet, r_parquet, _), (t_raw, r_raw, _)) in measured.items():
        assert r_history == r_parquet, (where, r_history, r_parquet)
        result = r_history[0].asDict()
        assert result["records"] == r_raw[0]["records"] == records and result["named"] > TOPICS * (PARTITIONS + 1)
        rows += [{"master": where, "reader": name, "seconds": t, "rows_s": records / t, "tasks": n}
                 for name, (t, _, n) in zip(READERS, measured[where])]
        ratios[where] = t_parquet / t_history
        decode_costs[where] = t_history / t_raw
    print(f"{records:,} metadata records ({result['types']} types), best of {ROUNDS}\n")
    print_table(rows, ["master", "reader", "seconds", "rows_s", "tasks"])
    for where, ratio in ratios.items():
        print(f"{where}: ratio = decoded history rows/s / parquet rows/s = {ratio:.2f}; decoding costs "
              f"{decode_costs[where]:.1f}x the Kafka rows' read of the same log")
    print(f"results: {write_results('spark_history', rows, ratio=ratios['standalone'], ratios=ratios, decode_costs=decode_costs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
