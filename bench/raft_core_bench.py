"""Commits per second through the Raft core alone, and what a message costs in it.

Three voters on MemoryLogs, wired by a direct in-memory queue: no sockets, no virtual
network, no faults, no fsync (MemoryLog.flush is instant), a frozen clock. So this is the
core's own cost per commit. Two loads: one record per append, each waited for (latency
bound), and 1000 appends in flight at once (the core batches them, as a busy leader does).

The per-message cost is compared with a loop that only encodes and decodes the same
messages with kio (what the server adds around each one), printed as a ratio.
"""

import sys
import time
from collections import deque
from random import Random

from common import print_table, write_results

from kraft.protocol import decode, encode
from kraft.raft import RaftConfig, RaftCore, Reply, Send
from kraft.records import SimpleRecord
from kraft.storage import MemoryLog, MemoryQuorumStateStore

VOTERS = (1, 2, 3)


class Cluster:
    def __init__(self) -> None:
        self.now = 0
        self.cores = {
            n: RaftCore(RaftConfig(node_id=n, voters=VOTERS, cluster_id="bench"), MemoryLog(), MemoryQuorumStateStore(),
                        Random(n), 0)
            for n in VOTERS
        }
        self.queue: deque = deque()
        self.messages = 0
        self.sample: list = []
        self.now = 5000
        self.cores[1].tick(self.now)  # node 1 times out first (its election deadline is earliest)
        for core in self.cores.values():
            core.tick(self.now)
        self.drive(lambda: any(c.is_leader and c.high_watermark for c in self.cores.values()))
        self.leader = next(c for c in self.cores.values() if c.is_leader)

    def drive(self, done, keep_sample: bool = False) -> None:
        cores = self.cores
        while not done():
            for node_id, core in cores.items():
                if core.wants_flush:
                    core.log.flush()
                    core.handle_flush(self.now)
                for message in core.poll_outbox():
                    self.queue.append((node_id, message))
            if not self.queue:
                self.now += 1
                for core in cores.values():
                    core.tick(self.now)
                continue
            while self.queue:
                source, message = self.queue.popleft()
                self.messages += 1
                if isinstance(message, Send):
                    if keep_sample and len(self.sample) < 2000:
                        self.sample.append(message.request)
                    cores[message.destination].handle_request((source, message.request_id), message.request, self.now)
                else:
                    assert isinstance(message, Reply)
                    if keep_sample and len(self.sample) < 2000:
                        self.sample.append(message.response)
                    origin, request_id = message.handle
                    cores[origin].handle_response(request_id, message.response, self.now)


def run(in_flight: int, total: int) -> tuple[float, int, Cluster]:
    cluster = Cluster()
    leader = cluster.leader
    record = [SimpleRecord(None, b"x" * 100)]
    start_messages = cluster.messages
    started = time.perf_counter()
    committed = 0
    while committed < total:
        last = 0
        for _ in range(in_flight):
            _, last = leader.append(record, cluster.now)
        cluster.drive(lambda: leader.high_watermark is not None and leader.high_watermark > last, keep_sample=True)
        committed += in_flight
    elapsed = time.perf_counter() - started
    return elapsed, cluster.messages - start_messages, cluster


def codec_loop(sample: list) -> float:
    encoded = [(type(msg), encode(msg)) for msg in sample]
    started = time.perf_counter()
    for _ in range(3):
        for msg in sample:
            encode(msg)
        for cls, data in encoded:
            decode(cls, data)
    return (time.perf_counter() - started) / 3 / len(sample)


def main() -> int:
    rows = []
    for in_flight, total in ((1, 3000), (1000, 200_000)):
        elapsed, messages, cluster = run(in_flight, total)
        per_message = elapsed / messages
        codec = codec_loop(cluster.sample)
        rows.append({
            "load": f"{in_flight} append(s) in flight",
            "commits_s": total / elapsed,
            "messages": messages,
            "core_us_per_message": per_message * 1e6,
            "codec_us_per_message": codec * 1e6,
            "ratio": codec / per_message,
        })
    print("Raft core alone: 3 voters, in-memory queue, no faults, 100-byte records\n")
    print_table(rows, ["load", "commits_s", "messages", "core_us_per_message", "codec_us_per_message", "ratio"])
    print("\nratio = time to encode+decode a message with kio / time the core spends per message"
          " (>1: the core costs less than putting the message on the wire)")
    print(f"results: {write_results('raft_core', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
