"""Storage: the replicated log (file and memory), the leader-epoch cache, quorum-state.

Its place among the layers, and the files on disk: docs/architecture.md.
"""

from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.file_log import FileLog
from kraft.storage.log import ReplicatedLog
from kraft.storage.memory_log import MemoryLog
from kraft.storage.quorum_state_file import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumStateStore,
)
from kraft.storage.snapshot import (
    RawSnapshotWriter,
    SnapshotId,
    SnapshotReader,
    SnapshotWriter,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from kraft.storage.snapshot_store import (
    FileSnapshotStore,
    MemorySnapshotStore,
    SnapshotStore,
    validate_snapshots_and_log,
)
from kraft.storage.storage_errors import (
    CorruptCheckpointError,
    CorruptLogError,
    CorruptSnapshotError,
    InvalidAppendError,
    OffsetOutOfRangeError,
    PositionOutOfRangeError,
    RecordTooLargeError,
    SnapshotError,
    SnapshotNotFoundError,
    StorageError,
)
from kraft.storage.types import FileRegion, LogAppendInfo, LogReadInfo, OffsetAndEpoch

__all__ = [
    "CorruptCheckpointError",
    "CorruptLogError",
    "CorruptSnapshotError",
    "ElectionState",
    "FileLog",
    "FileQuorumStateStore",
    "FileRegion",
    "FileSnapshotStore",
    "InvalidAppendError",
    "LeaderEpochCache",
    "LogAppendInfo",
    "LogReadInfo",
    "MemoryLog",
    "MemoryQuorumStateStore",
    "MemorySnapshotStore",
    "OffsetAndEpoch",
    "OffsetOutOfRangeError",
    "PositionOutOfRangeError",
    "QuorumStateStore",
    "RawSnapshotWriter",
    "RecordTooLargeError",
    "ReplicatedLog",
    "SnapshotError",
    "SnapshotId",
    "SnapshotNotFoundError",
    "SnapshotReader",
    "SnapshotStore",
    "SnapshotWriter",
    "StorageError",
    "parse_snapshot_file_name",
    "snapshot_file_name",
    "validate_snapshots_and_log",
]
