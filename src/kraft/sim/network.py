"""The simulator's clock and network: one event queue in virtual time, one seed.

Every delivery is an event at a time chosen from the seed. Faults are settings of the
network: a drop probability, a duplicate probability, a delay range wide enough to
reorder, and a set of cut directed links (a partition is cutting both directions; a
one-way failure, one).
"""

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random


class Clock:
    """Virtual time and the event queue; events at the same time run in scheduling order."""

    def __init__(self) -> None:
        self.now = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, when: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (max(when, self.now), self._seq, action))

    def run_until(self, end: int, after_each: Callable[[], None]) -> None:
        while self._queue and self._queue[0][0] <= end:
            when, _, action = heapq.heappop(self._queue)
            self.now = when
            action()
            after_each()
        self.now = max(self.now, end)


@dataclass
class NetworkFaults:
    drop: float = 0.0
    duplicate: float = 0.0
    min_delay: int = 1
    max_delay: int = 5
    cut: set[tuple[int, int]] = field(default_factory=set)  # (from, to) links that lose everything

    def isolate(self, node: int, others: list[int]) -> None:
        for other in others:
            if other != node:
                self.cut |= {(node, other), (other, node)}

    def split(self, side_a: list[int], side_b: list[int]) -> None:
        for a in side_a:
            for b in side_b:
                self.cut |= {(a, b), (b, a)}

    def heal(self) -> None:
        self.drop = self.duplicate = 0.0
        self.min_delay, self.max_delay = 1, 5
        self.cut.clear()


class Network:
    def __init__(self, clock: Clock, rng: Random) -> None:
        self.clock = clock
        self.rng = rng
        self.faults = NetworkFaults()
        self.delivered = 0
        self.dropped = 0

    def send(self, source: int, destination: int, deliver: Callable[[], None]) -> None:
        """Schedules `deliver` at the destination, subject to the current faults."""
        f = self.faults
        if (source, destination) in f.cut or self.rng.random() < f.drop:
            self.dropped += 1
            return
        copies = 2 if self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            self.delivered += 1
            self.clock.at(self.clock.now + self.rng.randint(f.min_delay, f.max_delay), deliver)
