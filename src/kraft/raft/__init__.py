"""The Raft core (KIP-595 with KIP-320 fencing): deterministic, no sockets, threads or clock;
it writes its log and quorum-state itself, as Kafka's KafkaRaftClient does.

The driver contract is core.py's docstring; what each module owns: docs/architecture.md
("The I/O boundary", "The modules of each layer"); why the core makes the choices it does:
docs/decisions/.
"""

from kraft.raft.core import RaftCore
from kraft.raft.outbox import Reply, Send
from kraft.raft.raft_config import RaftConfig
from kraft.raft.raft_errors import InvariantViolation, NotLeaderError, RaftError, RecordBatchTooLargeError
from kraft.raft.roles import Role
from kraft.raft.state_machine import CommittedBatch, LeaderAndEpoch, Listener

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
