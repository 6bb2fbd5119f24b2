"""The driver of tests/spark/test_standalone_cluster.py: every kraft source on a Spark
standalone cluster, run in a process of its own (a process has one SparkContext, and the
test process may hold a local one). It is given one JSON argument and pickles what it read
to the file named there; the test checks it.

    python tests/spark/cluster_job.py '{"master": ..., "bootstrap": ..., "hw": ..., "logdir": ...,
                                        "work": ..., "out": ...}'

It is started with the user's PYSPARK_PYTHON set (a wrapper), which session() must keep.
"""

import json
import os
import pickle
import sys
import time
from pathlib import Path

import kraft.spark

TOPIC = "__cluster_metadata"


def stage(name: str, started: list[float]) -> None:
    """One line per stage on stderr, which the test shows when it fails: how far it got, how fast."""
    now = time.monotonic()
    print(f"cluster_job: {name} after {now - started[-1]:.1f} s", file=sys.stderr, flush=True)
    started.append(now)


def main(args: dict) -> dict:
    started = [time.monotonic()]
    spark = kraft.spark.session("kraft-cluster-test", master=args["master"], **{
        "spark.executor.memory": "512m", "spark.cores.max": "2", "spark.sql.shuffle.partitions": "2"})
    out: dict = {"pythonExec": spark.sparkContext.pythonExec}
    stage("session", started)
    try:
        # Where the Python work runs: the executors' Python, started by the worker.
        out["workers"] = spark.sparkContext.parallelize(range(4), 4).map(
            lambda _: (os.environ.get("KRAFT_WRAPPED_PYTHON"), os.getcwd())).collect()
        stage("executors", started)

        live = (spark.read.format("kraft").option("kafka.bootstrap.servers", args["bootstrap"])
                .option("endingOffsets", json.dumps({TOPIC: {"0": args["hw"]}})).option("minPartitions", 3))
        out["live"] = [(r.offset, r.leaderEpoch, r.isControl, r.value) for r in live.load().orderBy("offset").collect()]
        out["live_history"] = [(r.offset, r.type, r.topic) for r in
                               live.option("decode", "metadata").load().orderBy("offset").collect()]
        stage("kraft", started)

        # kraft-files and kraft-metadata by a path relative to the driver's working directory
        # (the test starts this process there), which the executors (in the worker's
        # directories) do not share.
        logdir = args["logdir"]
        assert not Path(logdir).is_absolute() and Path(logdir).is_dir()
        files = spark.read.format("kraft-files").load(logdir)
        out["files_offsets"] = [r.offset for r in files.select("offset").orderBy("offset").collect()]
        out["files_pandas"] = len(files.toPandas())
        out["history"] = [r.asDict(recursive=True) for r in spark.read.format("kraft-files").option(
            "decode", "metadata").load(logdir).collect()]
        out["topics"] = sorted(r.name for r in spark.read.format("kraft-metadata").option("table", "topics").load(
            logdir).collect())
        stage("kraft-files, kraft-metadata", started)
        out["stream"] = stream_with_restart(spark, args)
        stage("stream", started)
    finally:
        spark.stop()
    return out


def stream_with_restart(spark, args: dict) -> dict:
    """A stream into Parquet stopped after its first micro-batches, then restarted from its
    checkpoint with availableNow: what the sink holds, and where each run ended."""
    work = Path(args["work"])
    sink, checkpoint = str(work / "sink"), str(work / "checkpoint")

    def start(trigger: dict):
        df = (spark.readStream.format("kraft").option("kafka.bootstrap.servers", args["bootstrap"])
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20).load())
        return (df.writeStream.format("parquet").option("path", sink).option("checkpointLocation", checkpoint)
                .trigger(**trigger).start())

    first = start({"processingTime": "500 milliseconds"})
    deadline = time.monotonic() + 120
    while not any(p["numInputRows"] for p in first.recentProgress):
        if time.monotonic() > deadline or first.exception() is not None:
            raise RuntimeError(f"no micro-batch ran: {first.exception()}")
        time.sleep(0.2)
    first.stop()
    first_end = json.loads(first.lastProgress["sources"][0]["endOffset"])[TOPIC]["0"]["offset"]
    second = start({"availableNow": True})
    second.awaitTermination()
    end = second.lastProgress["sources"][0]["endOffset"]
    rows = spark.read.parquet(sink).select("offset", "leaderEpoch").collect()
    return {"first_end": first_end, "end": json.loads(end)[TOPIC]["0"]["offset"],
            "rows": sorted((r.offset, r.leaderEpoch) for r in rows)}


if __name__ == "__main__":
    given = json.loads(sys.argv[1])
    result = main(given)
    Path(given["out"]).write_bytes(pickle.dumps(result))
