"""Test-only helpers around a LocalCluster (the shared client calls are in kraft.cli.cluster_client)."""

import shutil
import subprocess
import sys
import time
from pathlib import Path

from kraft.cli.cluster_client import create_topic_at_leader, describe_quorum
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode

# No NoOps while idle (Kafka writes one every metadata.max.idle.interval.ms): for tests that
# need a log at rest, to compare figures between two reads or to see it empty after a snapshot.
QUIET = {"metadata.max.idle.interval.ms": "0"}


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
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
