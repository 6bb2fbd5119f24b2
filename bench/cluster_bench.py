"""A 3-voter kraft cluster on loopback against PySyncObj, a snapshot fetched by a new
observer against a raw socket, and failover after SIGKILL (issue 8).

Throughput and commit latency: 3 voter processes each, 100-byte records, the load made
inside the leader's process as a closed loop of N operations in flight (cluster_node.py,
syncobj_node.py). kraft counts a record only once it is fsynced (group commit, the
default) and replicates framed ConfigRecords that every node's QuorumController applies;
PySyncObj runs with its defaults (no journal, nothing fsynced). First N = 1000, then N is raised until throughput grows
by less than 5%, for both; the best of each is compared.

Snapshot transfer: the voters start holding a ~200 MB snapshot (an image of topic
configs) and an empty log after it; a new observer (process.roles=broker) with an empty
disk fetches it with FetchSnapshot. Its rate against the raw operation it wraps: os.sendfile
of the same file over a loopback TCP socket to a reader that writes it to a file on the
same disk, and for reference to one that discards what it reads. The observer fetches the
snapshot five times (from an empty disk each time), each fetch between two raw transfers
to a file, one just before it and one just after: on this VM, how fast 200 MB can be
written depends on whether the memory was freed a moment ago (warm) or handed back to the
host (cold), and whichever of two writes comes first pays. The ratio compares each fetch
with the mean of the two raw transfers around it, and is the median over the trials. A download that a change of leader cuts short starts again, so the fetch is timed
from the first chunk asked for to the last one written (the observer's log lines), and
the attempts are counted.

Failover: SIGKILL the leader of a LocalCluster (3 voters, its election timeout, and a fetch
timeout equal to it), time
until another node answers DescribeQuorum as leader of a newer epoch; restart the killed
node, wait until it has caught up, repeat.

Targets: at 1000 in flight >= 5x PySyncObj's ops/s with p99 < 20 ms; at saturation >= 2x
its best; snapshot transfer >= 0.5x the raw socket; failover p99 < 2x the election timeout.
"""

import argparse
import asyncio
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from cluster_load import MAX_RUN_S, RECORD_BYTES, percentile
from common import RESULTS, all_met, goal, print_goals, print_table, write_results

from kraft.cli.local_cluster import LOCAL_DEFAULTS, LocalCluster, LocalNode, free_port
from kraft.metadata import ConfigResourceType, encode_record, image_from_records, snapshot_records
from kraft.metadata.records import ConfigRecord
from kraft.protocol import ErrorCode
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m
from kraft.storage import FileSnapshotStore, SnapshotId
from kraft.storage.meta_properties import format_storage

HERE = Path(__file__).parent
LINGER_MS = 1  # controller.quorum.append.linger.ms for the throughput cluster
HEADLINE_IN_FLIGHT = 1000
LEVELS = (1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000)
GROWTH = 1.05  # a level must beat the best so far by 5% for the search to go on
SECONDS = 5.0  # measured window of each level
WARM_UP_SECONDS = 2.0  # an unmeasured run at the headline level first: first-touch costs (page faults, caches)
SNAPSHOT_BYTES = 200 * 10**6
SNAPSHOT_VALUE = 1000  # characters of each config value in the snapshot's image
SNAPSHOT_TRIALS = 5
FAILOVER_TRIALS = 20
PARTS = ("throughput", "snapshot", "failover")
# A follower notices a dead leader when its fetch timeout expires, so failover takes at least
# that long: the failover cluster uses a fetch timeout equal to the election timeout (Kafka's
# defaults are 2000 and 1000 ms; LocalCluster's 1000 and 500).
FAILOVER_CONFIG = {"controller.quorum.fetch.timeout.ms": LOCAL_DEFAULTS["controller.quorum.election.timeout.ms"]}


# ---------------------------------------------------------------- node processes and their pipes


class NodeProcess:
    """A node runner (cluster_node.py or syncobj_node.py) and its command pipe."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, *args], cwd=HERE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                text=True,
            )
        self.log_path = log_path

    def ask(self, command: dict, timeout: float) -> dict:
        self.send(command)
        return self.answer(timeout, command)

    def send(self, command: dict) -> None:
        """A command whose answer `answer` reads later (so several runners work at once)."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def answer(self, timeout: float, command: Any = "the last command") -> dict:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"no answer to {command} (exit code {self.process.poll()}); see {self.log_path}")
        return json.loads(line)

    def close(self) -> None:
        """Closing the pipe stops the node; it is killed if it does not stop."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wait_for_leader(nodes: list[NodeProcess], timeout: float = 30.0) -> NodeProcess:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            if node.ask({"cmd": "role"}, timeout=10)["leader"]:
                return node
        time.sleep(0.1)
    raise TimeoutError("no leader after 30 s")


def run_levels(system: str, nodes: list[NodeProcess]) -> list[dict]:
    """After a warm-up, the headline level, then higher ones while throughput still grows by 5%."""
    leader = wait_for_leader(nodes)
    leader.ask({"cmd": "load", "in_flight": HEADLINE_IN_FLIGHT, "seconds": WARM_UP_SECONDS}, timeout=MAX_RUN_S + 30)
    rows: list[dict] = []
    best = 0.0
    for level in LEVELS:
        result = leader.ask({"cmd": "load", "in_flight": level, "seconds": SECONDS}, timeout=MAX_RUN_S + 30)
        if "error" in result:
            if not rows:
                raise RuntimeError(f"{system} at {level} in flight: {result['error']}")
            print(f"  {system:9} {level:>6} in flight: failed ({result['error']}); the search stops here")
            break
        rows.append({"system": system, **result})
        print(f"  {system:9} {level:>6} in flight: {result['ops_s']:9,.0f} ops/s  "
              f"p50 {result['p50_ms']:7.1f} ms  p99 {result['p99_ms']:7.1f} ms", flush=True)
        if result["ops_s"] < best * GROWTH:
            break
        best = max(best, result["ops_s"])
    return rows


def kraft_levels(directory: Path, overrides: dict[str, str] | None = None, system: str = "kraft") -> list[dict]:
    """`overrides`: more server.properties (security_bench.py secures the listeners)."""
    cluster = LocalCluster(directory, voters=3, observers=0,
                           overrides={"controller.quorum.append.linger.ms": str(LINGER_MS), **(overrides or {})})
    nodes = [NodeProcess(["cluster_node.py", str(n.config_path)], n.log_path) for n in cluster.nodes.values()]
    try:
        return run_levels(system, nodes)
    finally:
        for node in nodes:
            node.close()


def syncobj_levels(directory: Path) -> list[dict]:
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    nodes = [
        NodeProcess(["syncobj_node.py", a, *(b for b in addresses if b != a)], directory / f"syncobj-{i}.log")
        for i, a in enumerate(addresses, 1)
    ]
    try:
        return run_levels("PySyncObj", nodes)
    finally:
        for node in nodes:
            node.close()


def plot(rows: list[dict], path: Path, systems: tuple[str, ...] = ("kraft", "PySyncObj"),
         title: str = "Throughput, 3 voters, 100-byte records") -> None:
    """Throughput and p99 latency against operations in flight, of each system (groups_bench.py's too)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ops, p99) = plt.subplots(1, 2, figsize=(11, 4.2))
    for system in systems:
        own = [r for r in rows if r["system"] == system]
        x = [r["in_flight"] for r in own]
        ops.plot(x, [r["ops_s"] for r in own], marker="o", label=system)
        p99.plot(x, [r["p99_ms"] for r in own], marker="o", label=system)
    ops.set(xscale="log", xlabel="operations in flight", ylabel="committed operations/s", title=title)
    p99.set(xscale="log", yscale="log", xlabel="operations in flight", ylabel="p99 commit latency (ms)",
            title="p99 latency")
    for ax in (ops, p99):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ops.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- DescribeQuorum, polled fast


async def describe(port: int, where: m.LogPartition = m.METADATA) -> Any:
    """DescribeQuorum of one partition (the metadata one unless named) asked of `port`."""
    connection = await KafkaConnection.connect("127.0.0.1", port, timeout=1.0)
    try:
        response = await connection.request(m.describe_quorum_request(where), 1.0)
    finally:
        connection.close()
    return response.topics[0].partitions[0]


async def _poll_leader(cluster: LocalCluster, after_epoch: int, exclude: int | None, timeout: float) -> tuple:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in cluster.nodes.values():
            if node.node_id == exclude or not node.running:
                continue
            try:
                p = await describe(node.client_port)
            except (OSError, TimeoutError):
                continue
            if p.error_code == ErrorCode.none and p.leader_epoch > after_epoch:
                return p.leader_id, p.leader_epoch
        await asyncio.sleep(0.005)
    raise TimeoutError(f"no leader of an epoch after {after_epoch} within {timeout} s")


def leader_after(cluster: LocalCluster, after_epoch: int = 0, exclude: int | None = None,
                 timeout: float = 30.0) -> tuple[int, int]:
    """(id, epoch) of the first node other than `exclude` that answers DescribeQuorum as the
    leader of an epoch after `after_epoch`. Polled every 5 ms, not every 100 ms as the
    tests' helper does: here the time it answers is the measurement."""
    return asyncio.run(_poll_leader(cluster, after_epoch, exclude, timeout))


def wait_caught_up(cluster: LocalCluster, leader_id: int, node_id: int, timeout: float = 60.0) -> None:
    """Until the leader reports `node_id` at or past its high watermark."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = asyncio.run(describe(cluster.nodes[leader_id].client_port))
        if p.error_code == ErrorCode.none:
            ends = {v.replica_id: v.log_end_offset for v in p.current_voters}
            if p.high_watermark > 0 and ends.get(node_id, -1) >= p.high_watermark:
                return
        time.sleep(0.05)
    raise TimeoutError(f"node {node_id} did not catch up with leader {leader_id} in {timeout} s")


# ---------------------------------------------------------------- snapshot transfer


def write_snapshot(directory: Path) -> tuple[Path, SnapshotId]:
    """A ~200 MB snapshot of an image holding one 1 KB config on each of many topics,
    written as kraft writes its own (snapshot_records of the image)."""
    sample = encode_record(ConfigRecord(ConfigResourceType.TOPIC, "snapshot-0000000", "bench.blob", "x" * SNAPSHOT_VALUE))
    count = SNAPSHOT_BYTES // len(sample)
    records = [
        ConfigRecord(ConfigResourceType.TOPIC, f"snapshot-{i:07d}", "bench.blob", f"{i:0{SNAPSHOT_VALUE}d}")
        for i in range(count)
    ]
    image = image_from_records(records, offset=count - 1, epoch=1)
    store = FileSnapshotStore(directory)
    snapshot_id = SnapshotId(count, 1)  # as if the log had held the records at offsets 0..count-1
    with store.create_writer(snapshot_id, int(time.time() * 1000)) as writer:
        writer.append(list(snapshot_records(image)))
        writer.freeze()
    return store.path(snapshot_id), snapshot_id


def raw_socket_seconds(path: Path, sink: Path | None = None) -> float:
    """os.sendfile of the file over loopback TCP, each read (1 MiB at most) written to
    `sink` (not fsynced: the fetch is timed before its fsync) or discarded."""
    size = path.stat().st_size
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = threading.Thread(target=_send_file, args=(server, path, size))
        sender.start()
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        received = 0
        out = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if sink is not None else None
        start = time.perf_counter()
        with socket.create_connection(server.getsockname()) as client:
            while n := client.recv_into(buffer):
                received += n
                if out is not None:
                    os.write(out, view[:n])
        elapsed = time.perf_counter() - start
        if out is not None:
            os.close(out)
            os.unlink(sink)
        sender.join()
    assert received == size
    return elapsed


def _send_file(server: socket.socket, path: Path, size: int) -> None:
    connection, _ = server.accept()
    with connection, open(path, "rb") as file:
        offset = 0
        while offset < size:
            offset += os.sendfile(connection.fileno(), file.fileno(), offset, size - offset)


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def log_times(log_path: Path, fragment: str) -> list[float]:
    """The times of the lines of a node's log that hold `fragment`."""
    return [
        datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for line in log_path.read_text(errors="replace").splitlines()
        if fragment in line and (match := _LOG_TIME.match(line))
    ]


def snapshot_transfer(directory: Path) -> dict:
    source, sid = write_snapshot(directory / "snapshot-source")
    size = source.stat().st_size
    cluster = LocalCluster(directory / "snapshot-cluster", voters=3, observers=1)
    observer = cluster.nodes[4]
    try:
        for voter in cluster.voter_ids:
            cluster.nodes[voter].partition_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, cluster.nodes[voter].partition_dir / source.name)
            cluster.start(voter, wait=False)
        for voter in cluster.voter_ids:
            cluster.wait_listening(voter, timeout=120)
        leader_after(cluster, timeout=60)
        sink = observer.partition_dir.parent / "raw-transfer.bin"
        trials = []
        for _ in range(SNAPSHOT_TRIALS):
            raw = raw_socket_seconds(source)
            observer.partition_dir.parent.mkdir(parents=True, exist_ok=True)
            before = raw_socket_seconds(source, sink=sink)
            trial = observer_catch_up(cluster, observer, f"{sid.end_offset}-{sid.epoch}")
            after = raw_socket_seconds(source, sink=sink)
            trials.append({**trial, "raw_s": raw, "raw_to_file_s": (before + after) / 2})
    finally:
        cluster.stop()
    best = min(trials, key=lambda t: t["fetch_s"])
    return {
        "snapshot_MB": size / 1e6,
        "trials": len(trials),
        "attempts": best["attempts"],
        "fetch_MB_s": size / best["fetch_s"] / 1e6,
        "slowest_fetch_MB_s": size / max(t["fetch_s"] for t in trials) / 1e6,
        "last_attempt_MB_s": size / max(best["last_attempt_s"], 0.001) / 1e6,
        "raw_socket_MB_s": size / min(t["raw_s"] for t in trials) / 1e6,
        "raw_to_file_MB_s": size / min(t["raw_to_file_s"] for t in trials) / 1e6,
        "ratio_to_socket": statistics.median(t["raw_s"] / t["fetch_s"] for t in trials),
        "ratio": statistics.median(t["raw_to_file_s"] / t["fetch_s"] for t in trials),
        "observer_start_to_loaded_s": best["start_to_loaded_s"],
    }


def empty_disk(cluster: LocalCluster, node: LocalNode) -> None:
    """The node's data directory as a new disk: formatted, nothing else (the log-dir
    checkpoints gone too)."""
    shutil.rmtree(node.data_dir, ignore_errors=True)
    format_storage(node.data_dir, cluster.cluster_id, node.node_id)


def observer_catch_up(cluster: LocalCluster, observer: LocalNode, name: str) -> dict:
    """Starts the observer on an empty log, times its FetchSnapshot of `name` from its
    own log lines, and stops it again."""
    empty_disk(cluster, observer)
    started = time.time()

    def since_start(fragment: str) -> list[float]:
        return [t for t in log_times(observer.log_path, fragment) if t >= started]

    cluster.start(observer.node_id)
    try:
        deadline = time.monotonic() + 300
        while not (loaded := since_start(f"loaded snapshot {name}")):
            if time.monotonic() > deadline or not observer.running:
                raise RuntimeError(f"the observer did not load snapshot {name}; see {observer.log_path}")
            time.sleep(0.1)
        attempts = since_start(f"fetching snapshot {name} from leader")
        done = since_start(f"fetching snapshot {name}: 100%")[0]
    finally:
        cluster.stop(observer.node_id)
    return {
        "attempts": len(attempts),
        "fetch_s": done - attempts[0],
        "last_attempt_s": done - max(t for t in attempts if t <= done),
        "start_to_loaded_s": loaded[0] - started,
    }


def failover(directory: Path) -> dict:
    cluster = LocalCluster(directory / "failover-cluster", voters=3, observers=0, overrides=FAILOVER_CONFIG)
    times: list[float] = []
    try:
        cluster.start()
        leader, epoch = leader_after(cluster)
        for _ in range(FAILOVER_TRIALS):
            killed = time.perf_counter()
            cluster.kill(leader)
            new_leader, epoch = leader_after(cluster, after_epoch=epoch, exclude=leader)
            times.append(time.perf_counter() - killed)
            cluster.start(leader)
            wait_caught_up(cluster, new_leader, leader)
            leader = new_leader
    finally:
        cluster.stop()
    times.sort()
    print("  failover times (ms):", " ".join(f"{t * 1000:.0f}" for t in times), flush=True)
    election_ms = int(LOCAL_DEFAULTS["controller.quorum.election.timeout.ms"])
    return {
        "trials": len(times),
        "election_timeout_ms": election_ms,
        "fetch_timeout_ms": int(FAILOVER_CONFIG["controller.quorum.fetch.timeout.ms"]),
        "p50_ms": percentile(times, 0.50) * 1000,
        "p99_ms": percentile(times, 0.99) * 1000,
        "max_ms": times[-1] * 1000,
        "ratio_to_2x_election_timeout": percentile(times, 0.99) * 1000 / (2 * election_ms),
    }


# ---------------------------------------------------------------- report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=PARTS, help="run only these parts (repeatable)")
    parts = parser.parse_args().only or list(PARTS)
    RESULTS.mkdir(exist_ok=True)
    directory = Path(tempfile.mkdtemp(dir=RESULTS, prefix="cluster-bench-"))
    try:
        rows = snapshot = fail = None
        if "throughput" in parts:
            print(f"Throughput and commit latency: 3 voters on loopback, {RECORD_BYTES}-byte records, load in the "
                  f"leader's process; kraft fsyncs (linger {LINGER_MS} ms), PySyncObj with its defaults (no fsync)",
                  flush=True)
            rows = kraft_levels(directory / "kraft") + syncobj_levels(directory)
        if "snapshot" in parts:
            snapshot = snapshot_transfer(directory)
        if "failover" in parts:
            fail = failover(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return report(rows, snapshot, fail)


def report(rows: list[dict] | None, snapshot: dict | None, fail: dict | None) -> int:
    goals: list[dict] = []
    comparison = None
    if rows is not None:
        comparison, goals = report_throughput(rows)
    if snapshot is not None:
        print(f"\nSnapshot transfer to a new observer ({snapshot['snapshot_MB']:.0f} MB, FetchSnapshot chunks of "
              f"replica.fetch.response.max.bytes), against os.sendfile over a loopback socket; {SNAPSHOT_TRIALS} "
              f"fetches, each between raw transfers to a file; MB/s the best of each, ratios the median over the "
              f"trials\n")
        print_table([snapshot], ["snapshot_MB", "trials", "attempts", "fetch_MB_s", "slowest_fetch_MB_s",
                                 "last_attempt_MB_s",
                                 "raw_socket_MB_s", "raw_to_file_MB_s", "ratio_to_socket", "ratio",
                                 "observer_start_to_loaded_s"])
        print("\nratio = raw transfer time / fetch time. The raw transfer is the operation a fetch wraps: the file "
              "sent with os.sendfile over loopback TCP and written to a file beside the observer's log (the mean of "
              "the transfers just before and just after the fetch); ratio_to_socket compares with the bytes read "
              "and discarded instead, which leaves out the writing a fetch cannot skip. The fetch runs from the "
              "first FetchSnapshot to the last byte written; an attempt is cut short when the leader changes.")
        goals.append(goal("snapshot transfer", snapshot["fetch_MB_s"], "MB/s", goal=">= 0.5x the peer",
                          met=snapshot["ratio"] >= 0.5, peer="os.sendfile over loopback to a file",
                          peer_value=snapshot["raw_to_file_MB_s"], ratio=snapshot["ratio"]))
    if fail is not None:
        print(f"\nFailover after SIGKILL of the leader, {fail['trials']} trials (election timeout "
              f"{fail['election_timeout_ms']} ms, fetch timeout {fail['fetch_timeout_ms']} ms)\n")
        print_table([fail], ["trials", "p50_ms", "p99_ms", "max_ms", "election_timeout_ms",
                             "ratio_to_2x_election_timeout"])
        goals.append(goal("failover after SIGKILL of the leader, p99", fail["p99_ms"], "ms",
                          goal=f"< 2x the election timeout ({2 * fail['election_timeout_ms']} ms)",
                          met=fail["ratio_to_2x_election_timeout"] < 1))
    print_goals(goals)
    path = write_results("cluster", rows or [], goals, comparison=comparison, snapshot=snapshot, failover=fail,
                         linger_ms=LINGER_MS)
    print(f"results: {path}")
    return 0 if all_met(goals) else 1


def report_throughput(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The throughput table, and its goals against PySyncObj's figures (see common.goal)."""
    ours = [r for r in rows if r["system"] == "kraft"]
    theirs = [r for r in rows if r["system"] == "PySyncObj"]
    head_ours, head_theirs = ours[0], theirs[0]
    best_ours = max(ours, key=lambda r: r["ops_s"])
    best_theirs = max(theirs, key=lambda r: r["ops_s"])
    comparison = [
        {"level": f"{HEADLINE_IN_FLIGHT} in flight", "kraft_ops_s": head_ours["ops_s"],
         "pysyncobj_ops_s": head_theirs["ops_s"], "ratio": head_ours["ops_s"] / head_theirs["ops_s"],
         "kraft_p99_ms": head_ours["p99_ms"], "pysyncobj_p99_ms": head_theirs["p99_ms"]},
        {"level": f"saturation (kraft {best_ours['in_flight']}, PySyncObj {best_theirs['in_flight']})",
         "kraft_ops_s": best_ours["ops_s"], "pysyncobj_ops_s": best_theirs["ops_s"],
         "ratio": best_ours["ops_s"] / best_theirs["ops_s"], "kraft_p99_ms": best_ours["p99_ms"],
         "pysyncobj_p99_ms": best_theirs["p99_ms"]},
    ]
    print()
    print_table(rows, ["system", "in_flight", "ops_s", "p50_ms", "p99_ms", "ops"])
    print()
    print_table(comparison, ["level", "kraft_ops_s", "pysyncobj_ops_s", "ratio", "kraft_p99_ms", "pysyncobj_p99_ms"])
    plot(rows, RESULTS / "cluster_bench.png")
    print(f"plot: {RESULTS / 'cluster_bench.png'}")
    headline, peer = f"{HEADLINE_IN_FLIGHT} in flight", "PySyncObj, same load"
    return comparison, [
        goal(f"ops/s, {headline}", head_ours["ops_s"], "ops/s", goal=">= 5x the peer",
             met=comparison[0]["ratio"] >= 5, peer=peer, peer_value=head_theirs["ops_s"]),
        goal(f"p99, {headline}", head_ours["p99_ms"], "ms", goal="< 20 ms", met=head_ours["p99_ms"] < 20,
             peer=peer, peer_value=head_theirs["p99_ms"]),
        goal(f"ops/s at saturation ({best_ours['in_flight']} in flight)", best_ours["ops_s"], "ops/s",
             goal=">= 2x the peer's best", met=comparison[1]["ratio"] >= 2,
             peer=f"PySyncObj's best ({best_theirs['in_flight']} in flight)", peer_value=best_theirs["ops_s"]),
    ]


if __name__ == "__main__":
    sys.exit(main())
