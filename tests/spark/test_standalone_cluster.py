"""Every kraft source on a real Spark standalone cluster (a master and a worker started from
PySpark's own launcher on loopback), not local[2]: tasks run in executor JVMs the worker
starts, in the worker's directories, with the Python the user chose. The driver runs in a
process of its own (tests/spark/cluster_job.py) with PYSPARK_PYTHON set to a wrapper that
marks the workers it starts, as a user's choice of interpreter would be."""

import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kraft.cli.cluster_client import leader
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, ConsumerRecord, TopicPartition
from kraft.spark.standalone import standalone_cluster, stop_group
from tests.server.cluster_helpers import create_topics, wait_for
from tests.spark.kafka_logs import check_history

TP = TopicPartition("__cluster_metadata", 0)
JOB = Path(__file__).with_name("cluster_job.py")
JOB_DEADLINE = 600  # seconds; the job takes about 50 s on an idle 2-core machine


def committed(cluster: LocalCluster, end: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        wait_for(lambda: bool(out.extend(consumer.poll(200))) or consumer.position(TP) >= end, timeout=120,
                 what=f"offset {end}")
    return [r for r in out if r.offset < end]


def wrapper(directory: Path) -> Path:
    """A user's PYSPARK_PYTHON: this venv's interpreter behind a script of their own."""
    path = directory / "user-python"
    path.write_text(f"#!/bin/sh\nKRAFT_WRAPPED_PYTHON={path} exec {sys.executable} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.slow
@pytest.mark.timeout(1200)  # about 75 s on an idle 2-core machine; JVMs are ended by the finally blocks
def test_every_source_on_a_standalone_cluster(kafka, tmp_path):
    cluster = LocalCluster(tmp_path / "kraft", voters=3, observers=0)
    cluster.start()
    try:
        create_topics(cluster, "a", 4)
        old_leader, _ = leader(cluster, timeout=120)
        cluster.kill(old_leader)  # two epochs in the log
        leader(cluster, timeout=120, exclude=(old_leader,))
        hw = create_topics(cluster, "b", 4)
        cluster.start(old_leader)
        reference = committed(cluster, hw)
        python = wrapper(tmp_path)
        args = {"bootstrap": cluster.bootstrap_servers(), "hw": hw, "logdir": kafka.root.name,
                "work": str(tmp_path / "job"), "out": str(tmp_path / "result.pickle")}
        with standalone_cluster(tmp_path / "spark") as master:
            # Only what a user would set: kraft comes from the venv, not from this checkout's path.
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK") and k != "PYTHONPATH"}
            env["PYSPARK_PYTHON"] = str(python)
            log = tmp_path / "job.log"
            with open(log, "wb") as out:  # a file, not a pipe: nothing blocks on a full buffer
                job = subprocess.Popen([sys.executable, str(JOB), json.dumps({**args, "master": master})], env=env,
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=kafka.root.parent, start_new_session=True)  # its JVM in its group
            outcome = "timed out"
            try:
                outcome = f"exit {job.wait(timeout=JOB_DEADLINE)}"
            except subprocess.TimeoutExpired:
                pass  # reported below, with what the job printed
            finally:
                stop_group(job)  # the driver's JVM with it, whatever happened
            assert outcome == "exit 0", f"cluster_job {outcome}:\n{log.read_text(errors='replace')[-6000:]}"
        result = pickle.loads(Path(args["out"]).read_bytes())
    finally:
        cluster.stop()

    # The user's interpreter, kept by session() and register(), ran every Python worker,
    # in the worker's directories (not the driver's).
    assert result["pythonExec"] == str(python)
    assert {w for w, _ in result["workers"]} == {str(python)}
    assert all(Path(cwd).is_relative_to(tmp_path / "spark" / "work") for _, cwd in result["workers"])

    assert result["live"] == [(r.offset, r.leader_epoch, r.is_control, r.value) for r in reference]
    assert len({epoch for _, epoch, _, _ in result["live"]}) >= 2
    assert [offset for offset, _, _ in result["live_history"]] == [r.offset for r in reference]
    assert {topic for _, kind, topic in result["live_history"] if kind == "PARTITION_RECORD"} == {
        f"{t}-{i}" for t in "ab" for i in range(4)}

    # kraft-files and kraft-metadata were given a path relative to the driver's directory,
    # which the executors above do not run in: it was resolved on the driver.
    assert result["files_offsets"] == sorted(e.offset for e in kafka.rows)
    assert result["files_pandas"] == len(kafka.rows)
    check_history(sorted(result["history"], key=lambda r: r["offset"]), kafka.rows)
    assert result["topics"] == ["orders", "payments"]

    stream = result["stream"]
    assert 0 < stream["first_end"] < stream["end"]  # stopped part way, then restarted from the checkpoint
    assert [offset for offset, _ in stream["rows"]] == list(range(stream["end"]))  # each offset once
    by_offset = {r.offset: r.leader_epoch for r in reference}
    assert all(by_offset[o] == e for o, e in stream["rows"] if o in by_offset)
