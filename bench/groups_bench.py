"""Consumer groups on Raft partitions (issue 21): offset commits from many consumers against
the metadata log's own writes, and a fresh voter catching up every partition by snapshot
against a replay of the logs.

Commits: a 3-voter LocalCluster (real processes, real TCP on loopback, fsync on), with
`__consumer_offsets` as 3 Raft partitions beside `__cluster_metadata`. N consumers (1, 4,
16), each on a connection of its own to its group's coordinator (found by FindCoordinator),
each committing one offset of `__cluster_metadata-0` with a leader epoch (OffsetCommit
v8, a simple group: generation -1) in a closed loop: the next commit goes as soon as the
last is answered, so the figure is the cluster's throughput with N in flight, not one
request's latency. Consumer i's group hashes to partition i mod 3, so the groups share the
partitions evenly. The baseline, in the same run on the same cluster: N admin clients, each
on a connection of its own to the active controller, altering one topic config
(IncrementalAlterConfigs, one ConfigRecord a write) in a closed loop: the metadata log's own
commit rate, measured the same way. Both answer only once the record has committed. Last,
the top level again with every group on one offsets partition. Printed: commits/s, p50/p99
latency and the three nodes' CPU a write (from /proc) of each, the ratio commits/s / metadata
writes/s at each level, and the top level's commits spread over the offsets partitions
against the same on one, with its goal (issue 28: at least 0.9; the exit status says whether
it was met) and the partitions' leaders (followers fetch every partition a leader holds in
one Fetch, so what they share depends on where the elections put them).

Catch-up: two 3-voter clusters filled the same way (offset commits of many partitions in
every offsets partition, config writes in the metadata log). In one, snapshots are taken
often and retention has moved every log's start past them; in the other no snapshot is
taken, so every log starts at 0. Then a voter is stopped, its disk emptied, and it is
started again: in the first cluster it must fetch each partition's snapshot (FetchSnapshot)
and the log after it; in the second it replays every log from offset 0. Timed from its
start until the leader of every partition (DescribeQuorum naming it) reports it at the high
watermark that partition had when it started. Printed: seconds per partition, the time
until all four are caught up, and the ratio replay / snapshot.

    python bench/groups_bench.py [--only commits|catchup] [--scale N]

`--scale N` multiplies the fill and the measured window (default 1: about two minutes on
two cores).
"""

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cluster_bench import describe, empty_disk, log_times, plot
from cluster_load import Window
from common import GOAL_COLUMNS, RESULTS, all_met, cpu_seconds, goal, print_goals, print_table, write_results

from kraft.cli.cluster_client import create_topic, leader, settled_coordinators
from kraft.cli.local_cluster import LocalCluster
from kraft.groups import OFFSETS_TOPIC, partition_for
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m
from kraft.server.runtime.node import OFFSETS_TOPIC_ID

PARTS = ("commits", "catchup")
OFFSETS_PARTITIONS = 3
CONSUMERS = (1, 4, 16)
SPREAD_GOAL = 0.9
SECONDS = 3.0  # measured window of each level (after cluster_load's warm-up)
REQUEST_TIMEOUT_S = 30.0
METADATA_TOPIC = "__cluster_metadata"
CONFIG_TOPIC = "bench-configs"  # the baseline's writes alter its retention.ms
FILL_TOPIC = "bench-fill"  # the fill commits offsets of its partitions
FILL_TOPIC_PARTITIONS = 64  # offsets committed by one fill commit: 64 records
FILL_COMMITS = 1000  # fill commits per offsets partition (64,000 records each at --scale 1)
FILL_CONFIG_TOPICS = 16  # config records written by one fill metadata write
FILL_CONFIG_WRITES = 1000  # fill metadata writes (16,000 records at --scale 1)
FILL_CONNECTIONS = 3  # per kind of write and per offsets partition
FRESH_VOTER = 3
COMMITS = "offset commits"
WRITES = "metadata writes"
ONE_PARTITION = "offset commits, one offsets partition"
CLUSTER = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
SEGMENT = {"metadata.log.segment.bytes": "262144"}
# Snapshots every 256 KiB of log, and retention keeping 512 KiB of log and snapshots: every
# partition's log starts past a snapshot well before the fill ends.
SNAPSHOTS = {
    **SEGMENT,
    "metadata.log.max.record.bytes.between.snapshots": "262144",
    "metadata.snapshot.min.changed_records.ratio": "0",
    "metadata.max.retention.bytes": "524288",
}
NO_SNAPSHOTS = {
    **SEGMENT,
    "metadata.log.max.record.bytes.between.snapshots": str(2**62),
    "metadata.log.max.snapshot.interval.ms": "0",
}
METADATA = m.METADATA
OFFSETS = [m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, p) for p in range(OFFSETS_PARTITIONS)]


def name_of(where: m.LogPartition) -> str:
    return f"{where.topic}-{where.index}"


# ---------------------------------------------------------------- closed loops of writes


class Loop(Protocol):
    """What a closed loop reports to: cluster_load.Window (a measured window) or Count (a fill)."""

    def begin(self, count: int = 1) -> None: ...

    def complete(self, started: float, now: float) -> bool: ...

    def fail(self, error: str) -> None: ...


class Count:
    """A fill: `total` writes over all the loops (and the few still in flight then), then stop."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.error: str | None = None

    def begin(self, count: int = 1) -> None:
        pass

    def complete(self, started: float, now: float) -> bool:
        self.left -= 1
        return self.left > 0 and self.error is None

    def fail(self, error: str) -> None:
        self.error = error


@dataclass
class Writer:
    """One client's writes: where it sends them, the nth request, and the answer's error."""

    name: str
    port: int
    request: Callable[[int], Any]
    error: Callable[[Any], int]


async def closed_loop(writer: Writer, loop: Loop) -> None:
    """One connection, one write in flight: the next goes when the last is answered."""
    try:
        connection = await KafkaConnection.connect("127.0.0.1", writer.port, timeout=REQUEST_TIMEOUT_S)
    except OSError as e:
        loop.fail(f"{writer.name}: cannot connect to port {writer.port}: {e}")
        return
    try:
        n = 0
        while True:
            loop.begin()
            started = time.perf_counter()
            answer = await connection.request(writer.request(n), REQUEST_TIMEOUT_S)
            error = writer.error(answer)
            if error != ErrorCode.none:
                loop.fail(f"{writer.name}: {ErrorCode(error).name}")
                return
            n += 1
            if not loop.complete(started, time.perf_counter()):
                return
    except (OSError, TimeoutError) as e:
        loop.fail(f"{writer.name}: {type(e).__name__} {e}")
    finally:
        connection.close()


async def measure(writers: list[Writer], seconds: float) -> dict:
    """cluster_load.Window's figures for the writers in closed loops, or its error."""
    window = Window(len(writers), seconds)
    await asyncio.gather(*(closed_loop(w, window) for w in writers))
    return window.wait()


async def fill(writers: list[Writer], total: int) -> float:
    """Seconds for `total` writes by the writers in closed loops."""
    count = Count(total)
    started = time.perf_counter()
    await asyncio.gather(*(closed_loop(w, count) for w in writers))
    if count.error is not None:
        raise RuntimeError(f"the fill failed: {count.error}")
    return time.perf_counter() - started


# ---------------------------------------------------------------- the two kinds of write


def group_on(partition: int, prefix: str) -> str:
    """A group id of `prefix` that hashes to `partition` of `__consumer_offsets`."""
    return next(g for k in range(10_000) if partition_for(g := f"{prefix}-{k}", OFFSETS_PARTITIONS) == partition)


def offset_commit(group: str, topic: str, partitions: int) -> Callable[[int], Any]:
    """The nth OffsetCommit v8 of a simple group: offset n of each of `partitions`, epoch 1."""

    def request(n: int) -> Any:
        return build_request(8, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": n, "committed_leader_epoch": 1, "committed_metadata": ""}
                for p in range(partitions)]}]})

    return request


def commit_error(answer: Any) -> int:
    return next((p.error_code for t in answer.topics for p in t.partitions if p.error_code), ErrorCode.none)


def committers(cluster: LocalCluster, count: int, prefix: str, topic: str, partitions: int,
               spread: int = OFFSETS_PARTITIONS) -> list[Writer]:
    """`count` consumers, consumer i in a group of its own on offsets partition i mod `spread`,
    each sending to its group's coordinator."""
    groups = [group_on(i % spread, f"{prefix}-{i}") for i in range(count)]
    _, found = settled_coordinators(cluster, groups)
    return [Writer(f"group {g}", f.port, offset_commit(g, topic, partitions), commit_error)
            for g, f in zip(groups, found, strict=True)]


def config_write(topics: list[str], writer: int) -> Callable[[int], Any]:
    """The nth IncrementalAlterConfigs: retention.ms of each topic, to a value no other writer sets."""

    def request(n: int) -> Any:
        value = str(3_600_000 + writer * 10_000_000 + n)
        return build_request(44, 1, {"validate_only": False, "resources": [
            {"resource_type": 2, "resource_name": t,
             "configs": [{"name": "retention.ms", "config_operation": 0, "value": value}]} for t in topics]})

    return request


def config_error(answer: Any) -> int:
    return next((r.error_code for r in answer.responses if r.error_code), ErrorCode.none)


def config_writers(cluster: LocalCluster, count: int, topics: list[str]) -> list[Writer]:
    """`count` admin clients on the active controller (the metadata leader)."""
    leader_id, _ = leader(cluster, timeout=60)
    port = cluster.nodes[leader_id].client_port
    return [Writer(f"config writer {i}", port, config_write(topics, i), config_error) for i in range(count)]


# ---------------------------------------------------------------- part 1: commits per second


def commit_rows(directory: Path, scale: int) -> list[dict]:
    """Each level's offset commits (groups on every offsets partition) and metadata writes,
    then the top level's commits with every group on one offsets partition."""
    cluster = LocalCluster(directory / "commits", voters=3, observers=0, overrides=CLUSTER)
    levels = [(count, kind) for count in CONSUMERS for kind in (COMMITS, WRITES)] + [(CONSUMERS[-1], ONE_PARTITION)]
    rows: list[dict] = []
    try:
        cluster.start()
        pids = [node.started().pid for node in cluster.nodes.values()]
        created = create_topic(cluster.nodes[1].client_port, CONFIG_TOPIC, retry_s=60)
        if created.error_code != ErrorCode.none:
            raise RuntimeError(f"creating {CONFIG_TOPIC}: {ErrorCode(created.error_code).name}")
        for count, kind in levels:
            if kind == WRITES:
                writers = config_writers(cluster, count, [CONFIG_TOPIC])
            else:
                spread = 1 if kind == ONE_PARTITION else OFFSETS_PARTITIONS
                writers = committers(cluster, count, "bench", METADATA_TOPIC, 1, spread)
            cpu_before = cpu_seconds(pids)
            result = asyncio.run(measure(writers, SECONDS * scale))
            if "error" in result:
                raise RuntimeError(f"{kind}, {count} clients: {result['error']}")
            # The three nodes' CPU over the level (its warm-up too) per write completed in it.
            cpu_ms = (cpu_seconds(pids) - cpu_before) * 1000 / max(1, result["completed"])
            rows.append({"system": kind, "clients": count, "leaders": len({w.port for w in writers}),
                         "cpu_ms_per_write": cpu_ms, **result})
            print(f"  {kind:32} {count:>3} clients: {result['ops_s']:8,.0f}/s  p50 {result['p50_ms']:6.1f} ms"
                  f"  p99 {result['p99_ms']:6.1f} ms  {cpu_ms:5.2f} ms CPU a write  ({rows[-1]['leaders']} leader(s))",
                  flush=True)
    finally:
        cluster.stop()
    return rows


def commit_comparison(rows: list[dict]) -> list[dict]:
    """Per level, offset commits against metadata writes; the one-partition row against the
    metadata writes of its level."""
    by = {(r["system"], r["clients"]): r for r in rows}
    return [
        {"commits": kind, "clients": n, "commits_s": by[kind, n]["ops_s"],
         "metadata_writes_s": by[WRITES, n]["ops_s"], "ratio": by[kind, n]["ops_s"] / by[WRITES, n]["ops_s"],
         "commit_p50_ms": by[kind, n]["p50_ms"], "commit_p99_ms": by[kind, n]["p99_ms"],
         "metadata_p50_ms": by[WRITES, n]["p50_ms"], "metadata_p99_ms": by[WRITES, n]["p99_ms"],
         "coordinators": by[kind, n]["leaders"]}
        for kind, n in [(COMMITS, n) for n in CONSUMERS] + [(ONE_PARTITION, CONSUMERS[-1])]
    ]


def spread_goals(rows: list[dict]) -> list[dict]:
    """The top level's commits spread over the offsets partitions against the same commits on
    one (issue 28: at least SPREAD_GOAL of them), and each one's CPU a commit: what a batch's
    fixed cost per partition takes away."""
    by = {(r["system"], r["clients"]): r for r in rows}
    spread, one = by[COMMITS, CONSUMERS[-1]], by[ONE_PARTITION, CONSUMERS[-1]]
    peer = "the same commits on one offsets partition"
    where = f"{CONSUMERS[-1]} clients over {OFFSETS_PARTITIONS} offsets partitions"
    ratio = spread["ops_s"] / one["ops_s"]
    return [goal(f"commits/s, {where}", spread["ops_s"], "ops/s", goal=f">= {SPREAD_GOAL}x the peer",
                 met=ratio >= SPREAD_GOAL, peer=peer, peer_value=one["ops_s"],
                 note=f"{spread['leaders']} coordinators"),
            goal(f"CPU per commit, {where}", spread["cpu_ms_per_write"], "ms", peer=peer,
                 peer_value=one["cpu_ms_per_write"])]


# ---------------------------------------------------------------- part 2: a fresh voter's catch-up


def quorum(cluster: LocalCluster, where: m.LogPartition) -> Any:
    """The DescribeQuorum answer of `where`'s leader, asked of each running voter's controller
    listener (each answers for its own core), or None while no node leads it."""
    for node in cluster.nodes.values():
        if node.running and node.voter:
            try:
                p = asyncio.run(describe(node.controller_port, where))
            except (OSError, TimeoutError):
                continue
            if p.error_code == ErrorCode.none and p.high_watermark > 0:
                return p
    return None


def log_start(directory: Path) -> int:
    """A partition directory's log start: the base offset of its first segment."""
    return min((int(f.stem) for f in directory.glob("*.log")), default=0)


def partition_bytes(directory: Path) -> tuple[int, int]:
    """(bytes of log segments, bytes of the latest snapshot) in a partition directory."""
    snapshots = sorted(directory.glob("*.checkpoint"))
    return sum(f.stat().st_size for f in directory.glob("*.log")), snapshots[-1].stat().st_size if snapshots else 0


def wait_until(what: str, predicate: Callable[[], bool], timeout: float = 120.0, poll: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(poll)


def fill_cluster(cluster: LocalCluster, scale: int) -> None:
    """Offset commits of FILL_TOPIC's partitions in every offsets partition, and config
    writes in the metadata log, at once."""
    configs = [f"{FILL_TOPIC}-config-{i}" for i in range(FILL_CONFIG_TOPICS)]
    for name, partitions in ((FILL_TOPIC, FILL_TOPIC_PARTITIONS), *((c, 1) for c in configs)):
        created = create_topic(cluster.nodes[1].client_port, name, partitions, retry_s=60)
        if created.error_code != ErrorCode.none:
            raise RuntimeError(f"creating {name}: {ErrorCode(created.error_code).name}")
    groups = committers(cluster, FILL_CONNECTIONS * OFFSETS_PARTITIONS, "fill", FILL_TOPIC, FILL_TOPIC_PARTITIONS)
    metadata = config_writers(cluster, FILL_CONNECTIONS, configs)

    async def both() -> list[float]:
        return await asyncio.gather(fill(groups, FILL_COMMITS * OFFSETS_PARTITIONS * scale),
                                    fill(metadata, FILL_CONFIG_WRITES * scale))

    commits, writes = asyncio.run(both())
    print(f"  fill: commits {commits:.1f} s, metadata writes {writes:.1f} s", flush=True)


def caught_up_times(cluster: LocalCluster, targets: dict[m.LogPartition, int], started_ms: int) -> dict[str, float]:
    """Wall-clock time at which the leader of each partition first reports the fresh voter
    at its target, having fetched since `started_ms` (the leader remembers where the voter
    stood before its disk was emptied)."""
    caught_up: dict[str, float] = {}

    def every_one() -> bool:
        for where, target in targets.items():
            if name_of(where) in caught_up or (p := quorum(cluster, where)) is None:
                continue
            state = next((v for v in p.current_voters if v.replica_id == FRESH_VOTER), None)
            if state is not None and state.last_fetch_timestamp >= started_ms and state.log_end_offset >= target:
                caught_up[name_of(where)] = time.time()
        return len(caught_up) == len(targets)

    wait_until(f"node {FRESH_VOTER} caught up on every partition", every_one, timeout=300, poll=0.01)
    return caught_up


def catch_up(directory: Path, name: str, by_snapshot: bool, scale: int) -> dict:
    """Fill a cluster, empty one voter's disk, and time its catch-up on every partition."""
    cluster = LocalCluster(directory / name, voters=3, observers=0,
                           overrides={**CLUSTER, **(SNAPSHOTS if by_snapshot else NO_SNAPSHOTS)})
    partitions = [METADATA, *OFFSETS]
    fresh = cluster.nodes[FRESH_VOTER]
    others = [n for n in cluster.nodes.values() if n.node_id != FRESH_VOTER]
    try:
        cluster.start()
        fill_cluster(cluster, scale)
        if by_snapshot:  # every log starts past a snapshot on every replica the voter may fetch from
            wait_until("every log's start past a snapshot", lambda: all(
                log_start(n.data_dir / name_of(w)) > 0 for n in others for w in partitions))
        cluster.stop(FRESH_VOTER)
        wait_until("a leader of every partition", lambda: all(quorum(cluster, w) for w in partitions))
        targets = {w: quorum(cluster, w).high_watermark for w in partitions}
        sizes = [partition_bytes(others[0].data_dir / name_of(w)) for w in partitions]
        empty_disk(cluster, fresh)
        started = time.time()
        cluster.start(FRESH_VOTER, wait=False)
        caught_up = caught_up_times(cluster, targets, int(started * 1000))
    finally:
        cluster.stop()
    since = [t for t in log_times(fresh.log_path, f"node {FRESH_VOTER} started:") if t >= started - 0.002]
    loaded = [t for t in log_times(fresh.log_path, f"node {FRESH_VOTER}: loaded snapshot") if t >= started - 0.002]
    if len(loaded) != (len(partitions) if by_snapshot else 0):
        raise RuntimeError(f"{name}: node {FRESH_VOTER} loaded {len(loaded)} snapshots; see {fresh.log_path}")
    node_started = since[0]
    return {
        "catch_up": name, "records": sum(targets.values()),
        "log_MB": sum(log for log, _ in sizes) / 1e6, "snapshots_MB": sum(snapshot for _, snapshot in sizes) / 1e6,
        "process_start_s": max(caught_up.values()) - started,
        "seconds": max(caught_up.values()) - node_started,
        **{f"{p}_s": t - node_started for p, t in sorted(caught_up.items())},
        "high_watermarks": {name_of(w): hw for w, hw in targets.items()},
    }


def catch_up_rows(directory: Path, scale: int) -> list[dict]:
    replay = catch_up(directory, "replay every log from offset 0", False, scale)
    print(f"  replay:   {replay['seconds']:.2f} s", flush=True)
    snapshot = catch_up(directory, "fetch each snapshot, then the log after it", True, scale)
    print(f"  snapshot: {snapshot['seconds']:.2f} s", flush=True)
    snapshot["ratio"] = replay["seconds"] / snapshot["seconds"]
    snapshot["ratio_process_start"] = replay["process_start_s"] / snapshot["process_start_s"]
    return [replay, snapshot]


# ---------------------------------------------------------------- report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=PARTS, help="run only these parts (repeatable)")
    parser.add_argument("--scale", type=int, default=1, help="multiply the fill and the measured windows")
    args = parser.parse_args()
    if args.scale < 1:
        parser.error("--scale must be 1 or more")
    parts = args.only or list(PARTS)
    RESULTS.mkdir(exist_ok=True)
    directory = Path(tempfile.mkdtemp(dir=RESULTS, prefix="groups-bench-"))
    commits = comparison = catch = None
    goals: list[dict] = []
    try:
        if "commits" in parts:
            print(f"Offset commits against metadata writes: 3 voters on loopback, {SECONDS * args.scale:.0f} s a "
                  "level, one write in flight per client connection", flush=True)
            commits = commit_rows(directory, args.scale)
            comparison = commit_comparison(commits)
            goals = spread_goals(commits)
        if "catchup" in parts:
            print(f"A fresh voter catching up {1 + OFFSETS_PARTITIONS} partitions, by snapshot and by replay",
                  flush=True)
            catch = catch_up_rows(directory, args.scale)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if comparison is not None:
        print("\nOffset commits (one offset each, OffsetCommit v8) against metadata writes (one config each, "
              "IncrementalAlterConfigs), each client a connection with one write in flight\n")
        print_table(comparison, ["commits", "clients", "commits_s", "metadata_writes_s", "ratio", "commit_p50_ms",
                                 "commit_p99_ms", "metadata_p50_ms", "metadata_p99_ms", "coordinators"])
        print("\nratio = offset commits/s / metadata writes/s, same cluster, same run, same clients")
        print_goals(goals, [*GOAL_COLUMNS, "note"])
        plot(commits, RESULTS / "groups_bench.png", systems=(COMMITS, WRITES),
             title="Offset commits and metadata writes, 3 voters")
        print(f"plot: {RESULTS / 'groups_bench.png'}")
    if catch is not None:
        columns = ["catch_up", "records", "log_MB", "snapshots_MB", "process_start_s", "seconds",
                   *(f"{name_of(w)}_s" for w in [METADATA, *OFFSETS]), "ratio", "ratio_process_start"]
        print(f"\nA voter with an empty disk catching up {1 + OFFSETS_PARTITIONS} partitions: seconds from the node's "
              "start (its partitions begin to replicate), and from its process's start\n")
        print_table(catch, columns)
        print(f"\nratio = replay time / snapshot time: {catch[1]['ratio']:.1f}x faster by snapshot")
    print(f"results: {write_results('groups', commits or [], goals, comparison=comparison, catch_up=catch)}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    sys.exit(main())
