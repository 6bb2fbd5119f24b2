"""The "kraft-files" Spark source against Spark's Parquet reader, on the same rows.

A log of 1 000 000 records (100-byte values, batches of 1000) is written with FileLog, read
with spark.read.format("kraft-files"), written to Parquet by Spark, and read back with
spark.read.parquet. Both reads run the same query, which touches every column of every
row (Parquet would otherwise skip the columns a query does not name), in the same local[2]
session; the time is the best of ROUNDS, session start-up excluded.
Target (issue 9): kraft-files at least 0.3x Parquet's rows per second.
"""

import shutil
import sys
import time
from pathlib import Path

from common import RESULTS, print_table, write_results

import kraft.spark
from kraft.records import SimpleRecord, build_batch
from kraft.storage import FileLog

RECORDS = 1_000_000
PER_BATCH = 1000
VALUE = 100
ROUNDS = 5
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


def write_log(directory: Path) -> None:
    log = FileLog(directory)
    for b in range(RECORDS // PER_BATCH):
        records = [SimpleRecord(None, bytes([(b + i) % 256]) * VALUE) for i in range(PER_BATCH)]
        log.append_as_leader(build_batch(records, timestamp=1_700_000_000_000 + b), epoch=1 + b // 100)
    log.close()


def best(run) -> tuple[float, list]:
    times, result = [], None
    for _ in range(ROUNDS):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    work = RESULTS / "spark-bench"
    shutil.rmtree(work, ignore_errors=True)
    log_dir = work / "__cluster_metadata-0"
    parquet = work / "records.parquet"
    write_log(log_dir)

    spark = kraft.spark.session("kraft-spark-bench")
    ours = spark.read.format("kraft-files").load(str(log_dir))
    ours.write.parquet(str(parquet))
    theirs = spark.read.parquet(str(parquet))

    t_ours, r_ours = best(lambda: ours.selectExpr(*QUERY).collect())
    t_theirs, r_theirs = best(lambda: theirs.selectExpr(*QUERY).collect())
    assert r_ours == r_theirs, (r_ours, r_theirs)
    assert r_ours[0]["records"] == RECORDS and r_ours[0]["value_bytes"] == RECORDS * VALUE
    partitions = ours.rdd.getNumPartitions()
    spark.stop()
    shutil.rmtree(work)

    rows = [
        {"reader": "kraft-files", "seconds": t_ours, "rows_s": RECORDS / t_ours, "tasks": partitions},
        {"reader": "parquet (baseline)", "seconds": t_theirs, "rows_s": RECORDS / t_theirs},
    ]
    ratio = t_theirs / t_ours
    print(f"{RECORDS:,} records of {VALUE} B in batches of {PER_BATCH}, local[2], best of {ROUNDS}\n")
    print_table(rows, ["reader", "seconds", "rows_s", "tasks"])
    print(f"\nratio = kraft-files rows/s / parquet rows/s = {ratio:.2f} (target >= {TARGET})")
    print(f"results: {write_results('spark', rows, ratio=ratio, target=TARGET)}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
