"""The leader's parked fetches, indexed by what wakes them.

A leader with a fleet of observers holds one parked Fetch per observer, and every event is a
step that asks which of them are due and when the next one will be. A list scanned at each
step made a round of N answers cost O(N^2) (a step per arriving Fetch, each scanning all N):
at 1,000 observers about 200 us a step. Here a step costs O(what is due): the fetches are
kept in arrival order (the order they are answered in) with three heaps beside them, by
deadline, by fetch offset and by the fetcher's high watermark, since a parked Fetch wakes
when its MaxWait runs out, when the log grows past its offset, or when the leader's high
watermark passes the one the fetcher sent (KIP-1166, Fetch v18; an older Fetch sends none,
Kafka's Long.MAX_VALUE, and never wakes so). Kafka's fetch purgatory keys its delayed
fetches by partition and times them out on a timing wheel, for the same reason.

Entries a wake-up took out stay in the other heap until they reach its top (lazy deletion);
a heap is rebuilt from the live entries when it holds more than twice as many, so an idle
leader whose fetches only ever time out keeps bounded heaps.
"""

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class ParkedFetch:
    """A replica's Fetch with nothing to answer yet: answered when data comes, when the
    leader's high watermark passes the fetcher's, or when its MaxWait runs out."""

    handle: Any
    replica_id: int
    fetch_offset: int
    max_bytes: int
    deadline: int
    high_watermark: int  # the fetcher's (Fetch v18; -1: it knows none; NO_HIGH_WATERMARK: older)


class ParkedFetches:
    __slots__ = ("_waiting", "_by_deadline", "_by_offset", "_by_high_watermark", "_by_handle", "_next_seq")

    def __init__(self) -> None:
        self._waiting: dict[int, ParkedFetch] = {}  # arrival number -> fetch, in arrival order
        self._by_deadline: list[tuple[int, int]] = []  # (deadline, arrival number)
        self._by_offset: list[tuple[int, int]] = []  # (fetch offset, arrival number)
        self._by_high_watermark: list[tuple[int, int]] = []  # (the fetcher's high watermark, arrival number)
        self._by_handle: dict[Any, int] = {}  # handle -> arrival number, of those waiting
        self._next_seq = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self) -> Iterator[ParkedFetch]:
        return iter(self._waiting.values())

    def park(self, fetch: ParkedFetch) -> None:
        seq = self._next_seq
        self._next_seq += 1
        self._waiting[seq] = fetch
        self._by_handle[fetch.handle] = seq
        heapq.heappush(self._by_deadline, (fetch.deadline, seq))
        heapq.heappush(self._by_offset, (fetch.fetch_offset, seq))
        heapq.heappush(self._by_high_watermark, (fetch.high_watermark, seq))

    def take(self, handle: Any) -> ParkedFetch | None:
        """The fetch parked as `handle`, no longer parked (None if it is not): a node answers a
        Fetch naming several partitions when one of them can, and completes the others so."""
        seq = self._by_handle.pop(handle, None)
        return self._waiting.pop(seq) if seq is not None else None

    def next_deadline(self) -> int | None:
        """When the earliest MaxWait runs out (None: nothing parked)."""
        heap, waiting = self._by_deadline, self._waiting
        while heap and heap[0][1] not in waiting:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def take_due(self, now: int, high_watermark: int | None, log_end_offset: int) -> list[ParkedFetch]:
        """The parked fetches to answer now, in the order they came: those with data (the log
        has grown past their offset), those whose fetcher's high watermark is behind the
        leader's `high_watermark`, and those whose wait is over. The others stay parked."""
        taken: list[tuple[int, ParkedFetch]] = []
        self._take_below(self._by_deadline, now + 1, taken)
        self._take_below(self._by_offset, log_end_offset, taken)
        if high_watermark is not None:
            self._take_below(self._by_high_watermark, high_watermark, taken)
        if not taken:
            return []
        self._compact()
        taken.sort(key=lambda entry: entry[0])
        return [fetch for _, fetch in taken]

    def _take_below(self, heap: list[tuple[int, int]], bound: int, into: list[tuple[int, ParkedFetch]]) -> None:
        waiting = self._waiting
        while heap and heap[0][0] < bound:
            _, seq = heapq.heappop(heap)
            fetch = waiting.pop(seq, None)
            if fetch is not None:
                if self._by_handle.get(fetch.handle) == seq:
                    del self._by_handle[fetch.handle]
                into.append((seq, fetch))

    def _compact(self) -> None:
        limit = 2 * len(self._waiting) + 64
        if len(self._by_deadline) > limit:
            self._by_deadline = [(fetch.deadline, seq) for seq, fetch in self._waiting.items()]
            heapq.heapify(self._by_deadline)
        if len(self._by_offset) > limit:
            self._by_offset = [(fetch.fetch_offset, seq) for seq, fetch in self._waiting.items()]
            heapq.heapify(self._by_offset)
        if len(self._by_high_watermark) > limit:
            self._by_high_watermark = [(fetch.high_watermark, seq) for seq, fetch in self._waiting.items()]
            heapq.heapify(self._by_high_watermark)
