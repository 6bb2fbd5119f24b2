"""An in-process Raft cluster for benchmarks: cores wired by a direct queue, a frozen clock.

No sockets, no virtual network, no faults: only the cores' own work (and their logs'
and snapshot stores') is measured. Time advances only when nothing is left to deliver,
so timers (elections, long-polls) fire, but never while there is work.
"""

from collections import deque
from collections.abc import Callable
from random import Random
from typing import Any

from kraft.raft import RaftConfig, RaftCore, Reply, Send
from kraft.storage import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore, SnapshotStore


class Cluster:
    def __init__(
        self,
        voters: tuple[int, ...],
        observers: tuple[int, ...] = (),
        listeners=None,
        snapshot_stores: Callable[[int], SnapshotStore] | None = None,
        **config: Any,
    ) -> None:
        """`snapshot_stores(node)` gives each node its snapshot store (default: in memory)."""
        self.now = 0
        self.voters = voters
        self.config = config
        self.listeners = listeners or {}
        self.snapshot_stores = snapshot_stores
        self.cores: dict[int, RaftCore] = {}
        self.queue: deque = deque()
        self.messages = 0
        self.sample: list = []
        self.keep_sample = False
        for node in voters + observers:
            self.add(node)
        # One voter's election timeout ends first, as randomized timeouts make one: ticked
        # together on this frozen clock, all three would pre-vote, campaign and split the vote
        # within the same millisecond, again and again, and the clock would never move.
        self.now = 5000
        next(iter(self.cores.values())).tick(self.now)
        self.drive(lambda: any(c.is_leader and c.high_watermark for c in self.cores.values()))
        self.leader = next(c for c in self.cores.values() if c.is_leader)

    def add(self, node: int) -> RaftCore:
        config = RaftConfig(node_id=node, voters=self.voters, cluster_id="bench", **self.config)
        snapshots = self.snapshot_stores(node) if self.snapshot_stores is not None else MemorySnapshotStore()
        self.cores[node] = RaftCore(
            config, MemoryLog(), MemoryQuorumStateStore(), Random(node), self.now, self.listeners.get(node), snapshots,
        )
        return self.cores[node]

    def drive(self, done: Callable[[], bool]) -> None:
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
                    if self.keep_sample and len(self.sample) < 2000:
                        self.sample.append(message.request)
                    cores[message.destination].handle_request((source, message.request_id), message.request, self.now)
                else:
                    assert isinstance(message, Reply)
                    if self.keep_sample and len(self.sample) < 2000:
                        self.sample.append(message.response)
                    origin, request_id = message.handle
                    cores[origin].handle_response(request_id, message.response, self.now)

    def commit(self, records: list, in_flight: int = 1) -> None:
        """Appends `records` `in_flight` times and drives until all are committed."""
        last = 0
        for _ in range(in_flight):
            _, last = self.leader.append(records, self.now)
        self.drive(lambda: self.leader.high_watermark is not None and self.leader.high_watermark > last)
