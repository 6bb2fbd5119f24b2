"""Writes through Kafka's protocol against etcd's puts (issue 28 item 2), one client harness.

Both systems run 3 members on loopback with fsync on, and are driven by the same harness in
this process: N clients, each on a connection of its own, each with one write in flight (a
closed loop: the next write goes when the last is answered), counted in cluster_load's
Window, so a figure at N clients is the cluster's throughput with N in flight and the p50 at
one client is one write's latency.

- kraft: a 3-voter LocalCluster (LocalCluster's timeouts; controller.quorum.append.linger.ms
  the server's default, `--linger` to set it). OffsetCommit v8 of a simple group (one offset,
  a leader epoch) to the group's coordinator, the groups spread over the offsets partitions
  (`--offsets-partitions`, 1 by default: one Raft log, as etcd's); IncrementalAlterConfigs of
  one topic's retention.ms to the active controller. Each is answered once its record is
  committed: fsynced on a majority.
- etcd 3.4, Debian's `etcd-server` (`make bench` installs it): a Put of a 16-byte key and a
  64-byte value through its gRPC gateway (HTTP/1.1 JSON, v3 API) to the leader; answered once
  committed, fsynced on a majority.

Also the CPU the three members used per write (their /proc utime+stime over the window).

Goals (printed beside each figure, and as ratios to etcd): at one client, a synchronous
OffsetCommit and an IncrementalAlterConfigs each p50 <= 2 ms; at 64 clients, each at least
etcd's puts/s.

    python bench/writes_bench.py [--clients 1,16,64] [--seconds 5] [--linger MS]
"""

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_load import Window
from common import all_met, cpu_seconds, goal, print_goals, print_table, write_results

from kraft.cli.cluster_client import create_topic, settled_coordinators
from kraft.cli.local_cluster import LocalCluster, free_port
from kraft.groups import partition_for
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection

CLIENTS = (1, 16, 64)
SECONDS = 5.0
REQUEST_TIMEOUT_S = 30.0
GOAL_P50_MS = 2.0
CONFIG_TOPIC = "bench-configs"
COMMITTED_TOPIC = "bench-committed"  # the topic whose offsets the commits name
ETCD = "etcd"
ETCD_KEY_BYTES = 16
ETCD_VALUE_BYTES = 64
COMMIT = "OffsetCommit"
CONFIG = "IncrementalAlterConfigs"
PUT = "etcd Put"
PEER = "etcd 3.4 Put, same harness"


class Client:
    """One connection, one write at a time."""

    async def write(self, n: int) -> None:
        """The nth write, answered; raises RuntimeError if it was refused."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


Connect = Callable[[int], Awaitable[Client]]  # client i's connection


async def closed_loop(connect: Connect, i: int, window: Window) -> None:
    try:
        client = await connect(i)
    except OSError as e:
        window.fail(f"client {i} cannot connect: {e}")
        return
    try:
        n = 0
        while True:
            window.begin()
            started = time.perf_counter()
            await asyncio.wait_for(client.write(n), REQUEST_TIMEOUT_S)
            n += 1
            if not window.complete(started, time.perf_counter()):
                return
    except (OSError, TimeoutError, RuntimeError) as e:
        window.fail(f"client {i}: {type(e).__name__} {e}")
    finally:
        client.close()


async def measure(connect: Connect, clients: int, seconds: float, pids: list[int]) -> dict:
    window = Window(clients, seconds)
    cpu_before = cpu_seconds(pids)
    harness_before = _own_cpu()
    started = time.perf_counter()
    await asyncio.gather(*(closed_loop(connect, i, window) for i in range(clients)))
    elapsed = time.perf_counter() - started
    result = window.wait()
    if "error" not in result:
        # CPU over the whole run (warm-up included) per write completed in it.
        spent = cpu_seconds(pids) - cpu_before
        result["cpu_ms_per_write"] = spent * 1000 / max(1, result["completed"])
        # The harness's own CPU a write: its encoding differs by protocol (kio here, JSON for etcd),
        # and on two cores what it spends the members cannot.
        result["harness_cpu_ms_per_write"] = (_own_cpu() - harness_before) * 1000 / max(1, result["completed"])
        result["cpu_cores"] = spent / elapsed
    return result


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


# ---------------------------------------------------------------- kraft


class KafkaClient(Client):
    def __init__(self, connection: KafkaConnection, request: Callable[[int], Any],
                 error: Callable[[Any], int]) -> None:
        self.connection = connection
        self.request = request
        self.error = error

    async def write(self, n: int) -> None:
        answer = await self.connection.request(self.request(n), REQUEST_TIMEOUT_S)
        error = self.error(answer)
        if error != ErrorCode.none:
            raise RuntimeError(ErrorCode(error).name)

    def close(self) -> None:
        self.connection.close()


def kafka_connect(port_of: Callable[[int], int], request_of: Callable[[int], Callable[[int], Any]],
                  error: Callable[[Any], int]) -> Connect:
    async def connect(i: int) -> Client:
        connection = await KafkaConnection.connect("127.0.0.1", port_of(i), timeout=REQUEST_TIMEOUT_S)
        return KafkaClient(connection, request_of(i), error)

    return connect


def offset_commit(group: str) -> Callable[[int], Any]:
    def request(n: int) -> Any:
        return build_request(8, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": COMMITTED_TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": n, "committed_leader_epoch": 1,
                 "committed_metadata": ""}]}]})

    return request


def commit_error(answer: Any) -> int:
    return next((p.error_code for t in answer.topics for p in t.partitions if p.error_code), ErrorCode.none)


def config_write(i: int) -> Callable[[int], Any]:
    def request(n: int) -> Any:
        value = str(3_600_000 + i * 10_000_000 + n)
        return build_request(44, 1, {"validate_only": False, "resources": [
            {"resource_type": 2, "resource_name": CONFIG_TOPIC,
             "configs": [{"name": "retention.ms", "config_operation": 0, "value": value}]}]})

    return request


def config_error(answer: Any) -> int:
    return next((r.error_code for r in answer.responses if r.error_code), ErrorCode.none)


def kraft_rows(directory: Path, levels: tuple[int, ...], seconds: float, linger_ms: int | None,
               offsets_partitions: int) -> list[dict]:
    overrides = {"offsets.topic.num.partitions": str(offsets_partitions)}
    # LocalCluster sets a 1 ms linger for its tests; the benchmark measures the server's default.
    overrides["controller.quorum.append.linger.ms"] = str(linger_ms) if linger_ms is not None else "25"
    cluster = LocalCluster(directory / "kraft", voters=3, observers=0, overrides=overrides)
    rows = []
    try:
        cluster.start()
        for topic in (CONFIG_TOPIC, COMMITTED_TOPIC):
            created = create_topic(cluster.nodes[1].client_port, topic, retry_s=60)
            if created.error_code != ErrorCode.none:
                raise RuntimeError(f"creating {topic}: {ErrorCode(created.error_code).name}")
        pids = [node.started().pid for node in cluster.nodes.values()]
        groups = [next(g for k in range(10_000)
                       if partition_for(g := f"bench-{i}-{k}", offsets_partitions) == i % offsets_partitions)
                  for i in range(max(levels))]
        # Which node leads which partition weighs about 1 ms of CPU a write (decision 0040): a node
        # leading the metadata log and the groups' offsets partition is asked for both in every Fetch.
        # The metadata leader hands the offsets partitions over, unless it is alone.
        leader_id, found = settled_coordinators(cluster, groups)
        ports = {g: f.port for g, f in zip(groups, found, strict=True)}
        controller_port = cluster.nodes[leader_id].client_port
        coordinators = sorted({f.node_id for f in found})
        shared = leader_id in coordinators
        layout = (f"metadata leader node {leader_id}, offsets leaders {coordinators}"
                  f" ({'one node leads both' if shared else 'apart'})")
        print(f"kraft layout: {layout}", flush=True)
        for clients in levels:
            commits = kafka_connect(lambda i: ports[groups[i]], lambda i: offset_commit(groups[i]), commit_error)
            configs = kafka_connect(lambda i: controller_port, config_write, config_error)
            for kind, connect in ((COMMIT, commits), (CONFIG, configs)):
                result = asyncio.run(measure(connect, clients, seconds, pids))
                rows.append({"system": "kraft", "write": kind, "clients": clients, "layout": layout, **result})
                print(_line(rows[-1]), flush=True)
    finally:
        cluster.stop()
    return rows


# ---------------------------------------------------------------- etcd


class EtcdClient(Client):
    """etcd's v3 API through its gRPC gateway: HTTP/1.1 with keep-alive, JSON bodies."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int, i: int) -> None:
        self.reader = reader
        self.writer = writer
        self.host = f"127.0.0.1:{port}"
        self.key = base64.b64encode(f"bench-{i:010d}".encode()[:ETCD_KEY_BYTES]).decode()

    async def write(self, n: int) -> None:
        value = base64.b64encode(str(n).encode().rjust(ETCD_VALUE_BYTES, b"v")).decode()
        status, body = await self.post("/v3/kv/put", {"key": self.key, "value": value})
        if status != 200:
            raise RuntimeError(f"etcd answered {status}: {body[:200]!r}")

    async def post(self, path: str, payload: dict) -> tuple[int, bytes]:
        body = json.dumps(payload).encode()
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "transfer-encoding" and "chunked" in value:
                chunked = True
        if not chunked:
            return status, await self.reader.readexactly(length)
        data = b""
        while size := int((await self.reader.readline()).strip(), 16):
            data += await self.reader.readexactly(size + 2)
        await self.reader.readline()
        return status, data

    def close(self) -> None:
        self.writer.close()


async def etcd_client(port: int, i: int) -> EtcdClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return EtcdClient(reader, writer, port, i)


@dataclass
class EtcdMember:
    name: str
    client_port: int
    peer_port: int
    process: subprocess.Popen | None = None


class EtcdCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.members = [EtcdMember(f"m{i}", free_port(), free_port()) for i in (1, 2, 3)]

    def start(self) -> None:
        initial = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in self.members)
        for m in self.members:
            log = open(self.directory / f"{m.name}.log", "ab")
            m.process = subprocess.Popen(
                [ETCD, "--name", m.name, "--data-dir", str(self.directory / m.name),
                 "--listen-client-urls", f"http://127.0.0.1:{m.client_port}",
                 "--advertise-client-urls", f"http://127.0.0.1:{m.client_port}",
                 "--listen-peer-urls", f"http://127.0.0.1:{m.peer_port}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer_port}",
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "kraft-bench", "--logger", "zap", "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            log.close()

    def leader_port(self, timeout: float = 60.0) -> int:
        """The client port of the member that leads, once every member names the same one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                statuses = [asyncio.run(self._status(m.client_port)) for m in self.members]
            except (OSError, RuntimeError, ValueError):
                time.sleep(0.2)
                continue
            leaders = {s["leader"] for s in statuses}
            if len(leaders) == 1 and "0" not in leaders:
                (lead,) = leaders
                for m, s in zip(self.members, statuses, strict=True):
                    if s["header"]["member_id"] == lead:
                        return m.client_port
            time.sleep(0.2)
        raise TimeoutError(f"etcd elected no leader in {timeout:.0f} s; see {self.directory}/*.log")

    @staticmethod
    async def _status(port: int) -> dict:
        client = await etcd_client(port, 0)
        try:
            status, body = await client.post("/v3/maintenance/status", {})
        finally:
            client.close()
        if status != 200:
            raise RuntimeError(f"status {status}")
        return json.loads(body)

    def stop(self) -> None:
        for m in self.members:
            if m.process is not None and m.process.poll() is None:
                m.process.terminate()
                try:
                    m.process.wait(10)
                except subprocess.TimeoutExpired:
                    m.process.kill()
                    m.process.wait()


def etcd_rows(directory: Path, levels: tuple[int, ...], seconds: float) -> list[dict]:
    cluster = EtcdCluster(directory)
    rows = []
    try:
        cluster.start()
        port = cluster.leader_port()
        pids = [m.process.pid for m in cluster.members if m.process is not None]
        for clients in levels:
            result = asyncio.run(measure(lambda i: etcd_client(port, i), clients, seconds, pids))
            rows.append({"system": "etcd", "write": PUT, "clients": clients, **result})
            print(_line(rows[-1]), flush=True)
    finally:
        cluster.stop()
    return rows


# ---------------------------------------------------------------- report


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['system']} {row['write']} at {row['clients']} clients: FAILED {row['error']}"
    return (f"{row['system']} {row['write']} at {row['clients']} clients: {row['ops_s']:,.0f}/s, "
            f"p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms, {row['cpu_ms_per_write']:.2f} ms CPU a write "
            f"(the harness {row['harness_cpu_ms_per_write']:.2f})")


def verdicts(rows: list[dict]) -> list[dict]:
    """Each goal (see common.goal): kraft's figure, the goal, and etcd's figure beside it."""
    by = {(r["write"], r["clients"]): r for r in rows if "error" not in r}
    out = []
    one, top = min(r["clients"] for r in rows), max(r["clients"] for r in rows)
    put_one, put_top = by.get((PUT, one)), by.get((PUT, top))
    for kind in (COMMIT, CONFIG):
        row = by.get((kind, one))
        if row is not None and one == 1:
            out.append(goal(f"{kind} p50, 1 client", row["p50_ms"], "ms", goal=f"<= {GOAL_P50_MS} ms",
                            met=row["p50_ms"] <= GOAL_P50_MS, peer=PEER if put_one else None,
                            peer_value=put_one["p50_ms"] if put_one else None))
        row = by.get((kind, top))
        if row is not None and put_top is not None:
            out.append(goal(f"{kind}/s, {top} clients", row["ops_s"], "ops/s", goal=">= etcd's puts/s",
                            met=row["ops_s"] >= put_top["ops_s"], peer=PEER, peer_value=put_top["ops_s"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default=",".join(map(str, CLIENTS)))
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--linger", type=int, default=None, help="controller.quorum.append.linger.ms for kraft")
    parser.add_argument("--offsets-partitions", type=int, default=1)
    parser.add_argument("--only", choices=("kraft", "etcd"))
    args = parser.parse_args()
    levels = tuple(int(c) for c in args.clients.split(","))
    if args.only != "kraft" and shutil.which(ETCD) is None:
        print("etcd is not installed: `make bench` installs Debian's etcd-server (apt-get install etcd-server)",
              file=sys.stderr)
        return 1
    directory = Path(tempfile.mkdtemp(prefix="writes-bench-"))
    try:
        rows = []
        if args.only != "etcd":
            rows += kraft_rows(directory, levels, args.seconds, args.linger, args.offsets_partitions)
        if args.only != "kraft":
            rows += etcd_rows(directory, levels, args.seconds)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print()
    print_table(rows, ["system", "write", "clients", "ops_s", "p50_ms", "p99_ms", "cpu_ms_per_write", "cpu_cores"])
    goals = verdicts(rows)
    print_goals(goals)
    path = write_results("writes_bench", rows, goals=goals, linger_ms=args.linger)
    print(f"\nresults: {path}")
    failed = any("error" in r for r in rows) or not all_met(goals)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
