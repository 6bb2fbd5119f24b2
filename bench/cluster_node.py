"""A kraft voter for the cluster benchmark, with the load generator in its own process.

    python bench/cluster_node.py server.properties

Runs a KraftNode as `kraft server start` does (logs on stderr) and serves the parent's
commands on stdin (cluster_load.serve):

    {"cmd": "role"}                                  -> {"leader": true|false}
    {"cmd": "load", "in_flight": N, "seconds": S}    -> cluster_load.Window's figures

An operation is one 100-byte record appended on the leader; it completes when the
leader's high watermark passes its offset. Every record is a framed ConfigRecord (each
node's QuorumController applies what commits), on a topic resource no admin ever creates.
"""

import asyncio
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from cluster_load import RECORD_BYTES, VALUE_POOL, Window, serve

from kraft.cli.server_cmd import keep_large_buffers
from kraft.metadata import ConfigResourceType, encode_record
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
    loop = asyncio.get_running_loop()

    def role(_: dict) -> dict:
        core = node.core
        return {"leader": on_loop(loop, lambda: core.is_leader and core.high_watermark is not None)}

    def run_load(command: dict) -> dict:
        window = Window(command["in_flight"], command["seconds"])
        on_loop(loop, lambda: load.start(window))
        return window.wait()

    finished = loop.create_future()

    def commands() -> None:
        serve({"role": role, "load": run_load})
        loop.call_soon_threadsafe(finished.set_result, None)

    threading.Thread(target=commands, daemon=True).start()
    await finished
    await node.stop()


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1]))
