"""Test-only helpers around a LocalCluster (the shared client calls are in kraft.cli.cluster_client)."""

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kraft.cli.cluster_client import create_topic_at_leader, describe_quorum, request, run_async
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, TopicPartition
from kraft.groups import OFFSETS_TOPIC
from kraft.protocol import ErrorCode
from kraft.raft import messages as m
from kraft.server.runtime.node import OFFSETS_TOPIC_ID

T = TypeVar("T")

# No NoOps while idle (Kafka writes one every metadata.max.idle.interval.ms): for tests that
# need a log at rest, to compare figures between two reads or to see it empty after a snapshot.
QUIET = {"metadata.max.idle.interval.ms": "0"}

# Small, frequent snapshots and retention that keeps only the latest: the log start moves.
TRIMMED = {
    "metadata.log.max.record.bytes.between.snapshots": "1500",
    "metadata.snapshot.min.changed_records.ratio": "0",
    "metadata.max.retention.bytes": "1",  # retention moves the log start to the latest snapshot
}
METADATA_TP = TopicPartition("__cluster_metadata", 0)


def offsets_quorum(controller_ports: Iterable[int], partition: int) -> Any:
    """The DescribeQuorum answer of the leader of `__consumer_offsets-<partition>`, asked of
    each controller listener in turn (each node answers for its own core; None if none leads)."""
    where = m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, partition)
    for port in controller_ports:
        try:
            answer = run_async(request(port, m.describe_quorum_request(where), timeout=5))
        except (OSError, TimeoutError):
            continue
        p = answer.topics[0].partitions[0]
        if p.error_code == ErrorCode.none:
            return p
    return None


def log_ends(cluster: LocalCluster) -> tuple[int, int]:
    """(log start, high watermark) of the metadata log, as a consumer sees them."""
    with Consumer(cluster.bootstrap_servers()) as consumer:
        return (consumer.beginning_offsets([METADATA_TP])[METADATA_TP].offset,
                consumer.end_offsets([METADATA_TP])[METADATA_TP].offset)


def snapshots_at_rest(cluster: LocalCluster) -> bool:
    """No snapshot being written on any node (a `.checkpoint.part` is opened in the same step
    that decides one is due) and the log start at the leader's newest snapshot: once nothing
    is written, neither a snapshot nor retention will move the log start again. The fixture
    leaves when the loop sees the log start move, often with the next snapshot under way."""
    if any(any(node.partition_dir.glob("*.checkpoint.part")) for node in cluster.nodes.values()):
        return False
    leader_id = describe_quorum(cluster, cluster.voter_ids[0]).leader_id
    snapshots = sorted(cluster.nodes[leader_id].partition_dir.glob("*.checkpoint"))
    return bool(snapshots) and log_ends(cluster)[0] == int(snapshots[-1].name.split("-")[0])


@contextmanager
def trimmed_cluster(directory: Path, **overrides: str) -> Iterator[tuple[LocalCluster, list[str]]]:
    """A running three-voter cluster whose log start retention moved past offset 0, and the
    topics created to get it there."""
    cluster = LocalCluster(directory, voters=3, observers=0, overrides=TRIMMED | overrides)
    cluster.start()
    try:
        names: list[str] = []
        while log_ends(cluster)[0] == 0:
            assert len(names) < 300, "retention never moved the log start"
            create_topics(cluster, f"t{len(names)}", 1)
            names.append(f"t{len(names)}-0")
        wait_for(lambda: snapshots_at_rest(cluster), timeout=60, what="the last snapshot and retention to finish")
        yield cluster, names
    finally:
        cluster.stop()


def wait_for(predicate: Callable[[], T], timeout: float = 60.0, what: str = "condition") -> T:
    """Polls `predicate` until it holds, and returns what it returned then (a state read
    again afterwards may have moved on); the default deadline is wide because a machine at a
    load of 10 or more makes a node take tens of seconds over what takes one when idle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


def create_topics(cluster: LocalCluster, prefix: str, n: int) -> int:
    """n topics through the leader; the high watermark once they are committed."""
    for i in range(n):
        leader_id, result = create_topic_at_leader(cluster, f"{prefix}-{i}")
        assert result.error_code == ErrorCode.none
    return describe_quorum(cluster, leader_id).high_watermark


def kraft_cli(*args: str) -> None:
    """Runs `kraft ARGS` to success."""
    out = subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def back_up_a_snapshot(cluster: LocalCluster, node_id: int, directory: Path) -> tuple[Path, int]:
    """Waits for the node to write a snapshot and copies its latest into `directory`, as a
    backup would: (the copy, the snapshot's end offset)."""
    partition = cluster.nodes[node_id].partition_dir
    wait_for(lambda: list(partition.glob("*.checkpoint")), what=f"a snapshot on node {node_id}")
    latest = sorted(partition.glob("*.checkpoint"))[-1]  # names are zero-padded: by end offset
    copy = directory / latest.name
    shutil.copy2(latest, copy)
    return copy, int(latest.name.split("-")[0])
