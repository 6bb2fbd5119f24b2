"""The leader-epoch rules (KIP-320, KIP-595), written once for every fetcher.

Replicas (the Raft core's Fetch) and consumers (the client listener's Fetch and
OffsetForLeaderEpoch) are fenced and told where their history diverges by the same rules,
read from the same history: the log's epoch cache, and before the log start the snapshot
that ends there. Where the two callers differ, the difference is a parameter here, named.
"""

import logging

from kio.schema.errors import ErrorCode

from kraft.raft.raft_errors import InvariantViolation
from kraft.storage import OffsetAndEpoch, ReplicatedLog, SnapshotError, SnapshotId, SnapshotStore

log = logging.getLogger("kraft.raft")

NO_EPOCH = -1
UNKNOWN = OffsetAndEpoch(-1, NO_EPOCH)  # the history cannot tell


def fence(requested: int, epoch: int, leading: bool, unchecked_allowed: bool = False) -> ErrorCode:
    """Whether a request that must reach the leader of epoch `requested` does.

    Older than ours: FENCED_LEADER_EPOCH (the sender must refresh its leader); newer:
    UNKNOWN_LEADER_EPOCH (we must catch up); ours but not leading: NOT_LEADER_OR_FOLLOWER.
    A consumer that knows no epoch sends -1, which checks only leadership when
    `unchecked_allowed` (clients, as KIP-320 says); a replica always names its epoch, and
    Kafka's Raft client fences -1 as older than any.
    """
    if not (unchecked_allowed and requested == NO_EPOCH):
        if requested < epoch:
            return ErrorCode.fenced_leader_epoch
        if requested > epoch:
            return ErrorCode.unknown_leader_epoch
    return ErrorCode.none if leading else ErrorCode.not_leader_or_follower


class EpochHistory:
    """Which epoch wrote which offsets, in a log and the snapshots it starts at."""

    def __init__(self, log: ReplicatedLog, snapshots: SnapshotStore) -> None:
        self.log = log
        self.snapshots = snapshots

    def last_epoch(self) -> int:
        """The epoch of the last record held: in the log, or, when the log is empty after a
        snapshot, the snapshot's (KIP-630); 0 for nothing at all."""
        if self.log.latest_epoch is not None:
            return self.log.latest_epoch
        latest = self.snapshots.latest()
        return latest.epoch if latest is not None else 0

    def last(self) -> OffsetAndEpoch:
        """The end of this history and its last epoch: what elections compare."""
        return OffsetAndEpoch(self.log.end_offset, self.last_epoch())

    def epoch_before(self, offset: int) -> int | None:
        """The epoch of the record before `offset`: from the log, or from a snapshot ending at
        `offset` when the log starts there; None when neither holds it."""
        epoch = self.log.epoch_for_offset(offset - 1)
        if epoch is not None:
            return epoch
        return next((s.epoch for s in self.snapshots.list() if s.end_offset == offset), None)

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        """The id a snapshot of the state up to `end_offset` must have: the epoch of the
        record just before it."""
        epoch = self.epoch_before(end_offset) if end_offset > 0 else 0
        if epoch is None:
            raise SnapshotError(
                f"offset {end_offset - 1} is not in the log [{self.log.start_offset}, {self.log.end_offset})"
            )
        return SnapshotId(end_offset, epoch)

    def end_of_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` and the offset where it ends: OffsetForLeaderEpoch's
        answer, and the base of every divergence check. The log's epoch cache keeps the
        epochs below its start (see LeaderEpochCache), so this is exact however far the log
        start has moved. A cache written before it kept them knows nothing below the log
        start; there the snapshot the log starts at still tells its own epoch. UNKNOWN when
        nothing here can tell, never a guess."""
        found = self.log.end_offset_for_epoch(epoch)
        if found.epoch >= 0 or epoch < 0:
            return found
        before = self.epoch_before(self.log.start_offset)
        if before is None or before > epoch:
            return UNKNOWN
        entries = self.log.epoch_entries()
        return OffsetAndEpoch(entries[0][1] if entries else self.log.end_offset, before)

    def diverging(self, fetch_offset: int, last_fetched_epoch: int) -> OffsetAndEpoch | None:
        """KIP-595's check of a fetcher's position (the record before `fetch_offset` was
        written in `last_fetched_epoch`): None if this history agrees; otherwise the largest
        epoch it shares with the fetcher and where that epoch ends here, which the fetcher
        truncates to (Fetch's DivergingEpoch). It diverges even when that epoch ends past
        the fetch offset: the record before it is of an epoch this history does not have.
        Offset 0 has no record before it, and -1 names none: nothing to check. UNKNOWN when
        the history cannot tell (a consumer is then out of range; a replica is sent the
        snapshot before it gets here)."""
        if fetch_offset == 0 or last_fetched_epoch < 0:
            return None
        end = self.end_of_epoch(last_fetched_epoch)
        if end.epoch < last_fetched_epoch or end.offset < fetch_offset:
            return end
        return None

    def truncate_to(self, diverging: OffsetAndEpoch, high_watermark: int | None, node_id: int,
                    leader_id: int | None) -> int:
        """Cuts the log where the leader says it diverges (Fetch's DivergingEpoch: its end of
        the largest epoch we share); returns the new end. A cut below what this replica knows
        is committed is refused with InvariantViolation: Raft never removes committed records,
        so that leader cannot be a real one."""
        end_before = self.log.end_offset
        local = self.log.end_offset_for_epoch(diverging.epoch)
        target = min(local.offset, diverging.offset) if local.epoch == diverging.epoch else local.offset
        committed = min(high_watermark, end_before) if high_watermark is not None else 0
        if 0 <= target < committed:
            raise InvariantViolation(f"node {node_id}: leader {leader_id} asks to truncate to {target} (divergence at epoch {diverging.epoch}), "
                                     f"below the high watermark {committed}")
        new_end = self.log.truncate_to_end_offset(diverging)
        log.info("node %d: truncated to %d because of divergence at epoch %d (leader's epoch ends at %d; log ended "
                 "at %d)", node_id, new_end, diverging.epoch, diverging.offset, end_before)
        return new_end
