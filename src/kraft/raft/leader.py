"""The leader's view of its replicas: how far each has fetched, when, and the high watermark.

A voter's position counts toward the high watermark only from a fetch the leader accepted
as consistent with its own log (no divergence), so a position always names a prefix that
both logs share. The leader's own position is its flushed end: an entry counts as stored
on the leader only once it is on disk.
"""

from dataclasses import dataclass, field
from typing import Any

from kraft.raft import messages as m
from kraft.raft.quorum import committed_offset, quorum_contact


@dataclass
class ReplicaProgress:
    replica_id: int
    end_offset: int = -1  # the last accepted FetchOffset (-1: not yet heard from)
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1  # the leader's end offset at the previous fetch

    def update(self, fetch_offset: int, leader_end_offset: int, now: int) -> None:
        """Kafka's caught-up rule: caught up now if at the leader's end; or caught up as of the
        previous fetch if this fetch reached what the leader's end was back then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif self.last_fetch_leader_end > 0 and fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.end_offset = fetch_offset
        self.last_fetch_leader_end = leader_end_offset
        self.last_fetch_ms = now


@dataclass
class LeaderState:
    epoch: int
    node_id: int
    voters: tuple[int, ...]
    epoch_start_offset: int  # the offset of this epoch's LeaderChange record
    started_ms: int
    high_watermark: int | None = None
    voter_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    observer_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    granting_voters: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for v in self.voters:
            self.voter_progress[v] = ReplicaProgress(v)

    def set_voters(self, voters: tuple[int, ...]) -> None:
        """The voter set changed (KIP-853): a replica's progress moves with it between voters
        and observers. An added voter's position counts toward the high watermark only from
        its next fetch: the one it had as an observer may be stale (kraft's fetches carry no
        directory id, so an observer whose disk was replaced since looks the same), and a
        position nothing on its disk holds any more must not commit an offset."""
        for v in [v for v in self.voter_progress if v not in voters]:
            self.observer_progress[v] = self.voter_progress.pop(v)
        for v in voters:
            if v not in self.voter_progress:
                progress = self.observer_progress.pop(v) if v in self.observer_progress else ReplicaProgress(v)
                progress.end_offset = -1
                self.voter_progress[v] = progress
        self.voters = voters

    def progress(self, replica_id: int) -> ReplicaProgress:
        if replica_id in self.voter_progress:
            return self.voter_progress[replica_id]
        return self.observer_progress.setdefault(replica_id, ReplicaProgress(replica_id))

    def record_fetch(self, replica_id: int, fetch_offset: int, leader_end_offset: int, now: int) -> None:
        self.progress(replica_id).update(fetch_offset, leader_end_offset, now)

    def record_contact(self, replica_id: int, now: int) -> None:
        """A voter was heard from (FetchSnapshot, for check quorum) without a log position."""
        if replica_id in self.voter_progress:
            self.voter_progress[replica_id].last_fetch_ms = now

    def update_high_watermark(self, local_flushed_offset: int) -> bool:
        """Recomputes the high watermark; True if it advanced.

        The largest offset a majority of voters hold, counting only offsets past this
        epoch's LeaderChange record (Raft commits a previous epoch's entries only by
        committing one of its own), and never moving backwards.
        """
        if self.node_id in self.voter_progress:  # a leader removing itself no longer counts
            self.voter_progress[self.node_id].end_offset = local_flushed_offset
        candidate = committed_offset(p.end_offset for p in self.voter_progress.values())
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True

    def quorum_contact_ms(self, now: int) -> int:
        """The time by which a majority of voters (this one included, as of now) had been heard from."""
        return quorum_contact(
            now if v == self.node_id else max(p.last_fetch_ms, self.started_ms) for v, p in self.voter_progress.items()
        )

    def successors(self) -> tuple[int, ...]:
        """Other voters, most caught up first: who should campaign first when this leader resigns."""
        others = [p for v, p in self.voter_progress.items() if v != self.node_id]
        others.sort(key=lambda p: (-p.end_offset, p.replica_id))
        return tuple(p.replica_id for p in others)

    def expire_observers(self, now: int, expiry_ms: int) -> None:
        for rid in [r for r, p in self.observer_progress.items() if now - p.last_fetch_ms >= expiry_ms]:
            del self.observer_progress[rid]

    def replica_states(self, log_end_offset: int, now: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """DescribeQuorum's voters and observers. The leader reports itself at its log end,
        fetched and caught up as of now."""

        def states(progress: dict[int, ReplicaProgress]) -> tuple[Any, ...]:
            return tuple(
                m.replica_state(p.replica_id, log_end_offset, now, now)
                if p.replica_id == self.node_id
                else m.replica_state(p.replica_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
                for p in sorted(progress.values(), key=lambda p: p.replica_id)
            )

        return states(self.voter_progress), states(self.observer_progress)
