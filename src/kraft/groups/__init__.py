"""Consumer groups: Kafka's group coordinator as a state machine on a Raft log.

Each `__consumer_offsets` partition is a Raft log of its own (server/runtime/node.py runs them);
the coordinator of a partition is that log's listener and, on its leader, serves the groups that hash to
it (Kafka's records, Kafka's classic protocol, committed offsets with their leader epoch).
Its place among the layers: docs/architecture.md; its wiring and what is left:
docs/decisions/0032-consumer-groups-on-raft-partitions.md.
"""

from kraft.groups.api import GroupApi, GroupContext
from kraft.groups.classic import GroupStateError
from kraft.groups.coordinator import GroupCoordinator
from kraft.groups.group_config import GroupConfig
from kraft.groups.partition import RaftPartition
from kraft.groups.partitioning import OFFSETS_TOPIC, partition_for
from kraft.groups.replies import CoordinatorError, Reply
from kraft.groups.state import GroupsImage
from kraft.groups.wire import GroupRecordError

__all__ = [
    "OFFSETS_TOPIC",
    "CoordinatorError",
    "GroupApi",
    "GroupConfig",
    "GroupContext",
    "GroupCoordinator",
    "GroupRecordError",
    "GroupStateError",
    "GroupsImage",
    "RaftPartition",
    "Reply",
    "partition_for",
]
