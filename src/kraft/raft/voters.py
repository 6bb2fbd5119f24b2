"""Who votes, as of each offset of the log (KIP-853).

A static quorum (kraft.version 0) has the voters of controller.quorum.voters, for ever. A
dynamic one (kraft.version 1) has the latest VotersRecord at or below an offset, in the log
or in the snapshot the log starts from (a fresh cluster's is the bootstrap snapshot that
`kraft storage format --standalone` or `--initial-controllers` writes).

Kafka's rules, kept here and nowhere else:

* A change counts as soon as it is in the log, committed or not: the new set decides the
  high watermark, elections and who may vote from the moment it is appended (Raft's
  single-server changes need it; a majority of the new set always overlaps one of the old).
* It is undone when the log is truncated below it, and a snapshot replaces the history below
  its end with the set it holds.
* One change at a time: the leader refuses another while the latest one is uncommitted.
"""

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from kraft.raft import membership_messages
from kraft.raft.quorum import majority
from kraft.records import RecordBatch, read_batches
from kraft.records.control import (
    ControlMessage,
    KRaftVersionRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    decode_control_record,
)
from kraft.storage import SnapshotId, SnapshotStore
from kraft.storage.bootstrap_snapshot import BOOTSTRAP_SNAPSHOT_ID, KRAFT_VERSION_DYNAMIC

NO_DIRECTORY = membership_messages.NO_DIRECTORY.bytes  # a static voter's directory id: none known
KRAFT_VERSION_STATIC = 0


@dataclass(frozen=True)
class VoterSet:
    """The voters of one moment, sorted by id; each with its directory id and endpoints."""

    voters: tuple[Voter, ...]

    @classmethod
    def static(cls, ids: Iterable[int]) -> "VoterSet":
        """controller.quorum.voters: ids only (the driver knows their endpoints)."""
        return cls(tuple(Voter(i, NO_DIRECTORY, (), 0, 0) for i in sorted(set(ids))))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v.voter_id for v in self.voters)

    @property
    def majority(self) -> int:
        return majority(len(self.voters))

    def get(self, node_id: int) -> Voter | None:
        return next((v for v in self.voters if v.voter_id == node_id), None)

    def with_voter(self, voter: Voter) -> "VoterSet":
        return VoterSet(tuple(sorted((*self.voters, voter), key=lambda v: v.voter_id)))

    def without(self, node_id: int) -> "VoterSet":
        return VoterSet(tuple(v for v in self.voters if v.voter_id != node_id))

    def endpoint(self, node_id: int, listener: str | None = None) -> VoterEndpoint | None:
        """The voter's endpoint on `listener` (any, if None or not found)."""
        voter = self.get(node_id)
        if voter is None or not voter.endpoints:
            return None
        return next((e for e in voter.endpoints if e.name == listener), voter.endpoints[0])

    def record(self) -> VotersRecord:
        return VotersRecord(self.voters)


class Voters:
    """The voter sets of this replica's log, by offset: the latest one rules.

    `static` is controller.quorum.voters (None: the quorum is dynamic, or this node only knows
    bootstrap servers and learns the set from the leader's log)."""

    def __init__(self, static: VoterSet | None) -> None:
        self._static = static
        self._offsets: list[int] = []  # where each VotersRecord is, ascending
        self._sets: list[VoterSet] = []
        self._kraft: list[tuple[int, int]] = []  # (offset, kraft.version) of each KRaftVersionRecord
        self.generation = 0  # bumped on every change, so users notice one cheaply
        self.committed_offset = 0  # the high watermark as the core last knew it

    # ---------------------------------------------------------------- queries

    @property
    def latest(self) -> VoterSet:
        if self._sets:
            return self._sets[-1]
        return self._static if self._static is not None else VoterSet(())

    @property
    def ids(self) -> tuple[int, ...]:
        return self.latest.ids

    def contains(self, node_id: int) -> bool:
        return self.latest.get(node_id) is not None

    def may_campaign(self, node_id: int) -> bool:
        """Whether `node_id` may time out into an election: it is in the latest set, or the
        latest change, which removes it, is not committed yet. A voter whose removal it
        appended itself (a leader that lost leadership before the commit) still holds the
        longest log; if it stopped campaigning, the other voters of the old set could not win
        without it and the change could never commit. Its votes count with the latest set, so
        a majority of that set elects it, and it resigns once the removal commits."""
        if self.contains(node_id):
            return True
        return (self.latest_offset >= self.committed_offset
                and self.at(self.latest_offset - 1).get(node_id) is not None)

    @property
    def kraft_version(self) -> int:
        """The latest KRaftVersionRecord's; without one, 1 if a VotersRecord is in the log (only
        kraft.version 1 writes them). A replica formatted with --no-initial-controllers
        fetches the log from its start, and the first voters' KRaftVersionRecord is only in
        the bootstrap snapshot (kraft's leaders do not copy it into the log at their first
        epoch, as Kafka's do): once the node that was formatted with it is gone, a leader
        among the others would take the quorum for a static one and refuse every change."""
        if self._kraft:
            return self._kraft[-1][1]
        return KRAFT_VERSION_DYNAMIC if self._sets else KRAFT_VERSION_STATIC

    @property
    def is_dynamic(self) -> bool:
        """Whether the voter set can change: not controller.quorum.voters (a replica that has
        none learns its set from the log, which may not have reached it yet)."""
        return self._static is None or self.kraft_version >= KRAFT_VERSION_DYNAMIC

    @property
    def latest_offset(self) -> int:
        """Where the latest set was written (-1: from the configuration)."""
        return self._offsets[-1] if self._offsets else -1

    def at(self, offset: int) -> VoterSet:
        """The set in force at `offset`: the latest written at or below it."""
        i = bisect_right(self._offsets, offset)
        if i == 0:
            return self._static if self._static is not None else VoterSet(())
        return self._sets[i - 1]

    # ---------------------------------------------------------------- changes

    def observe(self, offset: int, message: ControlMessage) -> None:
        """A control record at `offset`, appended or replayed in order."""
        if isinstance(message, VotersRecord):
            self._offsets.append(offset)
            self._sets.append(VoterSet(tuple(sorted(message.voters, key=lambda v: v.voter_id))))
            self.generation += 1
        elif isinstance(message, KRaftVersionRecord):
            self._kraft.append((offset, message.kraft_version))
            self.generation += 1

    def observe_control(self, data: bytes | bytearray | memoryview) -> None:
        """Appended batches holding a control batch: its voter records count from now."""
        for batch in read_batches(data):
            if batch.header.is_control:
                self.observe_batch(batch)

    def observe_batch(self, batch: RecordBatch) -> None:
        for record in batch.records():
            self.observe(record.offset, decode_control_record(record))

    def truncate(self, end_offset: int) -> None:
        """The log now ends at `end_offset`: records at or above it are gone."""
        before = len(self._offsets) + len(self._kraft)
        i = bisect_right(self._offsets, end_offset - 1)
        del self._offsets[i:], self._sets[i:]
        self._kraft = [(o, v) for o, v in self._kraft if o < end_offset]
        if len(self._offsets) + len(self._kraft) != before:
            self.generation += 1

    def restart(self, end_offset: int, messages: Iterable[ControlMessage]) -> None:
        """A snapshot ending at `end_offset` replaces everything: its records hold at end - 1."""
        self._offsets, self._sets, self._kraft = [], [], []
        for message in messages:
            self.observe(end_offset - 1, message)
        self.generation += 1

    def records_at(self, offset: int) -> tuple[ControlMessage, ...]:
        """What a snapshot ending after `offset` holds for the Raft layer: nothing for a static
        quorum; kraft.version and the voter set in force, for a dynamic one (as Kafka writes)."""
        if bisect_right(self._offsets, offset) == 0:
            return ()
        kraft = max((v for o, v in self._kraft if o <= offset), default=KRAFT_VERSION_DYNAMIC)
        return KRaftVersionRecord(kraft), self.at(offset).record()

    def forget_before(self, offset: int) -> None:
        """The log starts at `offset` (a snapshot ends there): below it, only the set in force
        at the snapshot's last offset is still needed. Not the one in force at `offset`: a
        change written at `offset` itself may still be truncated away, and the set it
        replaced must then be the latest again (else a node would fall back to its static
        configuration, found by the simulator's upgrade seeds)."""
        i = bisect_right(self._offsets, offset - 1) - 1
        if i > 0:
            del self._offsets[:i], self._sets[:i]


def write_bootstrap(store: SnapshotStore, voters: VoterSet) -> SnapshotId:
    """The 0-0 snapshot a dynamic quorum starts from, in any store (the simulator's): what
    `kraft storage format --standalone` or `--initial-controllers` writes to a directory."""
    writer = store.create_writer(BOOTSTRAP_SNAPSHOT_ID, 0, raft_records=(
        KRaftVersionRecord(KRAFT_VERSION_DYNAMIC), voters.record()))
    return writer.freeze()
