"""The leader's queue of append() calls not yet in the log, and how they become batches.

The records of one append() call always go into one batch, so that what one caller wrote
together (a controller operation) commits whole or not at all; calls are batched together
while they fit. Sizes are bounded without encoding the records (the encoding happens once,
when the queue drains), except for a call whose bound passes the batch limit: that one is
encoded to learn whether it fits alone (Kafka's RecordBatchTooLargeException if not).
"""

from collections.abc import Sequence

from kraft.raft.raft_errors import RecordBatchTooLargeError
from kraft.records import HEADER_SIZE, SimpleRecord, build_batch

Records = Sequence[SimpleRecord | tuple]

# Bounds on a record's framing in a batch, for sizing batches without encoding them: its
# length, attributes, timestamp and offset deltas, key and value lengths and header count
# as varints (at most 5+1+10+5+5+5+5 bytes), and each header's key and value lengths.
_RECORD_BOUND = 36
_HEADER_BOUND = 10


class BatchAccumulator:
    """Queued append() calls, each with a bound on its size in a batch.

    `max_batch_bytes` is the hard limit of one batch (the config's and the log's smaller);
    `drain_bytes` the queued size at which the queue drains without waiting for the linger.
    """

    def __init__(self, max_batch_bytes: int, drain_bytes: int, linger_ms: int) -> None:
        self.max_batch_bytes = max_batch_bytes
        self.drain_bytes = drain_bytes
        self.linger_ms = linger_ms
        self._calls: list[list[SimpleRecord | tuple]] = []
        self._sizes: list[int] = []
        self.count = 0  # records queued
        self._bytes = 0
        self.since: int | None = None  # when the oldest queued call came

    def add(self, records: Records, now: int) -> None:
        """Queues one call's records; RecordBatchTooLargeError (nothing queued) if they
        cannot fit in one batch."""
        size = size_bound(records)
        if HEADER_SIZE + size > self.max_batch_bytes:
            size = self._size_alone(records, now)
        self._calls.append(list(records))
        self._sizes.append(size)
        self.count += len(records)
        self._bytes += size
        if self.since is None:
            self.since = now

    def _size_alone(self, records: Records, now: int) -> int:
        """For records whose size bound passes the batch limit: encodes them to know. Too
        large, they are refused; otherwise they are sized to fill a batch on their own."""
        size = len(build_batch(records, timestamp=now))
        if size > self.max_batch_bytes:
            raise RecordBatchTooLargeError(len(records), size, self.max_batch_bytes)
        return self.max_batch_bytes - HEADER_SIZE

    def deadline(self) -> int | None:
        """When the linger of the oldest queued call runs out (None: nothing queued)."""
        return None if self.since is None else self.since + self.linger_ms

    def ready(self, now: int, awaited: bool = False) -> bool:
        """Whether the queue drains now: at once when `awaited` (nothing appended before is
        still waiting for its commit, see RaftCore), else when the linger runs out or a batch
        is full."""
        return bool(self._calls) and (
            awaited or now >= (self.since if self.since is not None else now) + self.linger_ms
            or self._bytes >= self.drain_bytes
        )

    def drain(self, now: int) -> list[bytearray]:
        """The queued calls as batches, as many whole calls per batch as fit; empties the queue."""
        limit = self.max_batch_bytes - HEADER_SIZE
        batches = []
        batch: list[SimpleRecord | tuple] = []
        size = 0
        for records, bound in zip(self._calls, self._sizes, strict=True):
            if batch and size + bound > limit:
                batches.append(build_batch(batch, timestamp=now))
                batch, size = [], 0
            batch.extend(records)
            size += bound
        batches.append(build_batch(batch, timestamp=now))
        self.clear()
        return batches

    def clear(self) -> None:
        self._calls, self._sizes = [], []
        self.count = self._bytes = 0
        self.since = None


def size_bound(records: Records) -> int:
    """An upper bound on the bytes `records` take in a batch, its header not counted."""
    size = 0
    for r in records:
        size += _RECORD_BOUND + len(r[0] or b"") + len(r[1] or b"")
        if len(r) > 2 and r[2]:
            size += sum(_HEADER_BOUND + len(key.encode()) + len(value or b"") for key, value in r[2])
    return size
