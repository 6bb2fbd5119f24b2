"""A fresh replica catching up by snapshot against replaying the whole log, and commit
latency with and without a snapshot being written (issue 6).

Catch-up: a leader holds a log of 1,000,000 records (100-byte values) over 10,000 keys. A
fresh observer catches up (a) by fetching and applying the whole log, and (b) by fetching
the leader's snapshot of the 10,000 keys (FetchSnapshot, in chunks) and loading it. Both in
the same run, through the same cores (raft_driver.py, in-process, no network), each until
the observer's state machine has applied the leader's last offset. Printed: seconds and
the ratio replay/snapshot.

Latency: three voters whose state machines hold 200,000 keys of 1,000 bytes commit one
100-byte record at a time; p50/p99 commit latency with no snapshot being written, and
while the leader's own state machine writes its 200 MB snapshot. As the server does it:
`create_snapshot` on the core's thread, then a worker thread writes a frozen view of the
state into the leader's snapshot store on disk and freezes it, while commits go on (the
later commits land in a layer above the frozen view). Same cluster, same log, in the same
run; commits made after the snapshot is frozen are not counted.
"""

import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import ChainMap
from collections.abc import Mapping
from itertools import islice
from pathlib import Path

from common import print_table, write_results
from raft_driver import Cluster

from kraft.records import SimpleRecord
from kraft.storage import FileSnapshotStore, SnapshotWriter

RECORDS = 1_000_000
KEYS = 10_000
PER_APPEND = 1000
VOTERS = (1, 2, 3)
LATENCY_KEYS = 200_000
LATENCY_VALUE = b"s" * 1000  # 200 MB of state, and of snapshot
SNAPSHOT_CHUNK = 10_000  # records handed to the snapshot writer at a time


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

    def frozen_view(self) -> Mapping[bytes, bytes]:
        """The state as of now, never to change again: later commits go to a new layer on
        top of it, so another thread can write a snapshot from it while commits go on."""
        view = self.state
        self.state = ChainMap({}, view)
        return view


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


def commit_latency_ms(cluster: Cluster) -> float:
    started = time.perf_counter()
    cluster.commit([SimpleRecord(b"k", b"x" * 100)])
    return (time.perf_counter() - started) * 1000


def write_snapshot(writer: SnapshotWriter, view: Mapping[bytes, bytes]) -> None:
    """The worker thread's part, as the controller's SnapshotJob: chunks of the frozen view."""
    items = iter(view.items())
    while chunk := list(islice(items, SNAPSHOT_CHUNK)):
        writer.append(chunk)
    writer.freeze()


def latency_rows() -> list[dict]:
    directory = Path(tempfile.mkdtemp(dir=Path(__file__).parent / "results", prefix="snapshot-latency-"))
    try:
        machines = {node: KeyValue() for node in VOTERS}
        cluster = Cluster(
            VOTERS, listeners=machines, snapshot_stores=lambda node: FileSnapshotStore(directory / f"{node}")
        )
        for start in range(0, LATENCY_KEYS, PER_APPEND):
            cluster.commit([SimpleRecord(b"k%07d" % i, LATENCY_VALUE) for i in range(start, start + PER_APPEND)])
        quiet = [commit_latency_ms(cluster) for _ in range(3000)]
        leader = cluster.leader
        machine = machines[leader.node_id]
        writer = leader.create_snapshot(leader.snapshot_id_at(machine.applied), cluster.now)
        thread = threading.Thread(target=write_snapshot, args=(writer, machine.frozen_view()))
        written = time.perf_counter()
        thread.start()
        busy = []
        while thread.is_alive():
            busy.append(commit_latency_ms(cluster))
        thread.join()
        written = time.perf_counter() - written
        size = leader.snapshots.open_reader(writer.snapshot_id).size
    finally:
        shutil.rmtree(directory)
    rows = []
    for name, values in (
        ("no snapshot being written", quiet),
        (f"the leader writing its {size / 1e6:.0f} MB snapshot ({written:.1f} s)", busy),
    ):
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
    print(f"Commit latency, 3 voters in process over {LATENCY_KEYS:,} keys, one 100-byte record at a time\n")
    print_table(lat, ["commits", "n", "p50_ms", "p99_ms"])
    print(f"results: {write_results('snapshot_catchup', catch + lat)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
