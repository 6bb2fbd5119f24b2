"""Storage: the replicated log (file and memory), the leader-epoch cache, quorum-state."""

from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.errors import (
    CorruptCheckpointError,
    CorruptLogError,
    InvalidAppendError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from kraft.storage.file_log import FileLog
from kraft.storage.log import ReplicatedLog
from kraft.storage.memory_log import MemoryLog
from kraft.storage.quorum_state import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumStateStore,
)
from kraft.storage.types import FileRegion, LogAppendInfo, LogReadInfo, OffsetAndEpoch

__all__ = [
    "CorruptCheckpointError",
    "CorruptLogError",
    "ElectionState",
    "FileLog",
    "FileQuorumStateStore",
    "FileRegion",
    "InvalidAppendError",
    "LeaderEpochCache",
    "LogAppendInfo",
    "LogReadInfo",
    "MemoryLog",
    "MemoryQuorumStateStore",
    "OffsetAndEpoch",
    "OffsetOutOfRangeError",
    "QuorumStateStore",
    "RecordTooLargeError",
    "ReplicatedLog",
    "StorageError",
]
