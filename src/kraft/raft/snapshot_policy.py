"""When a state machine should snapshot: KIP-630's two thresholds, KIP-876's timer.

A snapshot is due when both
  * the committed bytes since the latest snapshot reach
    `metadata.log.max.record.bytes.between.snapshots`, and
  * the ratio of the snapshot's records changed (modified or deleted; new ones do not
    count) reaches `metadata.snapshot.min.changed_records.ratio`,
or when the oldest committed record not in the latest snapshot was appended more than
`metadata.log.max.snapshot.interval.ms` ago (0 turns this off). Whatever made the snapshot,
every counter starts again from it.
"""

from dataclasses import dataclass

from kraft.raft.listener import CommittedBatch

DEFAULT_MAX_BYTES_BETWEEN = 20 * 1024 * 1024
DEFAULT_MIN_CHANGED_RATIO = 0.5
DEFAULT_MAX_INTERVAL_MS = 3600 * 1000


@dataclass
class SnapshotPolicy:
    max_bytes_between: int = DEFAULT_MAX_BYTES_BETWEEN
    min_changed_ratio: float = DEFAULT_MIN_CHANGED_RATIO
    max_interval_ms: int = DEFAULT_MAX_INTERVAL_MS
    bytes_since: int = 0
    oldest_unsnapshotted_ms: int | None = None

    def __post_init__(self) -> None:
        if self.max_bytes_between < 1:
            raise ValueError("metadata.log.max.record.bytes.between.snapshots must be at least 1")
        if not 0.0 <= self.min_changed_ratio <= 1.0:
            raise ValueError("metadata.snapshot.min.changed_records.ratio must be between 0 and 1")
        if self.max_interval_ms < 0:
            raise ValueError("metadata.log.max.snapshot.interval.ms must not be negative")

    def record_commit(self, batch: CommittedBatch) -> None:
        self.bytes_since += batch.size_in_bytes
        if self.oldest_unsnapshotted_ms is None:
            self.oldest_unsnapshotted_ms = batch.append_timestamp

    def due(self, now_ms: int, changed_ratio: float) -> str | None:
        """Why a snapshot is due now, in words for the log, or None."""
        if self.bytes_since >= self.max_bytes_between and changed_ratio >= self.min_changed_ratio:
            return (
                f"{self.bytes_since} bytes committed since the last snapshot (>= {self.max_bytes_between}) "
                f"and {changed_ratio:.0%} of its records changed (>= {self.min_changed_ratio:.0%})"
            )
        oldest = self.oldest_unsnapshotted_ms
        if self.max_interval_ms > 0 and oldest is not None and now_ms - oldest >= self.max_interval_ms:
            return f"the oldest record not in a snapshot is {now_ms - oldest} ms old (>= {self.max_interval_ms})"
        return None

    def reset(self) -> None:
        """A snapshot was made, for whatever reason: every counter starts again."""
        self.bytes_since = 0
        self.oldest_unsnapshotted_ms = None
