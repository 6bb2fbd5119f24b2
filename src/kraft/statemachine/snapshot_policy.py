"""When a state machine should snapshot: KIP-630's two thresholds, KIP-876's timer.

A snapshot is due when both
  * the committed bytes since the latest snapshot reach
    `metadata.log.max.record.bytes.between.snapshots`, and
  * the ratio of the snapshot's records changed (modified or deleted; new ones do not
    count) reaches `metadata.snapshot.min.changed_records.ratio`,
or when the oldest committed record not in the latest snapshot was appended more than
`metadata.log.max.snapshot.interval.ms` ago (0 turns this off).

Whatever made the snapshot, the counters start again from its end offset. A snapshot is
written from an image in a worker thread while commits go on, so what was committed after
its end offset while it was written is not in it: `snapshot_started` marks the end offset,
the commits past it are counted apart, and `snapshot_finished` keeps exactly those (their
bytes, and the append time of the first of them for the timer). A snapshot that failed
(`snapshot_failed`) keeps every counter, and the next attempt waits `retry_backoff_ms`: a
failure usually means a full or failing disk, and retrying on every step of the core would
only repeat it.

The ratio's count is `kraft.statemachine.changed_records`, kept by each state machine's
cache as it applies batches.
"""

from dataclasses import dataclass, field

from kraft.raft.state_machine import CommittedBatch

DEFAULT_MAX_BYTES_BETWEEN = 20 * 1024 * 1024
DEFAULT_MIN_CHANGED_RATIO = 0.5
DEFAULT_MAX_INTERVAL_MS = 3600 * 1000
DEFAULT_RETRY_BACKOFF_MS = 30_000


@dataclass
class _Since:
    """What was committed after one offset: bytes, and the first append time."""

    bytes: int = 0
    oldest_ms: int | None = None

    def add(self, batch: CommittedBatch) -> None:
        self.bytes += batch.size_in_bytes
        if self.oldest_ms is None:
            self.oldest_ms = batch.append_timestamp


@dataclass
class SnapshotPolicy:
    max_bytes_between: int = DEFAULT_MAX_BYTES_BETWEEN
    min_changed_ratio: float = DEFAULT_MIN_CHANGED_RATIO
    max_interval_ms: int = DEFAULT_MAX_INTERVAL_MS
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    _since_latest: _Since = field(default_factory=_Since, init=False, repr=False)
    _in_flight: tuple[int, _Since] | None = field(default=None, init=False, repr=False)  # (end offset, since it)
    _failed: bool = field(default=False, init=False, repr=False)  # a failure the retry delay has not started for
    _retry_at_ms: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_bytes_between < 1:
            raise ValueError("metadata.log.max.record.bytes.between.snapshots must be at least 1")
        if not 0.0 <= self.min_changed_ratio <= 1.0:
            raise ValueError("metadata.snapshot.min.changed_records.ratio must be between 0 and 1")
        if self.max_interval_ms < 0:
            raise ValueError("metadata.log.max.snapshot.interval.ms must not be negative")
        if self.retry_backoff_ms < 0:
            raise ValueError("the snapshot retry backoff must not be negative")

    @property
    def bytes_since(self) -> int:
        """Committed bytes not in the latest snapshot."""
        return self._since_latest.bytes

    @property
    def oldest_unsnapshotted_ms(self) -> int | None:
        """Append time of the oldest committed record not in the latest snapshot."""
        return self._since_latest.oldest_ms

    def record_commit(self, batch: CommittedBatch) -> None:
        self._since_latest.add(batch)
        if self._in_flight is not None and batch.last_offset >= self._in_flight[0]:
            self._in_flight[1].add(batch)

    def due(self, now_ms: int, changed_ratio: float) -> str | None:
        """Why a snapshot is due now, in words for the log, or None.

        After a failure the retry delay starts at the first call, on the caller's clock
        (the failure itself is reported from the snapshot's worker, which has none)."""
        if self._failed:
            self._failed = False
            self._retry_at_ms = now_ms + self.retry_backoff_ms
        if self._retry_at_ms is not None and now_ms < self._retry_at_ms:
            return None
        since = self._since_latest
        if since.bytes >= self.max_bytes_between and changed_ratio >= self.min_changed_ratio:
            return (
                f"{since.bytes} bytes committed since the last snapshot (>= {self.max_bytes_between}) "
                f"and {changed_ratio:.0%} of its records changed (>= {self.min_changed_ratio:.0%})"
            )
        oldest = since.oldest_ms
        if self.max_interval_ms > 0 and oldest is not None and now_ms - oldest >= self.max_interval_ms:
            return f"the oldest record not in a snapshot is {now_ms - oldest} ms old (>= {self.max_interval_ms})"
        return None

    def snapshot_started(self, end_offset: int) -> None:
        """A snapshot of everything below `end_offset` is being written; commits from now on
        are counted apart too, as they will not be in it."""
        self._in_flight = (end_offset, _Since())

    def snapshot_finished(self, end_offset: int) -> None:
        """The snapshot started at `end_offset` is written: only what was committed past it
        still counts. Nothing changes if a reset came in between (a snapshot was loaded)."""
        if self._in_flight is not None and self._in_flight[0] == end_offset:
            self._since_latest = self._in_flight[1]
            self._in_flight = None
            self._retry_at_ms = None

    def snapshot_failed(self) -> None:
        """The snapshot being written failed: every counter stays, and the next one waits."""
        self._in_flight = None
        self._failed = True

    def reset(self) -> None:
        """A snapshot holding everything committed was made or loaded: every counter starts
        again, and a retry delay left by an earlier failure is over."""
        self._since_latest = _Since()
        self._in_flight = None
        self._failed = False
        self._retry_at_ms = None
