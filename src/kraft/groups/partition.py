"""What a group coordinator needs of the Raft core of its `__consumer_offsets` partition.

Exactly what the metadata controller uses of its core: append records as the leader, the
leadership and the epoch start (to know when it has caught up), the high watermark, the
log start and latest snapshot (to know when a snapshot may be written), and a snapshot
writer. `RaftCore` provides it as it is; the check below makes mypy say so, or say what a
change to the core broke.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kraft.storage.snapshot import SnapshotId, SnapshotWriter


class LeaderView(Protocol):
    @property
    def epoch_start_offset(self) -> int:
        """The offset of the leader's LeaderChange record in its epoch."""
        ...


class LogView(Protocol):
    @property
    def start_offset(self) -> int: ...


class SnapshotsView(Protocol):
    def latest(self) -> SnapshotId | None: ...


class RaftPartition(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_id(self) -> int | None: ...

    @property
    def epoch(self) -> int: ...

    @property
    def leader_state(self) -> LeaderView | None: ...

    @property
    def high_watermark(self) -> int | None: ...

    @property
    def log(self) -> LogView: ...

    @property
    def snapshots(self) -> SnapshotsView: ...

    def append(self, records: Sequence[tuple[bytes, bytes | None]], now: int) -> tuple[int, int]:
        """Queues (key, value) records as one batch; returns (epoch, offset of the last).
        Raises NotLeaderError, or RecordBatchTooLargeError with nothing queued."""
        ...

    def snapshot_id_at(self, end_offset: int) -> SnapshotId: ...

    def create_snapshot(self, snapshot_id: SnapshotId, last_contained_log_time: int) -> SnapshotWriter: ...


if TYPE_CHECKING:
    from kraft.raft import RaftCore

    def _a_raft_core_is_a_partition(core: RaftCore) -> RaftPartition:
        return core
