"""Where the log may start: which snapshot the log start offset can move up to, and why.

The log start moves as Kafka moves it: by retention only. Readers of the log (consumers,
Spark streams) are not replicas and no replica counts them, so a log start that moved as
soon as every replica held a snapshot left a lagging stream with offsets gone from the log
(seen: a throttled stream 1,300 offsets behind an empty log). Three rules, each a pure
function of what the core knows:

* Kafka's retention (`metadata.max.retention.bytes`, `.ms`; -1 turns each off), every
  replica in every role (Kafka cleans in every replica's poll loop): while the log and
  snapshots together are too big, or the oldest snapshot too old, move up to the next
  snapshot, always keeping the latest one.
* KIP-630, the leader: a move retention asks for waits until every live replica (voters
  and observers that fetched within the fetch timeout) has replicated past it, so none of
  them needs a snapshot, but no longer than `metadata.start.offset.lag.time.max.ms`.
* KIP-630, followers and observers: also up to the largest local snapshot at or below the
  leader's log start offset, so the log start offset always equals the earliest snapshot's end.

Every time here is a snapshot's last contained log timestamp, read from its header: the
append time of the newest record it holds. It is on disk, so a restart changes nothing:
offset x has been waiting to be replicated since the record before it was appended, and
a snapshot is as old as what it holds (Kafka's retention.ms measures it the same way;
Kafka has no `metadata.start.offset.lag.time.max.ms` timer to follow).
"""

import logging
from collections.abc import Mapping, Sequence

from kraft.raft.raft_config import RaftConfig
from kraft.raft.roles import Follower, Leader, RoleState
from kraft.raft.snapshot_catalog import SnapshotCatalog
from kraft.raft.voters import Voters
from kraft.storage import ReplicatedLog, SnapshotId, SnapshotStore

log = logging.getLogger("kraft.raft")


def leader_target(
    wanted: SnapshotId,
    candidates: Sequence[SnapshotId],
    live_offsets: Sequence[int],
    timestamps: Mapping[SnapshotId, int],
    now: int,
    lag_time_max_ms: int,
) -> SnapshotId | None:
    """How far the leader moves toward `wanted` (retention's target): all the way once every
    live replica holds it or it has waited long enough; else to the largest candidate below
    it that every live replica holds, if any."""
    for snapshot in sorted((c for c in candidates if c <= wanted), reverse=True):
        if all(offset >= snapshot.end_offset for offset in live_offsets):
            return snapshot
        if snapshot == wanted and now - timestamps.get(snapshot, now) >= lag_time_max_ms:
            return snapshot
    return None


def retention_target(
    snapshots: Sequence[SnapshotId],
    sizes: Mapping[SnapshotId, int],
    timestamps: Mapping[SnapshotId, int],
    log_bytes_from: Mapping[int, int],
    now: int,
    max_bytes: int,
    max_ms: int,
) -> SnapshotId | None:
    """The snapshot retention moves the start to (the latest is never passed, so it stays).

    `log_bytes_from[end_offset]` is how many log bytes remain if the log starts at that
    snapshot's end. As Kafka does, snapshots are considered oldest first, and each one
    breaching a limit moves the start to the next.
    """
    ordered = sorted(snapshots)
    target = None
    for snapshot, following in zip(ordered, ordered[1:]):
        kept_snapshot_bytes = sum(sizes.get(s, 0) for s in ordered if s >= snapshot)
        current_log = log_bytes_from.get(snapshot.end_offset, 0)
        too_big = max_bytes >= 0 and current_log + kept_snapshot_bytes > max_bytes
        too_old = max_ms >= 0 and now - timestamps.get(snapshot, now) > max_ms
        if not (too_big or too_old):
            break
        target = following
    return target


def follower_target(snapshots: Sequence[SnapshotId], leader_start_offset: int) -> SnapshotId | None:
    """The largest local snapshot not past the leader's log start offset."""
    eligible = [s for s in snapshots if s.end_offset <= leader_start_offset]
    return max(eligible) if eligible else None


class LogStart:
    """Applies the rules above to a replica's log and snapshots, every cleanup interval.

    Retention decides how far the log start may move (Kafka's KafkaMetadataLog.maybeClean,
    called from every replica's poll loop); the leader holds a move back while a live
    replica still needs the records it would remove (KIP-630), and followers also follow
    the leader's log start. A replica between leaders waits for one: no one knows then what
    the replicas still need.
    """

    def __init__(self, config: RaftConfig, voters: Voters, log: ReplicatedLog, snapshots: SnapshotStore,
                 catalog: SnapshotCatalog) -> None:
        self.config = config
        self.voters = voters
        self.log = log
        self.snapshots = snapshots
        self.catalog = catalog
        self._next_cleanup = 0

    def maybe_clean(self, now: int, state: RoleState, high_watermark: int | None) -> None:
        if now < self._next_cleanup:
            return
        self._next_cleanup = now + self.config.cleanup_interval_ms
        ids = self.snapshots.list()
        if not ids or not isinstance(state, Leader | Follower):
            return
        if isinstance(state, Follower):
            target = follower_target(ids, state.leader_start_offset)
            if target is not None:
                self.move_to(target, f"the leader's log starts at {state.leader_start_offset}")
        kept = self.snapshots.list()
        timestamps = self.catalog.timestamps
        retained = retention_target(
            kept,
            self.catalog.sizes,
            timestamps,
            {sid.end_offset: self.log.bytes_from(sid.end_offset) for sid in kept},
            now,
            self.config.max_retention_bytes,
            self.config.max_retention_ms,
        )
        if retained is None:
            return
        if not isinstance(state, Leader):
            self.move_to(retained, "metadata.max.retention.bytes/ms")
            return
        leader = state.progress
        limit = min(high_watermark if high_watermark is not None else 0, self.log.end_offset)
        recent = now - self.config.fetch_timeout_ms
        young = leader.started_ms >= recent  # a voter not heard from yet may still come
        live = [
            p.end_offset
            for rid, p in {**leader.voter_progress, **leader.observer_progress}.items()
            if rid != self.config.node_id and (p.last_fetch_ms >= recent or (young and self.voters.contains(rid)))
        ]
        candidates = [s for s in kept if self.log.start_offset < s.end_offset <= limit]
        target = leader_target(retained, candidates, live, timestamps, now, self.config.start_offset_lag_time_max_ms)
        if target is not None:
            why = ("metadata.max.retention.bytes/ms" if all(o >= target.end_offset for o in live)
                   else "metadata.max.retention.bytes/ms; metadata.start.offset.lag.time.max.ms passed")
            self.move_to(target, why)

    def move_to(self, snapshot: SnapshotId, why: str) -> None:
        """Moves the log start to a snapshot's end and deletes the snapshots before it."""
        if snapshot.end_offset <= self.log.start_offset or snapshot.end_offset > self.log.end_offset:
            return
        log.info("node %d: log start offset %d -> %d (%s)", self.config.node_id, self.log.start_offset,
                 snapshot.end_offset, why)
        self.log.advance_start_offset(snapshot.end_offset)
        self.snapshots.delete_before(snapshot.end_offset)
