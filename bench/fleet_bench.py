"""At fleet scale (issue 28): a thousand observers on one leader, a million partitions in the
image, and a fresh broker catching up on that image while the fleet keeps fetching.

Fleet: a 3-voter LocalCluster (real processes, fsync on) whose leader's controller writes one
record every WRITE_INTERVAL_MS (cluster_node.py's paced writer: a controller operation, timed
from its submission to the leader's high watermark passing it). OBSERVERS light observers
(fleet_observers.py: each its own TCP connection and replica id, long-polling Fetch v17 on the
controller listener as a broker's metadata fetcher does) spread over OBSERVER_PROCESSES
processes. Measured, each in the same run against its baseline:
* the time from a record's commit on the leader until every observer has learned it (its
  high watermark passed it), p50/p99 over the records, and until half of them have; against
  the same record's commit time on the three voters;
* the leader's CPU per observer: its CPU time (utime + stime of its process) over the
  window with the fleet, less the same window without it, per observer and per Fetch
  answered; and with no writes at all (what a fleet costs when nothing happens: every
  parked Fetch answered when its 500 ms wait ends);
* the leader's memory per observer connection: its resident memory with the fleet
  connected and parked less before, per connection; against a bare asyncio server
  (a Protocol that reads and never answers) holding as many connections in the same run,
  the least a Python process can spend on a connection.

Million partitions (fleet_image.py): 100,000 topics x 10 partitions, replication factor 3,
1,000 brokers, as Kafka's TopicsImage benchmarks shape it; CreateTopics, a broker fence, a
zonal outage and a snapshot load, in time and memory, beside Kafka's published figures.

Catch-up: the three voters start from that million-partition image's snapshot; the fleet
(one observer fewer) fetches from its end while the controller writes; then a fresh broker
(a kraft node, process.roles=broker, empty disk) starts, fetches the snapshot, loads it and
catches up. Printed: its time to catch up, and the fleet's propagation p50/p99 before and
while it does.

    python bench/fleet_bench.py [--only fleet|partitions|catchup] [--scale F]

`--scale F` (or KRAFT_FLEET_SCALE, which `make bench FLEET_SCALE=F` sets) multiplies the
observers and the topics (default 1: the full scale, about N minutes on two cores).
"""

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import fleet_image
from cluster_bench import NodeProcess, describe, log_times, wait_for_leader
from cluster_load import percentile
from common import GOAL_COLUMNS, RESULTS, all_met, compared, goal, print_goals, write_results
from fleet_observers import MAX_WAIT_MS

from kraft.cli.local_cluster import LocalCluster

HERE = Path(__file__).parent
PARTS = ("fleet", "partitions", "catchup")
TABLE = [*GOAL_COLUMNS, "note"]  # each part's table: every figure, its peer and goal where it has them
OBSERVERS = 1000
OBSERVER_PROCESSES = 4
FIRST_OBSERVER_ID = 1000  # replica ids of the light observers: none is a voter's
WRITE_INTERVAL_MS = 100
SECONDS = 20.0  # each measured window
WARM_UP_S = 3.0
SETTLE_S = 2.0  # after the fleet connects, before its memory is read
# Kafka's quorum timeouts (LocalCluster's are halved, for tests): a leader busy with a fleet
# answers its followers later, and Kafka's 2 s fetch timeout is what production runs with.
KAFKA_TIMEOUTS = {"controller.quorum.fetch.timeout.ms": "2000", "controller.quorum.election.timeout.ms": "1000",
                  "controller.quorum.election.backoff.max.ms": "1000", "controller.quorum.request.timeout.ms": "2000"}
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------- processes


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (/proc/<pid>/stat, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_bytes(pid: int) -> int:
    """Resident memory of a process now (/proc/<pid>/statm)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


class ObserverProcesses:
    """OBSERVER_PROCESSES fleet_observers.py processes, the fleet's ids dealt between them."""

    def __init__(self, count: int, processes: int, log_dir: Path) -> None:
        ids = list(range(FIRST_OBSERVER_ID, FIRST_OBSERVER_ID + count))
        self.shares = [ids[i::processes] for i in range(processes)]
        self.processes = [NodeProcess(["fleet_observers.py"], log_dir / f"observers-{i}.log")
                          for i in range(processes)]

    def ask_all(self, commands: list[dict], timeout: float) -> list[dict]:
        for process, command in zip(self.processes, commands, strict=True):
            process.send(command)
        return [process.answer(timeout, command) for process, command in zip(self.processes, commands, strict=True)]

    def connect(self, port: int, epoch: int, cluster_id: str | None, timeout: float = 120.0) -> int:
        answers = self.ask_all([{"cmd": "connect", "port": port, "ids": share, "epoch": epoch,
                                 "cluster_id": cluster_id} for share in self.shares], timeout)
        return sum(a["connected"] for a in answers)

    def reached(self, offset: int, timeout: float = 120.0) -> int:
        return sum(a["behind"] for a in self.ask_all(
            [{"cmd": "reached", "offset": offset, "timeout": timeout}] * len(self.processes), timeout + 30))

    def stats(self) -> dict:
        answers = self.ask_all([{"cmd": "stats"}] * len(self.processes), 30)
        return {"answers": sum(a["answers"] for a in answers), "bytes": sum(a["bytes"] for a in answers),
                "open": sum(a["open"] for a in answers), "cpu_s": sum(a["cpu_s"] for a in answers),
                "failures": [f for a in answers for f in a["failures"]]}

    def learned(self, offsets: list[int]) -> list[list[float | None]]:
        """Per offset, when each observer learned it was committed."""
        answers = self.ask_all([{"cmd": "learned", "offsets": offsets}] * len(self.processes), 120)
        return [[t for a in answers for t in a["times"][i]] for i in range(len(offsets))]

    def close(self) -> None:
        for process in self.processes:
            process.close()


# ---------------------------------------------------------------- the fleet


def propagation(writes: list[list[float]], learned: list[list[float | None]]) -> dict:
    """From each write's commit on the leader: until every observer knew, and until half did."""
    to_all, to_half, missed = [], [], 0
    for (_, _, committed), times in zip(writes, learned, strict=True):
        known = sorted(t for t in times if t is not None)
        missed += len(times) - len(known)
        if len(known) == len(times):
            to_all.append(known[-1] - committed)
        if known:
            to_half.append(known[len(times) // 2] - committed if len(known) > len(times) // 2 else float("nan"))
    to_all.sort()
    to_half.sort()
    return {"writes": len(writes), "missed": missed, "propagation_all_ms": [t * 1000 for t in to_all],
            "all_p50_ms": percentile(to_all, 0.5) * 1000, "all_p99_ms": percentile(to_all, 0.99) * 1000,
            "half_p50_ms": percentile(to_half, 0.5) * 1000, "half_p99_ms": percentile(to_half, 0.99) * 1000}


def commit_latency(writes: list[list[float]]) -> dict:
    latencies = sorted(committed - submitted for _, submitted, committed in writes)
    return {"commit_p50_ms": percentile(latencies, 0.5) * 1000, "commit_p99_ms": percentile(latencies, 0.99) * 1000}


class LeaderChanged(RuntimeError):
    """The leadership moved during a measurement (a leader too busy to answer its followers
    within their fetch timeout): the part starts again on a new cluster."""


LEADER_ERRORS = ("error 6 ", "error 74 ", "not the active controller")  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
ATTEMPTS = 3


def attempts(run: Any, what: str, observers: int) -> dict:
    """`run(observers)` on a new cluster; if the leadership moves (its followers' fetches
    unanswered for a fetch timeout), again with half the fleet, ATTEMPTS times at most. The
    result names the fleets that lost their leader: that is a figure too."""
    lost: list[int] = []
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return run(observers) | {"leader_lost_at": lost}
        except LeaderChanged as e:
            print(f"  {what}: the leadership moved with {observers} observers ({e}); attempt {attempt} of "
                  f"{ATTEMPTS}{', with half as many' if attempt < ATTEMPTS else ''}", flush=True)
            lost.append(observers)
            observers = max(observers // 2, 1)
    print(f"  {what}: the leadership moved in each of {ATTEMPTS} attempts ({lost} observers): no figures", flush=True)
    return {"leader_lost_at": lost, "failed": True}


def paced(leader: NodeProcess, seconds: float, interval_ms: int = WRITE_INTERVAL_MS) -> list[list[float]]:
    answer = leader.ask({"cmd": "paced", "interval_ms": interval_ms, "seconds": seconds}, timeout=seconds + 120)
    if "error" in answer:
        kind = LeaderChanged if any(e in answer["error"] for e in LEADER_ERRORS) else RuntimeError
        raise kind(f"the paced writer failed: {answer['error']}")
    return answer["writes"]


def check(failures: list[str]) -> None:
    if failures:
        kind = LeaderChanged if any(e in f for f in failures for e in LEADER_ERRORS) else RuntimeError
        raise kind(f"observers failed: {failures[:3]}")


def window(leader: NodeProcess, fleet: ObserverProcesses | None, seconds: float, write: bool = True) -> dict:
    """One measured window: the leader's CPU, the fleet's answers, and (if writing) the writes."""
    pid = leader.process.pid
    before = fleet.stats() if fleet is not None else None
    cpu = cpu_seconds(pid)
    started = time.monotonic()
    writes = paced(leader, seconds) if write else (time.sleep(seconds) or [])
    elapsed = time.monotonic() - started
    result: dict[str, Any] = {"leader_cpu_s": cpu_seconds(pid) - cpu, "seconds": elapsed, "writes": writes}
    if fleet is not None and before is not None:
        after = fleet.stats()
        check(after["failures"])
        result |= {"answers": after["answers"] - before["answers"], "answer_bytes": after["bytes"] - before["bytes"],
                   "observer_cpu_s": after["cpu_s"] - before["cpu_s"]}
    return result


def start_cluster(directory: Path, overrides: dict[str, str] | None = None, observers: int = 0,
                  snapshot: Path | None = None) -> tuple[LocalCluster, list[NodeProcess]]:
    """Three voters (cluster_node.py runners), each starting from `snapshot` if given, and
    `observers` kraft brokers configured but not started."""
    cluster = LocalCluster(directory, voters=3, observers=observers,
                           overrides={**KAFKA_TIMEOUTS, **(overrides or {})})
    voters = [cluster.nodes[v] for v in cluster.voter_ids]
    if snapshot is not None:
        for voter in voters:
            voter.partition_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(snapshot, voter.partition_dir / snapshot.name)
    nodes = [NodeProcess(["cluster_node.py", str(n.config_path)], n.log_path) for n in voters]
    for node, runner in zip(voters, nodes, strict=True):
        node.process = runner.process
    for node in voters:  # a node answers its pipe once started: on a loaded machine, that takes a while
        cluster.wait_listening(node.node_id, timeout=600)
    return cluster, nodes


def fleet(directory: Path, observers: int) -> dict:
    cluster, nodes = start_cluster(directory)
    fleet_processes: ObserverProcesses | None = None
    try:
        leader = wait_for_leader(nodes, timeout=60)
        leader_id = nodes.index(leader) + 1
        info = leader.ask({"cmd": "describe"}, timeout=10)
        paced(leader, WARM_UP_S)
        print(f"  leader node {leader_id} (epoch {info['epoch']}); {observers} observers in "
              f"{OBSERVER_PROCESSES} processes, a write every {WRITE_INTERVAL_MS} ms", flush=True)
        alone = window(leader, None, SECONDS)
        idle_alone = window(leader, None, SECONDS / 2, write=False)
        rss_before = resident_bytes(leader.process.pid)
        fleet_processes = ObserverProcesses(observers, OBSERVER_PROCESSES, directory)
        connected = fleet_processes.connect(cluster.nodes[leader_id].controller_port, info["epoch"],
                                            info["cluster_id"])
        if connected != observers:
            raise RuntimeError(f"only {connected} of {observers} observers were answered")
        hw = leader.ask({"cmd": "describe"}, timeout=10)["high_watermark"]
        behind = fleet_processes.reached(hw)
        if behind:
            check(fleet_processes.stats()["failures"])
            raise RuntimeError(f"{behind} observers did not reach the high watermark {hw}")
        time.sleep(SETTLE_S)
        rss_with = resident_bytes(leader.process.pid)
        idle = window(leader, fleet_processes, SECONDS / 2, write=False)
        busy = window(leader, fleet_processes, SECONDS)
        fleet_processes.reached(busy["writes"][-1][0] + 1)
        learned = fleet_processes.learned([w[0] for w in busy["writes"]])
        spread = propagation(busy["writes"], learned)
        fleet_processes.close()
        fleet_processes = None
        bare_per_connection = bare_server_memory(observers, directory)
    finally:
        if fleet_processes is not None:
            fleet_processes.close()
        for node in nodes:
            node.close()
    extra_cpu = busy["leader_cpu_s"] - alone["leader_cpu_s"] * busy["seconds"] / alone["seconds"]
    idle_extra_cpu = idle["leader_cpu_s"] - idle_alone["leader_cpu_s"] * idle["seconds"] / idle_alone["seconds"]
    per_connection = (rss_with - rss_before) / observers
    return {
        "observers": observers, "write_interval_ms": WRITE_INTERVAL_MS, "seconds": busy["seconds"],
        **spread, **commit_latency(busy["writes"]),
        "alone": commit_latency(alone["writes"]),
        "leader_cores_alone": alone["leader_cpu_s"] / alone["seconds"],
        "leader_cores": busy["leader_cpu_s"] / busy["seconds"],
        "leader_cpu_ms_per_s_per_observer": extra_cpu / busy["seconds"] / observers * 1000,
        "leader_cpu_us_per_answer": extra_cpu / busy["answers"] * 1e6,
        "answers_per_s": busy["answers"] / busy["seconds"],
        "observer_cores": busy["observer_cpu_s"] / busy["seconds"],
        "idle_leader_cpu_ms_per_s_per_observer": idle_extra_cpu / idle["seconds"] / observers * 1000,
        "idle_answers_per_s": idle["answers"] / idle["seconds"],
        "idle_leader_cpu_us_per_answer": idle_extra_cpu / max(idle["answers"], 1) * 1e6,
        "rss_before_MiB": rss_before / 2**20, "rss_with_fleet_MiB": rss_with / 2**20,
        "memory_per_connection_KiB": per_connection / 1024,
        "bare_memory_per_connection_KiB": bare_per_connection / 1024,
    }


# ---------------------------------------------------------------- a fresh broker catching up


def catch_up(directory: Path, observers: int, snapshot: dict) -> dict:
    """The voters start from `snapshot` (fleet_image's million partitions); the fleet, one
    observer fewer, fetches from its end while the controller writes; then a fresh broker
    starts on an empty disk and catches up. Brokers in the image never heartbeat here (the
    light observers only fetch), so their sessions are made long enough not to end."""
    path = Path(snapshot["path"])
    cluster, nodes = start_cluster(directory, {"broker.session.timeout.ms": "86400000"}, observers=1,
                                   snapshot=path)
    fresh = cluster.nodes[4]
    fleet_processes: ObserverProcesses | None = None
    try:
        leader = wait_for_leader(nodes, timeout=600)
        leader_id = cluster.voter_ids[nodes.index(leader)]
        info = leader.ask({"cmd": "describe"}, timeout=10)
        fleet_processes = ObserverProcesses(observers - 1, OBSERVER_PROCESSES, directory)
        if fleet_processes.connect(cluster.nodes[leader_id].controller_port, info["epoch"],
                                   info["cluster_id"]) != observers - 1:
            raise RuntimeError("not every observer was answered")
        behind = fleet_processes.reached(leader.ask({"cmd": "describe"}, timeout=10)["high_watermark"])
        if behind:
            check(fleet_processes.stats()["failures"])
            raise RuntimeError(f"{behind} observers did not reach the high watermark")
        paced(leader, WARM_UP_S)
        before = window(leader, fleet_processes, SECONDS / 2)
        fleet_processes.reached(before["writes"][-1][0] + 1)
        spread_before = propagation(before["writes"], fleet_processes.learned([w[0] for w in before["writes"]]))
        during: dict[str, Any] = {}
        writer = threading.Thread(target=lambda: during.update(window(leader, fleet_processes, SECONDS)))
        started = time.time()
        cluster.start(fresh.node_id, wait=False)
        writer.start()
        progress = fresh_broker_progress(cluster, leader_id, fresh, started)
        writer.join()
        fleet_processes.reached(during["writes"][-1][0] + 1)
        spread_during = propagation(during["writes"], fleet_processes.learned([w[0] for w in during["writes"]]))
    except BaseException:
        cluster.stop(fresh.node_id)
        raise
    finally:
        if fleet_processes is not None:
            fleet_processes.close()
        for node in nodes:
            node.close()
    cluster.stop(fresh.node_id)
    return {"observers": observers - 1, "snapshot_MB": path.stat().st_size / 1e6,
            "partitions": snapshot["partitions"], **progress,
            "before": spread_before | commit_latency(before["writes"]),
            "during": spread_during | commit_latency(during["writes"])}


def fresh_broker_progress(cluster: LocalCluster, leader_id: int, fresh: Any, started: float) -> dict:
    """Seconds from the fresh broker's start until it had fetched the snapshot, loaded it, and
    was at the leader's high watermark (DescribeQuorum's observer entry), and until the
    controller unfenced it (its registration caught up, as Kafka decides a broker has)."""
    def since(path: Path, fragment: str) -> float | None:
        times = [t for t in log_times(path, fragment) if t >= started - 1]
        return times[0] - started if times else None

    deadline = time.monotonic() + 600
    loaded = caught_up = None
    while time.monotonic() < deadline:
        if not fresh.running:
            raise RuntimeError(f"the fresh broker exited; see {fresh.log_path}")
        loaded = loaded or since(fresh.log_path, "loaded snapshot")
        if loaded is not None and caught_up is None:
            p = asyncio.run(describe(cluster.nodes[leader_id].client_port))
            ends = {o.replica_id: o.log_end_offset for o in p.observers}
            if ends.get(fresh.node_id, -1) >= p.high_watermark > 0:
                caught_up = time.time() - started
        unfenced = since(cluster.nodes[leader_id].log_path, f"unfenced broker {fresh.node_id} ")
        if caught_up is not None and unfenced is not None:
            return {"fetched_s": since(fresh.log_path, "100%"), "loaded_s": loaded, "caught_up_s": caught_up,
                    "unfenced_s": unfenced}
        time.sleep(0.2)
    raise TimeoutError(f"the fresh broker did not catch up in 600 s; see {fresh.log_path}")


# ---------------------------------------------------------------- the bare server (memory's baseline)


def bare_server_memory(connections: int, directory: Path) -> float:
    """Resident bytes per connection of a bare asyncio server holding `connections` whose
    clients (the same light observers) each sent one Fetch it never answers."""
    server = subprocess.Popen([sys.executable, __file__, "--bare-server"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert server.stdin is not None and server.stdout is not None
    observers: ObserverProcesses | None = None
    try:
        port = int(server.stdout.readline())
        time.sleep(0.5)
        before = resident_bytes(server.pid)
        observers = ObserverProcesses(connections, OBSERVER_PROCESSES, directory)
        observers.ask_all([{"cmd": "connect", "port": port, "ids": share, "epoch": 0, "cluster_id": None,
                            "wait": False} for share in observers.shares], 120)
        deadline = time.monotonic() + 60
        while True:
            server.stdin.write("count\n")
            server.stdin.flush()
            if int(server.stdout.readline()) >= connections or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        time.sleep(SETTLE_S)
        return (resident_bytes(server.pid) - before) / connections
    finally:
        if observers is not None:
            observers.close()
        server.stdin.close()
        server.wait(10)


def bare_server() -> None:
    """A Protocol per connection that keeps what it reads and never answers."""

    class Parked(asyncio.Protocol):
        def __init__(self) -> None:
            self.received = bytearray()

        def connection_made(self, transport: Any) -> None:
            connections.append(self)

        def data_received(self, data: bytes) -> None:
            self.received += data

    connections: list[Parked] = []

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Parked, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while await reader.readline():
            print(len(connections), flush=True)

    asyncio.run(main())


# ---------------------------------------------------------------- report


def report_fleet(f: dict) -> list[dict]:
    """The fleet's figures (see common.goal), printed; the ones with a goal or a peer returned."""
    if f.get("failed"):
        return [goal("the leader held with a fleet", len(f["leader_lost_at"]), "losses", goal="0", met=False,
                     note=f"lost at {f['leader_lost_at']} observers")]
    print(f"\nFleet: {f['observers']} observers long-polling Fetch v17 on the leader's controller listener, "
          f"a write every {f['write_interval_ms']} ms for {f['seconds']:.0f} s ({f['writes']} writes)")
    rows = [
        goal("commit to every observer, p50", f["all_p50_ms"], "ms", peer="its commit on 3 voters, p50",
             peer_value=f["commit_p50_ms"]),
        goal("commit to every observer, p99", f["all_p99_ms"], "ms", goal=f"<= one Fetch wait ({MAX_WAIT_MS} ms)",
             met=f["all_p99_ms"] <= MAX_WAIT_MS, peer="its commit on 3 voters, p99", peer_value=f["commit_p99_ms"]),
        goal("commit to half the observers, p50", f["half_p50_ms"], "ms", peer="its commit on 3 voters, p50",
             peer_value=f["commit_p50_ms"]),
        goal("leader CPU per observer, writing", f["leader_cpu_ms_per_s_per_observer"], "ms/s",
             peer="the leader's whole CPU, no fleet", peer_value=f["leader_cores_alone"] * 1000),
        goal("leader CPU per Fetch answered", f["leader_cpu_us_per_answer"], "us",
             note=f"{f['answers_per_s']:,.0f} answers/s"),
        goal("leader CPU per observer, idle", f["idle_leader_cpu_ms_per_s_per_observer"], "ms/s",
             note=f"{f['idle_answers_per_s']:,.0f} answers/s, {f['idle_leader_cpu_us_per_answer']:.0f} us each"),
        goal("leader memory per observer connection", f["memory_per_connection_KiB"], "KiB",
             peer="a bare asyncio connection", peer_value=f["bare_memory_per_connection_KiB"]),
        goal("(write, observer) pairs never learned", f["missed"], "pairs", goal="0", met=f["missed"] == 0),
        goal("the leader lost its leadership", len(f["leader_lost_at"]), "times", goal="0",
             met=not f["leader_lost_at"], note=f"with {f['leader_lost_at']} observers" if f["leader_lost_at"] else None),
    ]
    print_goals(rows, TABLE)
    if f["leader_lost_at"]:
        print(f"\nthe leader lost its leadership (followers unanswered for a fetch timeout) with "
              f"{', '.join(map(str, f['leader_lost_at']))} observers; the figures above are of {f['observers']}")
    print(f"\nleader: {f['leader_cores']:.2f} cores with the fleet, {f['leader_cores_alone']:.2f} without; "
          f"observers' processes {f['observer_cores']:.2f} cores; resident {f['rss_before_MiB']:.0f} MiB before the "
          f"fleet, {f['rss_with_fleet_MiB']:.0f} MiB with it")
    f["rows"] = rows
    return compared(rows)


# Kafka's published figures, each with where it comes from.
KAFKA_TOPIC_ADD_NS = 250  # apache/kafka PR 13280 (KAFKA-14735): TopicsImageSingleRecordChangeBenchmark, "~250 ns"
KAFKA_ZONAL_PER_BROKER_MS = 19.6  # PR 13280: TopicsImageZonalOutageBenchmark, 100,000 topics, PCollections (shipped)
KAFKA_ZONAL_PARTITIONS_PER_BROKER = 10_000  # that benchmark's numReplicasPerBroker (300 brokers)
KAFKA_ZONAL_BROKERS = 100  # a third of its 300 brokers: its whole outage is 100 such operations
KAFKA_2M_RECOVERY_S = 37  # Confluent, "A First Glimpse of a Kafka Without ZooKeeper" (2021): 2M partitions,
                          # recovery from an uncontrolled shutdown (KRaft; 503 s with ZooKeeper)
SNAPSHOT_LOAD_GOAL_S, SNAPSHOT_MEMORY_GOAL = 20.0, 2 << 30  # issue 7's targets (metadata_bench.py)


def report_partitions(m: dict) -> list[dict]:
    """The million partitions' figures beside Kafka's published ones, printed; the ones with a
    goal or a peer returned."""
    one, many, fence, zonal, snap = m["create_one"], m["create_many"], m["fence"], m["zonal"], m["snapshot"]
    print(f"\nThe metadata image: {m['topics']:,} topics x 10 partitions, RF 3, {m['brokers']:,} brokers "
          f"({m['partitions']:,} partitions; built in {m['build_s']:.0f} s); CPU seconds of one process")
    kafka_zonal_s = KAFKA_ZONAL_PER_BROKER_MS * KAFKA_ZONAL_BROKERS / 1000
    rows = [
        goal("CreateTopics, 1 topic: replica apply", one["replica_s"] * 1e6, "us",
             peer="Kafka: add one topic (JMH, PR 13280)", peer_value=KAFKA_TOPIC_ADD_NS / 1000),
        goal("CreateTopics, 1 topic: controller", one["controller_s"] * 1e6, "us",
             note=f"{one['records']} records, {one['memory_bytes'] / 1024:.0f} KiB held"),
        goal(f"CreateTopics, {many['topics']} topics: replica apply", many["replica_s"] * 1000, "ms",
             note=f"controller {many['controller_s'] * 1000:.0f} ms, {many['memory_bytes'] / 2**20:.1f} MiB held"),
        goal(f"broker fence ({fence['partitions_hosted']:,} partitions): replica", fence["replica_s"] * 1000, "ms",
             peer=f"Kafka: one broker of a zonal outage ({KAFKA_ZONAL_PARTITIONS_PER_BROKER:,} partitions)",
             peer_value=KAFKA_ZONAL_PER_BROKER_MS),
        goal("broker fence: replica, per partition", fence["replica_s"] / fence["partitions_hosted"] * 1e6, "us",
             peer="Kafka: the same, per partition",
             peer_value=KAFKA_ZONAL_PER_BROKER_MS * 1000 / KAFKA_ZONAL_PARTITIONS_PER_BROKER),
        goal("broker fence: controller", fence["controller_s"] * 1000, "ms",
             note=f"{fence['records']:,} records, {fence['memory_bytes'] / 2**20:.1f} MiB held"),
        goal(f"zonal outage ({zonal['brokers']} brokers): replica", zonal["replica_s"], "s",
             peer=f"Kafka: {KAFKA_ZONAL_BROKERS} x its per-broker figure", peer_value=kafka_zonal_s),
        goal("zonal outage: controller", zonal["controller_s"], "s",
             peer="Kafka's replica figure (it publishes none for its controller)", peer_value=kafka_zonal_s),
        goal("zonal outage: memory", zonal["memory_bytes"] / 2**20, "MiB",
             note=f"{zonal['records']:,} records; {zonal['partitions_left_leaderless']:,} partitions leaderless"),
        goal("snapshot load (CPU)", snap["load_cpu_s"], "s", goal=f"< {SNAPSHOT_LOAD_GOAL_S:.0f} s (issue 7)",
             met=snap["load_cpu_s"] < SNAPSHOT_LOAD_GOAL_S, peer="Kafka: 2M-partition cluster's recovery",
             peer_value=KAFKA_2M_RECOVERY_S, note=f"{snap['load_s']:.1f} s of wall time"),
        goal("snapshot load: peak memory", snap["peak_memory_bytes"] / 2**20, "MiB",
             goal=f"< {SNAPSHOT_MEMORY_GOAL / 2**30:.0f} GiB (issue 7)",
             met=snap["peak_memory_bytes"] < SNAPSHOT_MEMORY_GOAL),
    ]
    print_goals(rows, TABLE)
    print(f"\nsnapshot: {snap['bytes'] / 1e6:.0f} MB, written in {snap['write_s']:.1f} s. Kafka's JMH figures time "
          f"TopicsDelta.apply() alone on a prepared delta (its records already replayed into it); kraft's replica "
          f"figure also reads the batch and decodes and replays its records.")
    m["rows"] = rows
    return compared(rows)


def report_catch_up(c: dict, load_s: float | None) -> list[dict]:
    """The fresh broker's catch-up and the fleet's propagation while it runs, printed; the
    figures with a goal or a peer returned."""
    if c.get("failed"):
        return [goal("the leader held while a broker caught up", len(c["leader_lost_at"]), "losses", goal="0",
                     met=False, note=f"lost at {c['leader_lost_at']} observers")]
    b, d = c["before"], c["during"]
    print(f"\nA fresh broker catching up on the {c['partitions']:,}-partition snapshot ({c['snapshot_MB']:.0f} MB) "
          f"while {c['observers']} observers fetch and the controller writes")
    before = "the same before the broker started"
    rows = [
        goal("fresh broker: snapshot fetched", c["fetched_s"], "s", note="from its start"),
        goal("fresh broker: snapshot loaded", c["loaded_s"], "s", note="from its start"),
        goal("fresh broker: at the high watermark", c["caught_up_s"], "s",
             peer="the snapshot's load alone (wall, fresh process)" if load_s else None, peer_value=load_s),
        goal("fresh broker: unfenced by the controller", c["unfenced_s"], "s", note="from its start"),
        goal("commit to every observer, p50, during", d["all_p50_ms"], "ms", peer=before, peer_value=b["all_p50_ms"]),
        goal("commit to every observer, p99, during", d["all_p99_ms"], "ms", peer=before, peer_value=b["all_p99_ms"]),
        goal("commit on 3 voters, p99, during", d["commit_p99_ms"], "ms", peer=before, peer_value=b["commit_p99_ms"]),
        goal("(write, observer) pairs never learned, during", d["missed"], "pairs", goal="0", met=d["missed"] == 0),
    ]
    print_goals(rows, TABLE)
    c["rows"] = rows
    return compared(rows)


def plot(results: dict, path: Path) -> None:
    """The fleet's propagation: commit to every observer, per write, alone and during the catch-up."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, label in (("fleet", "fleet"), ("catchup", "catch-up: before"), ("catchup", "catch-up: during")):
        part = results.get(name)
        if not part or part.get("failed"):
            continue
        data = part["propagation_all_ms"] if name == "fleet" else part[label.split(": ")[1]]["propagation_all_ms"]
        if data:
            ax.plot(sorted(data), [i / len(data) for i in range(len(data))], label=label)
    ax.set(xscale="log", xlabel="commit to every observer (ms)", ylabel="fraction of writes",
           title="Propagation of a committed record to the fleet")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=PARTS, help="run only these parts (repeatable)")
    parser.add_argument("--scale", type=float, default=float(os.environ.get("KRAFT_FLEET_SCALE", "1")),
                        help="multiplies the observers and the topics (default 1, the full scale)")
    args = parser.parse_args()
    parts = args.only or list(PARTS)
    observers = max(8, round(OBSERVERS * args.scale))
    topics = max(1000, round(fleet_image.TOPICS * args.scale))
    brokers = max(30, round(fleet_image.BROKERS * args.scale))
    RESULTS.mkdir(exist_ok=True)
    directory = Path(tempfile.mkdtemp(dir=RESULTS, prefix="fleet-bench-"))
    goals: list[dict] = []
    results: dict[str, Any] = {"scale": args.scale}
    try:
        if "fleet" in parts:
            print("Fleet: light observers on a 3-voter cluster's leader", flush=True)
            results["fleet"] = attempts(lambda n: fleet(directory / f"fleet-{time.monotonic_ns()}", n), "fleet",
                                        observers)
            goals += report_fleet(results["fleet"])
        if "partitions" in parts or "catchup" in parts:
            print(f"\nThe image at {topics * fleet_image.PARTITIONS:,} partitions ({topics:,} topics, {brokers:,} "
                  "brokers), in one process", flush=True)
            results["partitions"] = fleet_image.measure(topics, brokers, directory / "snapshot")
            goals += report_partitions(results["partitions"])
        if "catchup" in parts:
            print("\nA fresh broker catching up while the fleet fetches", flush=True)
            snapshot = results["partitions"]["snapshot"]
            results["catchup"] = attempts(lambda n: catch_up(directory / f"catchup-{time.monotonic_ns()}", n,
                                                             snapshot), "catch-up", min(observers, brokers))
            goals += report_catch_up(results["catchup"], results["partitions"]["snapshot"]["load_s"])
        plot(results, RESULTS / "fleet_bench.png")
        print(f"plot: {RESULTS / 'fleet_bench.png'}")
    except BaseException:
        print(f"the nodes' and observers' logs are kept in {directory}", file=sys.stderr)
        raise
    shutil.rmtree(directory, ignore_errors=True)
    path = write_results("fleet", [], goals, **results)
    print(f"results: {path}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--bare-server"]:
        bare_server()
        sys.exit(0)
    sys.exit(main())
