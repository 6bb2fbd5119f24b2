"""What the core tells the state machine: committed batches, in order, and leader changes."""

from dataclasses import dataclass
from typing import Protocol

from kraft.records import Record
from kraft.storage import SnapshotReader


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """A committed batch: its records, and where and when it sits in the log.

    Control batches (a new leader's LeaderChange) are delivered too, with `control` set, so
    a state machine sees every offset in order; most skip their records.
    """

    base_offset: int
    last_offset: int
    epoch: int
    append_timestamp: int
    size_in_bytes: int
    records: list[Record]
    control: bool = False


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int | None
    epoch: int


class Listener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None:
        """Called once per committed batch, in offset order, never for a batch twice."""

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """Called when the known leader or the epoch changes (leader None: not known yet)."""

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the state with the snapshot's: at boot (the latest local snapshot), and on
        a follower or observer after it fetched one. Commits continue from its end offset."""
