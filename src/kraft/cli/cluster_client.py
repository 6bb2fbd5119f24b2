"""Talking to a LocalCluster from outside: find the leader, create topics, read quorum state.

Shared by the chaos runner and the integration tests, which drive real node processes
through the same client port a Kafka client uses.
"""

import asyncio
import ssl
import time
import urllib.request
from datetime import timedelta
from typing import Any

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import ClientLogin, KafkaConnection
from kraft.raft import messages as m

# CreateTopics errors that mean "not yet": no active controller, or too few unfenced brokers.
RETRIABLE = (ErrorCode.not_controller, ErrorCode.invalid_replication_factor)
UNREACHABLE = (OSError, ConnectionError, asyncio.TimeoutError)


def run_async(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def request(port: int, req: Any, timeout: float = 10.0, tls: ssl.SSLContext | None = None,
                  login: ClientLogin | None = None) -> Any:
    conn = await KafkaConnection.connect("127.0.0.1", port, timeout=timeout, tls=tls, login=login)
    try:
        return await conn.request(req, timeout)
    finally:
        conn.close()


def describe_quorum(cluster: LocalCluster, node_id: int, timeout: float = 10.0) -> Any:
    response = run_async(request(cluster.nodes[node_id].client_port, m.describe_quorum_request(), timeout))
    return response.topics[0].partitions[0]


def leader(cluster: LocalCluster, timeout: float = 20.0, exclude: tuple[int, ...] = (),
           ask_timeout: float = 10.0) -> tuple[int, int]:
    """(leader id, epoch) once a running node reports a leader that answers as one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in cluster.nodes.values():
            if not node.running or node.node_id in exclude:
                continue
            try:
                p = describe_quorum(cluster, node.node_id, ask_timeout)
            except UNREACHABLE:
                continue
            if p.error_code == ErrorCode.none and p.leader_id not in exclude:
                return p.leader_id, p.leader_epoch
        time.sleep(0.1)
    raise TimeoutError("no leader elected")


def create_topic(port: int, name: str, partitions: int = 1, rf: int = 1, timeout_ms: int = 10_000,
                 retry_s: float = 10.0, configs: dict[str, str | None] | None = None) -> Any:
    """CreateTopics v7 for one topic; retried while the controller is not ready (not active
    yet, or not enough brokers registered and unfenced)."""
    req = build_request(19, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout": timedelta(milliseconds=timeout_ms),
        "validate_only": False,
    })
    deadline = time.monotonic() + retry_s
    while True:
        result = run_async(request(port, req, timeout_ms / 1000 + 5)).topics[0]
        if result.error_code not in RETRIABLE or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def create_topic_at_leader(cluster: LocalCluster, name: str, partitions: int = 1, rf: int = 1,
                           timeout: float = 20.0) -> tuple[int, Any]:
    """(the leader that answered, its CreateTopics result), sent where a Kafka admin client
    would send it: to the active controller, found again whenever a node answers
    NOT_CONTROLLER. Leadership can move between finding the leader and asking it, most often
    while a freshly started quorum settles, so a client pinned to one node is not enough.
    As with Kafka's admin client, a retry after an operation that lost its leader midway can
    answer TOPIC_ALREADY_EXISTS: the first attempt's records may have committed after all."""
    deadline = time.monotonic() + timeout
    while True:
        leader_id, _ = leader(cluster, timeout=max(1.0, deadline - time.monotonic()))
        result = create_topic(cluster.nodes[leader_id].client_port, name, partitions, rf, retry_s=0)
        if result.error_code not in RETRIABLE or time.monotonic() > deadline:
            return leader_id, result
        time.sleep(0.1)


def find_coordinator(cluster: LocalCluster, group: str, timeout: float = 60.0, tls: ssl.SSLContext | None = None,
                     login: ClientLogin | None = None) -> Any:
    """FindCoordinator v3 for `group`, asked of each running node in turn until one names
    the coordinator (the leader of the group's `__consumer_offsets` partition, once it has
    one): the answer, with node_id, host and port."""
    find = build_request(10, 3, {"key": group, "key_type": 0})
    deadline = time.monotonic() + timeout
    while True:
        for node in cluster.nodes.values():
            if not node.running:
                continue
            try:
                found = run_async(request(node.client_port, find, 5.0, tls, login))
            except UNREACHABLE:
                continue
            if found.error_code == ErrorCode.none:
                return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for group {group} after {timeout:.0f} s")
        time.sleep(0.1)


def settled_coordinators(cluster: LocalCluster, groups: list[str], timeout: float = 60.0) -> tuple[int, list[Any]]:
    """(the metadata leader, each group's FindCoordinator answer) once no group's coordinator is
    the metadata leader: that node hands the offsets partitions it leads to the other voters
    (server/runtime/leadership_balance.py), and a coordinator found before would soon refuse
    with NOT_COORDINATOR. After `timeout`, as they are (a node alone leads everything)."""
    deadline = time.monotonic() + timeout
    while True:
        metadata_leader, _ = leader(cluster, timeout=timeout)
        found = [find_coordinator(cluster, g, timeout) for g in groups]
        if all(f.node_id != metadata_leader for f in found) or time.monotonic() > deadline:
            return metadata_leader, found
        time.sleep(0.1)


def scrape(cluster: LocalCluster, node_id: int) -> dict[str, float]:
    """The node's Prometheus samples at one scrape, name (labels included) -> value."""
    url = f"http://127.0.0.1:{cluster.nodes[node_id].metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        lines = response.read().decode().splitlines()
    return {name: float(value) for name, value in (line.rsplit(" ", 1) for line in lines if line and line[0] != "#")}


def metric(cluster: LocalCluster, node_id: int, name: str) -> float | None:
    """One sample from the node's Prometheus endpoint (None if absent)."""
    samples = scrape(cluster, node_id)
    return samples.get(name, next((v for k, v in samples.items() if k.startswith(name + "{")), None))


def topic_names(cluster: LocalCluster, node_id: int) -> set[str]:
    """The topics in the node's metadata image, as its Metadata API lists them."""
    req = build_request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    response = run_async(request(cluster.nodes[node_id].client_port, req))
    return {t.name for t in response.topics}
