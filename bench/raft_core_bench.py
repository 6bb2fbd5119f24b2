"""Commits per second through the Raft core alone, and what a message costs in it.

Three voters on MemoryLogs, wired by a direct in-memory queue (raft_driver.py): no
sockets, no faults, no fsync (MemoryLog.flush is instant). So this is the core's own cost
per commit. Two loads: one record per append, each waited for (latency
bound), and 1000 appends in flight at once (the core batches them, as a busy leader does).

The per-message cost is compared with a loop that only encodes and decodes the same
messages with kio (what the server adds around each one), printed as a ratio.
"""

import sys
import time

from common import print_table, write_results
from raft_driver import Cluster

from kraft.protocol import decode, encode
from kraft.records import SimpleRecord

VOTERS = (1, 2, 3)


def run(in_flight: int, total: int) -> tuple[float, int, Cluster]:
    cluster = Cluster(VOTERS)
    cluster.keep_sample = True
    record = [SimpleRecord(None, b"x" * 100)]
    start_messages = cluster.messages
    started = time.perf_counter()
    committed = 0
    while committed < total:
        cluster.commit(record, in_flight)
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
