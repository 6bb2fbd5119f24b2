"""The "kraft-files" Spark source against Spark's Parquet reader, on the same rows.

A log of 1 000 000 records (100-byte values, batches of 1000) is written with FileLog, read
with spark.read.format("kraft-files"), written to Parquet by Spark, and read back with
spark.read.parquet. Both reads run the same query, which touches every column of every
row (Parquet would otherwise skip the columns a query does not name), in the same local[2]
session; the time is the best of ROUNDS, the readers taking turns, session start-up excluded.
Target (issue 9): kraft-files at least 0.3x Parquet's rows per second.

A third row, for context: a Python data source that does no work per row at all (it yields
one prebuilt Arrow batch of the same rows, over and over). It is the most any Python data
source can reach through Spark, and shows how much of kraft-files' time is its own.
"""

import shutil
import sys
import time
from pathlib import Path

from common import RESULTS, print_table, write_results
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import kraft.spark
from kraft.records import SimpleRecord, build_batch, read_batches
from kraft.spark.rows import DEFAULT_ROWS_PER_ARROW_BATCH, RECORD_SCHEMA, to_arrow
from kraft.storage import FileLog

RECORDS = 1_000_000
PER_BATCH = 1000
VALUE = 100
ROUNDS = 7
TARGET = 0.3

# Every column, so that both sources produce all of it.
QUERY = [
    "count(*) AS records",
    "sum(length(value)) AS value_bytes",
    "count(key) AS keys",
    "count(DISTINCT topic) AS topics",
    "sum(partition) AS partitions",
    "max(offset) AS last_offset",
    "max(timestamp) AS last_timestamp",
    "sum(timestampType) AS timestamp_types",
    "sum(size(headers)) AS headers",
    "max(leaderEpoch) AS epoch",
    "sum(CAST(isControl AS INT)) AS controls",
]


def batch(b: int) -> bytes:
    records = [SimpleRecord(None, bytes([(b + i) % 256]) * VALUE) for i in range(PER_BATCH)]
    return build_batch(records, timestamp=1_700_000_000_000 + b)


def write_log(directory: Path) -> None:
    log = FileLog(directory)
    for b in range(RECORDS // PER_BATCH):
        log.append_as_leader(batch(b), epoch=1 + b // 100)
    log.close()


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


def main() -> int:
    work = RESULTS / "spark-bench"
    shutil.rmtree(work, ignore_errors=True)
    log_dir = work / "__cluster_metadata-0"
    parquet = work / "records.parquet"
    write_log(log_dir)

    spark = kraft.spark.session("kraft-spark-bench")
    spark.dataSource.register(Floor)
    ours = spark.read.format("kraft-files").load(str(log_dir))
    ours.write.parquet(str(parquet))
    theirs = spark.read.parquet(str(parquet))
    floor = spark.read.format("floor").load()

    (t_ours, r_ours), (t_theirs, r_theirs), (t_floor, r_floor) = best_interleaved(
        [lambda df=df: df.selectExpr(*QUERY).collect() for df in (ours, theirs, floor)]
    )
    assert r_ours == r_theirs, (r_ours, r_theirs)
    assert r_ours[0]["records"] == r_floor[0]["records"] == RECORDS and r_ours[0]["value_bytes"] == RECORDS * VALUE
    tasks = [df.rdd.getNumPartitions() for df in (ours, theirs, floor)]
    spark.stop()
    shutil.rmtree(work)

    rows = [
        {"reader": name, "seconds": t, "rows_s": RECORDS / t, "tasks": n}
        for name, t, n in zip(
            ["kraft-files", "parquet (baseline)", "python data source, no work per row"],
            [t_ours, t_theirs, t_floor],
            tasks,
        )
    ]
    ratio = t_theirs / t_ours
    print(f"{RECORDS:,} records of {VALUE} B in batches of {PER_BATCH}, local[2], best of {ROUNDS}\n")
    print_table(rows, ["reader", "seconds", "rows_s", "tasks"])
    print(f"\nratio = kraft-files rows/s / parquet rows/s = {ratio:.2f} (target >= {TARGET})")
    print(f"kraft-files reaches {t_floor / t_ours:.0%} of the rows/s of a Python data source doing no work")
    print(f"results: {write_results('spark', rows, ratio=ratio, target=TARGET)}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
