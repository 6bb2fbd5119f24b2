"""Commits per second through the Raft core alone, and what a message costs in it.

Three voters on MemoryLogs, wired by a direct in-memory queue (raft_driver.py): no
sockets, no faults, no fsync (MemoryLog.flush is instant). So this is the core's own cost
per commit. Two loads: one record per append, each waited for (latency
bound), and 1000 appends in flight at once (the core batches them, as a busy leader does).

The per-message cost is compared with a loop that only encodes and decodes the same
messages with kio (what the server adds around each one), printed as a ratio.

Then a leader with a fleet of observers parked on it (issue 28): each observer's Fetch is a
step of the core, and a step must cost what is due, not what is parked. A round is every
parked Fetch answered as its 500 ms wait ends and each observer's next Fetch arriving; the
core's CPU time per arriving Fetch (handle_request, the outbox taken and next_deadline, as the
driver does) with N observers parked, against the same with ten.
"""

import sys
import time

from common import print_table, write_results
from raft_driver import Cluster

from kraft.protocol import decode, encode
from kraft.raft import messages as m
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


FLEET_SIZES = (10, 100, 1000, 3000)


def fleet_round(observers: int, rounds: int = 4) -> float:
    """CPU seconds of the leader core per arriving Fetch, `observers` parked, best round
    (the voters stay silent: four rounds of 500 ms are within the leader's check quorum)."""
    cluster = Cluster(VOTERS)
    leader, now = cluster.leader, cluster.now

    def arrive(observer: int) -> None:
        log = leader.log
        request = m.fetch_request("bench", 1000 + observer, leader.epoch, log.end_offset, leader.history.last_epoch(),
                                  log.start_offset, 500, 8 << 20)
        leader.handle_request(observer, request, now)
        leader.poll_outbox()
        leader.next_deadline()

    for observer in range(observers):
        arrive(observer)
    best = float("inf")
    for _ in range(rounds):
        now += 500  # every wait ends: all answered, then each observer fetches again
        leader.tick(now)
        assert len(leader.poll_outbox()) >= observers and leader.is_leader
        started = time.process_time()
        for observer in range(observers):
            arrive(observer)
        best = min(best, (time.process_time() - started) / observers)
    return best


def fleet_rows() -> list[dict]:
    per_fetch = {n: fleet_round(n) for n in FLEET_SIZES}
    return [{"observers_parked": n, "core_us_per_fetch": per_fetch[n] * 1e6, "round_ms": per_fetch[n] * n * 1e3,
             "ratio_to_ten_parked": per_fetch[n] / per_fetch[FLEET_SIZES[0]]} for n in FLEET_SIZES]


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
    fleet = fleet_rows()
    print("\nA leader with N observers parked: the core's CPU time per arriving Fetch (each a step), against ten parked\n")
    print_table(fleet, ["observers_parked", "core_us_per_fetch", "round_ms", "ratio_to_ten_parked"])
    print(f"results: {write_results('raft_core', rows, fleet=fleet)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
