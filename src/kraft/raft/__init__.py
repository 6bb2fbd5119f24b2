"""The Raft core (KIP-595 with KIP-320 fencing), sans-IO; see core.py."""

from kraft.raft.config import RaftConfig
from kraft.raft.core import RaftCore
from kraft.raft.errors import InvariantViolation, NotLeaderError, RaftError, RecordBatchTooLargeError
from kraft.raft.listener import CommittedBatch, LeaderAndEpoch, Listener
from kraft.raft.outbox import Reply, Send
from kraft.raft.roles import Role

__all__ = [
    "CommittedBatch",
    "InvariantViolation",
    "LeaderAndEpoch",
    "Listener",
    "NotLeaderError",
    "RaftConfig",
    "RaftCore",
    "RaftError",
    "RecordBatchTooLargeError",
    "Reply",
    "Role",
    "Send",
]
