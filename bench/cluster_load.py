"""What the cluster benchmark's node runners share: the closed-loop window and the command
pipe to the parent.

The parent (cluster_bench.py) starts every node as a process of its own and talks to it
over its stdin and stdout, one JSON object a line: it asks each node whether it leads,
then tells the leader to run a load. The load runs inside the leader's process, so the
numbers are the replicated log's and not those of a client connection in front of it.
Commands are served on a thread of their own, which sleeps on a pipe or an event while the
node's own loop (asyncio for kraft, the tick thread for PySyncObj) does the work.
"""

import json
import sys
import threading
import time
from collections.abc import Callable

RECORD_BYTES = 100
VALUE_POOL = 4096  # distinct values, made before the run and cycled through
WARMUP_S = 1.0
MAX_RUN_S = 120.0  # a load that has not finished by then is reported as failed


class Window:
    """The completions of a closed loop of `in_flight` operations, in a measured window.

    Every completion starts the next operation, so `in_flight` stay outstanding. The
    window opens once every slot has completed twice and WARMUP_S has passed (the first
    burst has gone through and the loop is in its steady state), and closes `seconds`
    later. Throughput and latency are both taken from the operations that complete inside
    it; after it closes no new operation starts, and the run ends when the last one
    outstanding has completed, so the next run starts on a quiet cluster.
    """

    def __init__(self, in_flight: int, seconds: float) -> None:
        self.in_flight = in_flight
        self.seconds = seconds
        self.started = time.perf_counter()
        self.completed = 0
        self.outstanding = 0
        self.opens: float | None = None
        self.latencies: list[float] = []
        self.error: str | None = None
        self.closed = False
        self.drained = threading.Event()
        self._lock = threading.Lock()  # PySyncObj completes on its tick thread while calls start

    def begin(self, count: int = 1) -> None:
        with self._lock:
            self.outstanding += count

    def complete(self, started: float, now: float) -> bool:
        """Counts one completed operation; False once the window has closed (start no more)."""
        with self._lock:
            self.outstanding -= 1
            go_on = self._count(started, now)
            if not go_on and self.outstanding == 0:
                self.drained.set()
            return go_on

    def _count(self, started: float, now: float) -> bool:
        if self.closed:
            return False
        self.completed += 1
        if self.opens is None:
            if self.completed >= 2 * self.in_flight and now - self.started >= WARMUP_S:
                self.opens = now
            return True
        if now - self.opens >= self.seconds:
            self.closed = True
            return False
        self.latencies.append(now - started)
        return True

    def fail(self, error: str) -> None:
        with self._lock:
            self.error = error
            self.closed = True
        self.drained.set()

    def wait(self) -> dict:
        """Blocks until the run is over; the figures, or the error."""
        if not self.drained.wait(MAX_RUN_S):
            self.fail(f"not finished after {MAX_RUN_S:.0f} s ({self.completed} operations completed)")
        if self.error is not None:
            return {"error": self.error}
        latencies = sorted(self.latencies)
        return {
            "in_flight": self.in_flight,
            "completed": self.completed,  # warm-up included
            "ops": len(latencies),
            "ops_s": len(latencies) / self.seconds,
            "p50_ms": percentile(latencies, 0.50) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
        }


def percentile(ordered: list[float], q: float) -> float:
    """The value below which a fraction `q` of the sorted values lie (nearest rank)."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def serve(handlers: dict[str, Callable[[dict], dict]]) -> None:
    """Answers the parent's commands until it closes the pipe."""
    for line in sys.stdin:
        command = json.loads(line)
        reply = handlers[command["cmd"]](command)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
