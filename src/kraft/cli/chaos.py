"""`make chaos`: a real cluster under random faults, checked for lost writes and disagreement.

The simulator proves the Raft core under every interleaving it can schedule; this runs
the whole system, processes, sockets, fsync and all, the way an operator would break it.
Three voters and an observer run on loopback with snapshots and segment rolls frequent.
A writer creates topics through whichever node leads, and counts a topic acknowledged
only when CreateTopics answers without an error, which the controller does once the
record is committed. Each round injects one fault and heals it after a random while:

- SIGKILL of the leader, of another voter, or of the observer (no flush, no goodbye);
- SIGSTOP of the leader for longer than the fetch timeout: it comes back believing it
  leads, and must be fenced by the newer epoch;
- a graceful stop (SIGTERM: the leader resigns) and restart;
- a failing disk on any node (a failed fsync, fdatasync or write, injected by failfs.c):
  the node must stop at once, with a CRITICAL line saying which file failed, and is
  restarted on a healthy disk (what it had not synced may be gone, as after a real
  failure: failfs drops it).

After every round the writer must make progress again. At the end every node must hold
every acknowledged topic in its metadata image, and all nodes must agree on the high
watermark and the image digest. Any failure exits 1 and names the round and the node.
"""

import random
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kraft.cli import failfs
from kraft.cli.cluster_client import UNREACHABLE, create_topic, leader, topic_names
from kraft.cli.demo import settled, wait
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode

CHAOS_CONFIG = {
    "metadata.log.max.record.bytes.between.snapshots": "20000",
    "metadata.snapshot.min.changed_records.ratio": "0",
    "metadata.log.segment.bytes": "65536",
    # Retention is what moves the log start (readers' history is kept until it says so):
    # small here, so the log starts past snapshots and a newcomer catches up from one.
    "metadata.max.retention.bytes": "40000",
}
FAULTS = ("kill-leader", "kill-voter", "kill-observer", "pause-leader", "stop-leader", "disk-fault")
DISK_FAULTS = ("fsync EIO {node}/data/__cluster_metadata-0/0", "fdatasync EIO {node}/data/recovery-point",
               "pwrite ENOSPC {node}/data/__cluster_metadata-0/0", "pwrite EIO {node}/data/__cluster_metadata-0/0")
ASK_TIMEOUT = 2.0  # a paused node accepts connections but never answers


@dataclass
class Writer:
    """Creates topics one after another through the current leader, in a thread."""

    cluster: LocalCluster
    acknowledged: list[str] = field(default_factory=list)
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                current, _ = leader(self.cluster, timeout=5, ask_timeout=ASK_TIMEOUT)
                port = self.cluster.nodes[current].client_port
                result = create_topic(port, f"chaos-{n}", timeout_ms=3000, retry_s=0)
            except (*UNREACHABLE, TimeoutError):
                self.failures += 1
                continue
            if result.error_code == ErrorCode.none:
                self.acknowledged.append(f"chaos-{n}")
            else:
                self.failures += 1

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="chaos-writer", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def acknowledged_at_least(self, count: int) -> Callable[[], bool]:
        """A condition for `wait`: `count` topics acknowledged (by now, or later)."""
        return lambda: len(self.acknowledged) >= count


def fail_disk(cluster: LocalCluster, target: int, rng: random.Random, rules: Path) -> str:
    """One failing call on `target`'s disk; it must stop with a CRITICAL line naming it."""
    node = cluster.nodes[target]
    process = node.started()
    rule = rng.choice(DISK_FAULTS).format(node=node.directory.name)
    rules.write_text(rule + " 1\n")
    try:
        process.wait(60)
    finally:
        rules.write_text("")
    critical = [line for line in node.log_path.read_text().splitlines() if "CRITICAL" in line]
    if process.returncode != 2 or not critical or "failed on" not in critical[-1]:
        raise TimeoutError(f"node {target} did not stop with a CRITICAL line after '{rule}' "
                           f"(exit {process.returncode}); see {node.log_path}")
    cluster.start(target)
    failed = critical[-1].split("failed on ", 1)[1].split(":", 1)[0]
    call, error, _ = rule.split(" ", 2)
    return f"disk-fault ({call} {error}) on node {target}: it stopped naming {Path(failed).name}, and restarted"


def inject(cluster: LocalCluster, fault: str, rng: random.Random, rules: Path) -> str:
    """Applies `fault`, waits a random while, heals it; says what it did."""
    current, epoch = leader(cluster, ask_timeout=ASK_TIMEOUT)
    if fault == "disk-fault":
        return fail_disk(cluster, rng.choice(list(cluster.nodes)), rng, rules)
    voters = [n for n in cluster.voter_ids if n != current]
    observers = [n for n, node in cluster.nodes.items() if not node.voter]
    target = {"kill-voter": rng.choice(voters), "kill-observer": rng.choice(observers)}.get(fault, current)
    hold = rng.uniform(0.2, 3.0)
    if fault.startswith("kill"):
        cluster.kill(target)
        time.sleep(hold)
        cluster.start(target)
    elif fault == "pause-leader":
        hold += 2.5  # past the followers' fetch timeout: they elect a new leader meanwhile
        cluster.pause(target)
        time.sleep(hold)
        cluster.resume(target)
    else:
        cluster.stop(target)
        time.sleep(hold)
        cluster.start(target)
    return f"{fault} node {target} (leader {current} of epoch {epoch}) for {hold:.1f} s"


def run(directory: Path, rounds: int, seed: int) -> int:
    rng = random.Random(seed)
    shutil.rmtree(directory, ignore_errors=True)
    rules = directory / "failfs.rules"
    library = failfs.build(directory / "failfs")
    rules.write_text("")
    cluster = LocalCluster(directory, voters=3, observers=1, overrides=CHAOS_CONFIG,
                           env=failfs.environment(library, rules))
    print(f"chaos: {rounds} rounds, seed {seed}, cluster in {directory}", flush=True)
    cluster.start()
    writer = Writer(cluster)
    thread = writer.start()
    started = time.monotonic()
    try:
        wait("the first acknowledged write", writer.acknowledged_at_least(5))
        for i in range(1, rounds + 1):
            fault = rng.choice(FAULTS)
            what = inject(cluster, fault, rng, rules)
            took = wait("writes after the fault", writer.acknowledged_at_least(len(writer.acknowledged) + 3), timeout=30)
            print(f"round {i}: {what}; writes flowing again {took:.1f} s later; "
                  f"{len(writer.acknowledged)} acknowledged", flush=True)
        writer.stop()
        thread.join()
        wait("every node at the same high watermark and image", lambda: settled(cluster), timeout=60)
        for node_id in cluster.nodes:
            names = topic_names(cluster, node_id)
            missing = [t for t in writer.acknowledged if t not in names]
            if missing:
                print(f"FAILED: node {node_id} lacks {len(missing)} acknowledged topics, first {missing[:3]}")
                return 1
    except TimeoutError as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        writer.stop()
        cluster.stop()
    print(f"passed: {rounds} rounds in {time.monotonic() - started:.0f} s; {len(writer.acknowledged)} acknowledged "
          f"topics on every node ({writer.failures} attempts failed or were not acknowledged); all nodes agree")
    return 0
