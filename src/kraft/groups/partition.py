"""What a group coordinator needs of the Raft core of its `__consumer_offsets` partition.

Exactly what the metadata controller uses of its core: append records as the leader, the
leadership and the epoch start (to know when it has caught up), and what starting a
snapshot needs (`SnapshotSource`: the high watermark, the log start, the latest snapshot
and a snapshot writer). `RaftCore` provides it as it is; the check below makes mypy say
so, or say what a change to the core broke.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kraft.statemachine.snapshot_jobs import SnapshotSource


class LeaderView(Protocol):
    @property
    def epoch_start_offset(self) -> int:
        """The offset of the leader's LeaderChange record in its epoch."""
        ...


class RaftPartition(SnapshotSource, Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_id(self) -> int | None: ...

    @property
    def epoch(self) -> int: ...

    @property
    def leader_state(self) -> LeaderView | None: ...

    def append(self, records: Sequence[tuple[bytes, bytes | None]], now: int) -> tuple[int, int]:
        """Queues (key, value) records as one batch; returns (epoch, offset of the last).
        Raises NotLeaderError, or RecordBatchTooLargeError with nothing queued."""
        ...


if TYPE_CHECKING:
    from kraft.raft import RaftCore

    def _a_raft_core_is_a_partition(core: RaftCore) -> RaftPartition:
        return core
