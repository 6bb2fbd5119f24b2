"""What each role of a replica holds, and nothing else.

A replica is in exactly one role at a time, and the state that only one role uses lives on
that role's object: a candidate's votes, a follower's fetch deadline and snapshot download,
a resigned leader's successors, a leader's replica progress, queued appends and parked
fetches. Entering a role makes a new object, so nothing of the previous role survives by
accident. `QuorumState` (quorum_state.py) decides which transitions are allowed and makes
them durable; the core acts in each role.

Each role answers two questions about time: `deadlines()`, when tick() has something to do
for it, and `timeout_deadline()`, when it would start an election on its own (None: it
does not; the leader never times out into an election, it resigns).
"""

import enum
from dataclasses import dataclass, field

from kraft.raft.accumulator import BatchAccumulator
from kraft.raft.leader import LeaderState
from kraft.raft.parked_fetches import ParkedFetches
from kraft.raft.snapshot_fetch import SnapshotDownload
from kraft.raft.voter_change_rules import PendingChange
from kraft.raft.voters import VoterSet


class Role(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(slots=True)
class Unattached:
    """No leader known in this epoch and no vote cast. A voter campaigns at the deadline
    (None for an observer, which looks for a leader instead)."""

    election_deadline: int | None
    # An observer's (epoch, leader) that it stopped following when its fetches timed out.
    abandoned: tuple[int, int] | None = None
    role = Role.UNATTACHED

    def deadlines(self, now: int) -> list[int]:
        return [] if self.election_deadline is None else [self.election_deadline]

    def timeout_deadline(self) -> int | None:
        return self.election_deadline


@dataclass(slots=True)
class Voted:
    """Voted for `QuorumState.voted_id` in this epoch; waits for that candidate to win."""

    election_deadline: int
    role = Role.VOTED

    def deadlines(self, now: int) -> list[int]:
        return [self.election_deadline]

    def timeout_deadline(self) -> int | None:
        return self.election_deadline


@dataclass(slots=True)
class Campaign:
    """Asking the voters: its own vote and their answers in this round. After losing a
    round it backs off until `backoff_until`, then asks again."""

    election_deadline: int
    granted: set[int]
    rejected: set[int] = field(default_factory=set)
    unreachable: set[int] = field(default_factory=set)  # voters whose Vote request could not be sent
    backoff_until: int | None = None

    def deadlines(self, now: int) -> list[int]:
        return [self.timeout_deadline()]

    def timeout_deadline(self) -> int:
        return self.backoff_until if self.backoff_until is not None else self.election_deadline


@dataclass(slots=True)
class Prospective(Campaign):
    """Asking whether it could win before it campaigns (KIP-996 pre-vote), in its current
    epoch: nothing is written, no voter changes state, and a node that cannot win (cut off,
    or with a stale log) never bumps the epoch. It keeps the leader and vote it had (a
    follower's leader is still named in its answers), and campaigns once a majority says
    it would grant the vote."""

    role = Role.PROSPECTIVE


@dataclass(slots=True)
class Candidate(Campaign):
    """Campaigning in an epoch of its own; after losing, it asks again with a pre-vote."""

    role = Role.CANDIDATE


@dataclass(slots=True)
class Follower:
    """Following `QuorumState.leader_id`: fetches from it until `fetch_deadline` passes
    without an answer (sooner when it resigned with EndQuorumEpoch)."""

    fetch_deadline: int
    leader_resigned: bool = False
    # Answered by the leader since this replica began following it. Until then it has no
    # evidence the leader is alive, so it grants pre-votes (KIP-996; otherwise two voters
    # that learnt a dead leader from each other would keep each other from campaigning).
    fetched: bool = False
    leader_start_offset: int = 0  # the leader's log start offset, as its last Fetch answer gave it
    download: SnapshotDownload | None = None
    # KIP-853: when UpdateRaftVoter may next go to this leader while this voter's entry is
    # outdated (Kafka's update period: three fetch timeouts between tries).
    voter_update_due: int = 0
    # On a static quorum: this leader has recorded this voter's entry (kraft_upgrade.py).
    leader_updated: bool = False
    role = Role.FOLLOWER

    def deadlines(self, now: int) -> list[int]:
        return [self.fetch_deadline]

    def timeout_deadline(self) -> int | None:
        return self.fetch_deadline


@dataclass(slots=True)
class Resigned:
    """A leader that stepped down (or restarted after leading this epoch): tells every
    voter with EndQuorumEpoch, naming its successors, until each has acknowledged."""

    election_deadline: int
    successors: tuple[int, ...]
    end_quorum_acked: set[int]
    role = Role.RESIGNED

    def deadlines(self, now: int) -> list[int]:
        return [self.election_deadline]

    def timeout_deadline(self) -> int | None:
        return self.election_deadline


@dataclass(slots=True)
class Leader:
    """Leading: the replicas' progress and high watermark (LeaderState), the appends not
    yet in the log, the fetches parked until there is something to send, and two timers as
    Kafka's LeaderState has them: check quorum (1.5 fetch timeouts without a majority's
    fetches and the leader resigns: some slack for the network and the disk), and
    BeginQuorumEpoch sent to every voter at once and then every half fetch timeout to those
    that have not fetched in that time, so a voter which missed the election learns its leader."""

    progress: LeaderState
    appends: BatchAccumulator
    fetch_timeout_ms: int
    parked: ParkedFetches = field(default_factory=ParkedFetches)
    next_begin_quorum: int = 0
    voter_change: PendingChange | None = None  # KIP-853: an AddRaftVoter/RemoveRaftVoter awaiting its commit
    # A static quorum's voters as the kraft.version upgrade would write them (kraft_upgrade.py).
    volatile_voters: VoterSet | None = None
    role = Role.LEADER

    @property
    def check_quorum_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2

    @property
    def begin_quorum_interval_ms(self) -> int:
        return self.fetch_timeout_ms // 2

    def deadlines(self, now: int) -> list[int]:
        out = []
        parked = self.parked.next_deadline()
        if parked is not None:
            out.append(parked)
        if self.voter_change is not None:
            out.append(self.voter_change.deadline)
        out.append(self.progress.quorum_contact_ms(now) + self.check_quorum_ms)
        out.append(self.next_begin_quorum)
        linger = self.appends.deadline()
        if linger is not None:
            out.append(linger)
        return out

    def timeout_deadline(self) -> int | None:
        return None


RoleState = Unattached | Voted | Prospective | Candidate | Follower | Resigned | Leader
