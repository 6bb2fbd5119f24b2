"""A kraft voter for the cluster benchmark, with the load generator in its own process.

    python bench/cluster_node.py server.properties

Runs a KraftNode as `kraft server start` does (logs on stderr) and serves the parent's
commands on stdin (cluster_load.serve):

    {"cmd": "role"}                                  -> {"leader": true|false}
    {"cmd": "load", "in_flight": N, "seconds": S}    -> cluster_load.Window's figures
    {"cmd": "describe"}                              -> epoch, high watermark, log end, cluster id
    {"cmd": "paced", "interval_ms": I, "seconds": S} -> {"writes": [[offset, submitted, committed], ...]}

An operation of `load` is one 100-byte record appended on the leader; it completes when the
leader's high watermark passes its offset. Every record is a framed ConfigRecord (each
node's QuorumController applies what commits), on a topic resource no admin ever creates.
`paced` (the fleet benchmark's writer) submits the same record as a controller operation,
one every `interval_ms`, and gives each one's offset and the times (time.monotonic) it was
submitted and committed (the leader's high watermark passed it).
"""

import asyncio
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_load import RECORD_BYTES, VALUE_POOL, Window, serve

from kraft.cli.server_cmd import keep_large_buffers
from kraft.metadata import ConfigResourceType, encode_record
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import ConfigRecord
from kraft.raft import NotLeaderError, RaftCore
from kraft.server.runtime.node import KraftNode
from kraft.server.settings.server_config import read_config

RESOURCE = "cluster-bench"
KEY = "bench.sequence"


_DIGITS = RECORD_BYTES - len(encode_record(ConfigRecord(ConfigResourceType.TOPIC, RESOURCE, KEY, "")))


def record_value(sequence: int) -> bytes:
    """A ConfigRecord whose framed value is exactly RECORD_BYTES long."""
    return encode_record(ConfigRecord(ConfigResourceType.TOPIC, RESOURCE, KEY, f"{sequence:0{_DIGITS}d}"))


# Encoding a metadata record costs about 12 us in Python, more than the log spends on it:
# the load cycles through values made in advance, as PySyncObj's load does (syncobj_node).
VALUES = [record_value(i) for i in range(VALUE_POOL)]


class LoadGenerator:
    """Keeps a window's operations in flight on the leader.

    Completions are seen after every step of the core (node.on_step): each one frees a
    slot, and the free slots are refilled together in one later step, one append call per
    operation, so that records appended while the core was busy go out in one batch (as
    requests arriving together would).
    """

    def __init__(self, node: KraftNode) -> None:
        self.node = node
        self.window: Window | None = None
        self.waiting: deque[tuple[int, float]] = deque()  # (offset, start time), in offset order
        self.free = 0
        self.epoch = -1
        self.sequence = 0
        self.refill_due = False
        node.on_step(self.on_step)

    def start(self, window: Window) -> None:
        core = self.node.core
        assert core is not None
        self.window, self.free, self.epoch = window, window.in_flight, core.epoch
        self.refill()

    def on_step(self, core: RaftCore) -> None:
        window = self.window
        if window is None:
            return
        if core.epoch != self.epoch:
            window.fail(f"leadership moved to epoch {core.epoch} during the run")
            self.window = None
            return
        hw = core.high_watermark
        if hw is None or not self.waiting or self.waiting[0][0] >= hw:
            return
        now = time.perf_counter()
        waiting = self.waiting
        while waiting and waiting[0][0] < hw:
            if window.complete(waiting.popleft()[1], now):
                self.free += 1
        if self.free and not self.refill_due:
            self.refill_due = True
            asyncio.get_running_loop().call_soon(self.refill)

    def refill(self) -> None:
        self.refill_due = False
        if self.window is not None and self.free:
            self.node.step(self._append)

    def _append(self, core: RaftCore, now: int) -> None:
        window = self.window
        assert window is not None
        started = time.perf_counter()
        count, self.free = self.free, 0
        window.begin(count)
        try:
            for _ in range(count):
                self.sequence += 1
                _, offset = core.append([(None, VALUES[self.sequence % VALUE_POOL])], now)
                self.waiting.append((offset, started))
        except NotLeaderError as e:
            window.fail(f"not the leader any more: {e}")
            self.window = None


class PacedWriter:
    """One controller operation every interval, each commit timed as the leader sees it."""

    def __init__(self, node: KraftNode) -> None:
        self.node = node
        self.waiting: deque[tuple[int, float]] = deque()  # (offset, submitted), in offset order
        self.done: list[tuple[int, float, float]] = []
        node.on_step(self.on_step)

    def on_step(self, core: RaftCore) -> None:
        hw = core.high_watermark
        if hw is None or not self.waiting or self.waiting[0][0] >= hw:
            return
        now = time.monotonic()
        while self.waiting and self.waiting[0][0] < hw:
            offset, submitted = self.waiting.popleft()
            self.done.append((offset, submitted, now))

    async def run(self, interval_s: float, seconds: float) -> dict:
        controller = self.node.controller
        due = time.monotonic()
        end = due + seconds
        self.done = []
        sequence = 0
        while due < end:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            sequence += 1
            record = ConfigRecord(ConfigResourceType.TOPIC, RESOURCE, KEY, str(sequence))
            submitted = time.monotonic()
            try:
                pending = self.node.step(lambda core, now, r=record: controller.submit(
                    lambda image: ControllerResult((r,), None), now))
            except Exception as e:  # NotControllerError: the leadership moved
                return {"error": str(e)}
            if pending is None:
                return {"error": "the node stopped stepping"}
            self.waiting.append((pending.last_offset, submitted))
            due += interval_s
        deadline = time.monotonic() + 60
        while self.waiting and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if self.waiting:
            return {"error": f"{len(self.waiting)} writes not committed 60 s after the last"}
        return {"writes": self.done}


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> Any:
    """Runs `fn` on the node's event loop (from the command thread) and returns its result."""

    async def call() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), loop).result()


async def run(config_path: str) -> None:
    config = read_config(config_path)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s [node {config.node_id}] %(name)s: %(message)s",
    )
    keep_large_buffers()
    node = KraftNode(config)
    await node.start()
    load = LoadGenerator(node)
    paced = PacedWriter(node)
    loop = asyncio.get_running_loop()

    def role(_: dict) -> dict:
        core = node.core
        return {"leader": on_loop(loop, lambda: core.is_leader and core.high_watermark is not None)}

    def run_load(command: dict) -> dict:
        window = Window(command["in_flight"], command["seconds"])
        on_loop(loop, lambda: load.start(window))
        return window.wait()

    def describe(_: dict) -> dict:
        def read() -> dict:
            core = node.core
            return {"leader": core.is_leader, "epoch": core.epoch, "high_watermark": core.high_watermark,
                    "log_end": node.log_end, "cluster_id": node.cluster_id}
        return on_loop(loop, read)

    def run_paced(command: dict) -> dict:
        return asyncio.run_coroutine_threadsafe(
            paced.run(command["interval_ms"] / 1000, command["seconds"]), loop).result()

    finished = loop.create_future()

    def commands() -> None:
        serve({"role": role, "load": run_load, "describe": describe, "paced": run_paced})
        loop.call_soon_threadsafe(finished.set_result, None)

    threading.Thread(target=commands, daemon=True).start()
    await finished
    await node.stop()


if __name__ == "__main__":
    # KRAFT_BENCH_PROFILE=dir: each node writes its cProfile to dir/node-N.prof. cProfile slows a
    # node several times over: profile a fleet of a few hundred observers (fleet_bench.py --scale 0.2).
    profile_dir = os.environ.get("KRAFT_BENCH_PROFILE")
    if profile_dir:
        import cProfile

        with cProfile.Profile() as profile:
            asyncio.run(run(sys.argv[1]))
        profile.dump_stats(Path(profile_dir) / f"{Path(sys.argv[1]).parent.name}.prof")
    else:
        asyncio.run(run(sys.argv[1]))
