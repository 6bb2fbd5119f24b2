"""Talking to a LocalCluster from tests: find the leader, create topics, read quorum state."""

import asyncio
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from typing import Any

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def request(port: int, req: Any, timeout: float = 10.0) -> Any:
    conn = await KafkaConnection.connect("127.0.0.1", port, timeout=timeout)
    try:
        return await conn.request(req, timeout)
    finally:
        conn.close()


def describe_quorum(cluster: LocalCluster, node_id: int) -> Any:
    response = run(request(cluster.nodes[node_id].client_port, m.describe_quorum_request()))
    return response.topics[0].partitions[0]


def leader(cluster: LocalCluster, timeout: float = 20.0, exclude: tuple[int, ...] = ()) -> tuple[int, int]:
    """(leader id, epoch) once a running node reports a leader that answers as one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in cluster.nodes.values():
            if not node.running or node.node_id in exclude:
                continue
            try:
                p = describe_quorum(cluster, node.node_id)
            except (OSError, ConnectionError, asyncio.TimeoutError):
                continue
            if p.error_code == ErrorCode.none and p.leader_id not in exclude:
                return p.leader_id, p.leader_epoch
        time.sleep(0.1)
    raise TimeoutError("no leader elected")


RETRIABLE = (ErrorCode.not_controller, ErrorCode.invalid_replication_factor)


def create_topic(port: int, name: str, partitions: int = 1, rf: int = 1, timeout_ms: int = 10_000,
                 retry_s: float = 10.0) -> Any:
    """CreateTopics v7 for one topic; retried while the controller is not ready (not active
    yet, or not enough brokers registered and unfenced)."""
    req = build_request(19, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                    "configs": []}],
        "timeout": timedelta(milliseconds=timeout_ms),
        "validate_only": False,
    })
    deadline = time.monotonic() + retry_s
    while True:
        result = run(request(port, req, timeout_ms / 1000 + 5)).topics[0]
        if result.error_code not in RETRIABLE or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def metric(cluster: LocalCluster, node_id: int, name: str) -> float | None:
    """A sample from the node's Prometheus endpoint (None if absent)."""
    url = f"http://127.0.0.1:{cluster.nodes[node_id].metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


def create_topics(cluster: LocalCluster, prefix: str, n: int) -> int:
    """n topics through the leader; the high watermark once they are committed."""
    leader_id, _ = leader(cluster)
    for i in range(n):
        assert create_topic(cluster.nodes[leader_id].client_port, f"{prefix}-{i}").error_code == ErrorCode.none
    return describe_quorum(cluster, leader_id).high_watermark


def kraft_cli(*args: str) -> None:
    """Runs `kraft ARGS` to success."""
    out = subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
