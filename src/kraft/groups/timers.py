"""Keyed deadlines on the caller's clock: Kafka's coordinator timer, without a thread.

Kafka's group coordinator schedules each timeout under a key (a member's heartbeat, a
group's join or sync phase); scheduling a key again replaces its deadline, cancelling
removes it. Here nothing fires by itself: the coordinator is handed `now` and asks for
what is due, so the same inputs always give the same outcome (as the Raft core). A heap
orders the deadlines; entries a later schedule or a cancel made stale are dropped when
they reach its top, and the heap is rebuilt when they outnumber the live ones (a member
heartbeating every 3 s reschedules its key at that rate).
"""

import heapq
import itertools
from collections.abc import Callable, Hashable

Action = Callable[[int], None]


class Timers:
    def __init__(self) -> None:
        self._live: dict[Hashable, tuple[int, int, Action]] = {}  # key -> (deadline, sequence, action)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, deadline: int, action: Action) -> None:
        """Runs `action(now)` once `now` reaches `deadline`, replacing what `key` held."""
        sequence = next(self._sequence)
        self._live[key] = (deadline, sequence, action)
        heapq.heappush(self._heap, (deadline, sequence, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
            self._heap = [(d, s, k) for k, (d, s, _) in self._live.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def clear(self) -> None:
        self._live.clear()
        self._heap.clear()

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, sequence, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == sequence:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def run_due(self, now: int) -> int:
        """Runs every action whose deadline is at or before `now`, earliest first (an action
        may schedule more, which run too if already due); returns how many ran."""
        ran = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                return ran
            _, _, key = heapq.heappop(self._heap)
            _, _, action = self._live.pop(key)
            action(now)
            ran += 1
