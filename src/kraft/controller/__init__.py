"""The cluster-metadata state machine on Raft (the active controller and every node's cache).

Its place among the layers: docs/architecture.md.
"""

from kraft.controller.pending import NotControllerError, Pending
from kraft.controller.quorum_controller import QuorumController, SnapshotJob

__all__ = ["NotControllerError", "Pending", "QuorumController", "SnapshotJob"]
