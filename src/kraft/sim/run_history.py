"""What a run did and what its clients saw, kept apart from how messages moved.

The history records, as they happen: each offset as the state machines saw it committed
(the first value, and any later disagreement), the client's appends and which of them
were seen committed, the metadata image digest at each offset, who led each epoch, which
snapshots were loaded by whom, and the counts a run reports. It judges nothing: the
invariants (invariants.py) read it, and the nodes as they are, after every event.
"""

from bisect import bisect_right, insort
from dataclasses import dataclass, field

from kraft.raft import Role
from kraft.raft.voters import VoterSet
from kraft.records.control import ControlMessage, KRaftVersionRecord, VotersRecord
from kraft.storage import SnapshotId


class Violation(AssertionError):
    """A named invariant (or a workload's own check) does not hold."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant = invariant


@dataclass
class Stats:
    events: int = 0
    elections: int = 0
    appends: int = 0
    acknowledged: int = 0
    kills: int = 0
    disks_lost: int = 0
    resignations: int = 0
    snapshots: int = 0
    snapshots_fetched: int = 0  # snapshots a running node loaded on the leader's word
    empty_starts: int = 0  # nodes started with nothing while the leader's log started past offset 0
    torn_writes: int = 0  # crashes that kept some of the unflushed batches, or part of one
    torn_batches: int = 0  # of those, the crashes that left part of a batch
    torn_tails_cut: int = 0  # restarts whose recovery cut a torn batch
    corruptions: int = 0  # bytes of flushed data flipped
    refused_starts: int = 0  # starts refused because flushed data was damaged
    dropped: int = 0
    delivered: int = 0
    epochs: int = 0  # the highest epoch any node reached: the epochs the run burned
    voter_changes: int = 0  # AddRaftVoter / RemoveRaftVoter answered NONE (committed)
    voter_changes_refused: int = 0  # answered with an error (not caught up, pending, not leader...)
    upgrades: int = 0  # kraft.version raised to 1 and committed (one a run at most)
    upgrades_healed: int = 0  # of those, committed only after the faults healed
    upgrades_refused: int = 0  # asks refused: no leader, a voter's entry not told yet, a leader deposed
    upgrades_truncated: int = 0  # appended, then truncated away before it committed (asked again)
    leaders: set[tuple[int, int]] = field(default_factory=set)


@dataclass(frozen=True)
class SnapshotLoad:
    node_id: int
    role: Role
    snapshot_id: SnapshotId


class History:
    def __init__(self) -> None:
        self.stats = Stats()
        self.committed: dict[int, bytes | None] = {}  # offset -> value, across every node and life
        self.commit_conflicts: list[str] = []
        self.commit_times: list[int] = []  # when each offset was first seen committed
        self.appended: dict[int, tuple[int, int, bytes]] = {}  # value id -> (epoch, offset, value)
        self.acked: dict[int, tuple[int, bytes]] = {}  # value id -> (offset, value): seen committed
        self.image_digests: dict[int, str] = {}  # offset -> digest of the metadata image there
        self.image_conflicts: list[str] = []
        self.state_errors: list[str] = []  # what a state machine alone can tell is wrong
        self.leaders_of_epoch: dict[int, list[int]] = {}  # epoch -> every node seen leading it
        self.new_leaders: list[tuple[int, int]] = []  # (epoch, node) first seen in the last event
        self.snapshot_loads: list[SnapshotLoad] = []  # by running nodes, on the leader's word
        self.healed_at: int | None = None
        # The voter sets committed VotersRecords name, by offset (the first set: the static
        # or bootstrap one, at -1), and where kraft.version was first committed at 1 or more.
        self.committed_voters: dict[int, VoterSet] = {}
        self._voter_offsets: list[int] = []
        self.upgraded_at: int | None = None
        self.upgraded_time = -1  # when it was first seen committed
        self._next_value = 0

    # ---------------------------------------------------------------- the client

    def next_value(self) -> bytes:
        self._next_value += 1
        return b"%d" % self._next_value

    def record_append(self, value: bytes, epoch: int, offset: int) -> None:
        """A numbered record the client appended at (epoch, offset): acknowledged once seen committed there."""
        self.appended[int(value)] = (epoch, offset, value)
        self.stats.appends += 1

    # ---------------------------------------------------------------- the state machines

    def observe_commit(self, node_id: int, offset: int, value: bytes | None, now: int) -> None:
        if offset not in self.committed:
            self.commit_times.append(now)
        known = self.committed.setdefault(offset, value)
        if known != value:
            self.commit_conflicts.append(
                f"offset {offset} committed as {known!r} earlier but node {node_id} got {value!r}"
            )
        if value is not None and value.isdigit():
            vid = int(value)
            appended = self.appended.get(vid)
            if appended is not None and appended[1] == offset and vid not in self.acked:
                self.acked[vid] = (offset, value)
                self.stats.acknowledged += 1

    def observe_voters(self, offset: int, voters: VoterSet) -> None:
        """The voter set in force from `offset` on, as committed records (or the configuration) say."""
        if offset not in self.committed_voters:
            self.committed_voters[offset] = voters
            insort(self._voter_offsets, offset)

    def observe_control(self, offset: int, message: ControlMessage, now: int) -> None:
        """A committed control record: voter sets and the kraft.version upgrade are judged by them."""
        if isinstance(message, VotersRecord):
            self.observe_voters(offset, VoterSet(tuple(sorted(message.voters, key=lambda v: v.voter_id))))
        elif isinstance(message, KRaftVersionRecord) and message.kraft_version >= 1 and self.upgraded_at is None:
            self.upgraded_at, self.upgraded_time = offset, now

    def voters_at(self, offset: int) -> VoterSet | None:
        """The committed voter set in force at `offset` (None: none is known there)."""
        i = bisect_right(self._voter_offsets, offset)
        return self.committed_voters[self._voter_offsets[i - 1]] if i else None

    def observe_image(self, node_id: int, offset: int, digest: str) -> None:
        known = self.image_digests.setdefault(offset, digest)
        if known != digest:
            self.image_conflicts.append(
                f"node {node_id}: metadata image at offset {offset} differs from another node's")

    def observe_snapshot_load(self, node_id: int, role: Role, snapshot_id: SnapshotId) -> None:
        self.snapshot_loads.append(SnapshotLoad(node_id, role, snapshot_id))
        self.stats.snapshots_fetched += 1

    # ---------------------------------------------------------------- the quorum

    def observe_leaders(self, leaders: list[tuple[int, int]]) -> None:
        """After every event: the (epoch, node) of each node that is leader now."""
        self.stats.events += 1
        self.new_leaders = [lead for lead in leaders if lead not in self.stats.leaders]
        for epoch, node_id in self.new_leaders:
            self.stats.leaders.add((epoch, node_id))
            self.stats.elections += 1
            self.leaders_of_epoch.setdefault(epoch, []).append(node_id)
