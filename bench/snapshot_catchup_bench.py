"""A fresh replica catching up by snapshot against replaying the whole log, and commit
latency with and without a snapshot being written (issue 6).

Catch-up: a leader holds a log of 1,000,000 records (100-byte values) over 10,000 keys. A
fresh observer catches up (a) by fetching and applying the whole log, and (b) by fetching
the leader's snapshot of the 10,000 keys (FetchSnapshot, in chunks) and loading it. Both in
the same run, through the same cores (raft_driver.py, in-process, no network), each until
the observer's state machine has applied the leader's last offset. Printed: seconds and
the ratio replay/snapshot.

Latency: three voters commit one 100-byte record at a time; p50/p99 commit latency with
no snapshot being written, and while another thread writes a 200 MB snapshot to disk.
"""

import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import print_table, write_results
from raft_driver import Cluster

from kraft.records import SimpleRecord
from kraft.storage import FileSnapshotStore, SnapshotId

RECORDS = 1_000_000
KEYS = 10_000
PER_APPEND = 1000


class KeyValue:
    """The state machine: the latest value of each key."""

    def __init__(self) -> None:
        self.state: dict[bytes, bytes] = {}
        self.applied = 0

    def handle_commit(self, batch) -> None:
        if not batch.control:
            self.state.update((r.key, r.value) for r in batch.records)
        self.applied = batch.last_offset + 1

    def handle_leader_change(self, leader) -> None:
        pass

    def handle_load_snapshot(self, reader) -> None:
        self.state = {r.key: r.value for r in reader.records()}
        self.applied = reader.snapshot_id.end_offset


def catch_up(cluster: Cluster, node: int) -> float:
    machine = KeyValue()
    cluster.listeners[node] = machine
    started = time.perf_counter()
    cluster.add(node)
    end = cluster.leader.log.end_offset
    cluster.drive(lambda: machine.applied >= end)
    elapsed = time.perf_counter() - started
    assert machine.state == cluster.listeners[1].state
    del cluster.cores[node]
    return elapsed


def catch_up_rows() -> list[dict]:
    leader_machine = KeyValue()
    cluster = Cluster((1,), listeners={1: leader_machine}, snapshot_response_max_bytes=1 << 20)
    value = b"v" * 100
    for start in range(0, RECORDS, PER_APPEND):
        cluster.commit([SimpleRecord(b"k%05d" % (i % KEYS), value) for i in range(start, start + PER_APPEND)])
    replay = catch_up(cluster, 2)
    leader = cluster.leader
    writer = leader.create_snapshot(leader.snapshot_id_at(leader_machine.applied), 0)
    writer.append(sorted(leader_machine.state.items()))
    writer.freeze()
    cluster.leader.tick(cluster.now)
    by_snapshot = catch_up(cluster, 3)
    size = cluster.leader.snapshots.open_reader(cluster.leader.snapshots.latest()).size
    log_bytes = cluster.leader.log.size_in_bytes
    return [
        {"catch_up": "replay the whole log", "records": RECORDS, "bytes": log_bytes, "seconds": replay},
        {"catch_up": "fetch and load the snapshot", "records": KEYS, "bytes": size, "seconds": by_snapshot,
         "ratio": replay / by_snapshot},
    ]


def latencies(cluster: Cluster, n: int) -> list[float]:
    out = []
    record = [SimpleRecord(b"k", b"x" * 100)]
    for _ in range(n):
        started = time.perf_counter()
        cluster.commit(record)
        out.append((time.perf_counter() - started) * 1000)
    return out


def latency_rows() -> list[dict]:
    directory = Path(tempfile.mkdtemp(dir=Path(__file__).parent / "results", prefix="snapshot-latency-"))
    try:
        cluster = Cluster((1, 2, 3))
        quiet = latencies(cluster, 3000)
        store = FileSnapshotStore(directory)
        done = threading.Event()

        def write() -> None:
            with store.create_writer(SnapshotId(1, 1), 0) as writer:
                for _ in range(400):
                    writer.append([(None, b"s" * 1000)] * 500)  # 200 MB
                writer.freeze()
            done.set()

        thread = threading.Thread(target=write)
        thread.start()
        busy = []
        while not done.is_set():
            busy += latencies(cluster, 50)
        thread.join()
    finally:
        shutil.rmtree(directory)
    rows = []
    for name, values in (("no snapshot being written", quiet), ("a 200 MB snapshot being written", busy)):
        values.sort()
        rows.append({
            "commits": name,
            "n": len(values),
            "p50_ms": statistics.median(values),
            "p99_ms": values[int(len(values) * 0.99) - 1],
        })
    return rows


def main() -> int:
    catch = catch_up_rows()
    print(f"A fresh observer catching up on {RECORDS:,} records over {KEYS:,} keys\n")
    print_table(catch, ["catch_up", "records", "bytes", "seconds", "ratio"])
    print(f"\nratio = replay time / snapshot time: {catch[1]['ratio']:.1f}x faster by snapshot\n")
    lat = latency_rows()
    print("Commit latency, 3 voters in process, one 100-byte record at a time\n")
    print_table(lat, ["commits", "n", "p50_ms", "p99_ms"])
    print(f"results: {write_results('snapshot_catchup', catch + lat)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
