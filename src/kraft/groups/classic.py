"""A classic group as its coordinator holds it while it rebalances: Kafka's ClassicGroup rules.

The states and their allowed predecessors are Kafka's:

    Empty               <- PreparingRebalance            (no member left)
    PreparingRebalance  <- Empty, Stable, CompletingRebalance
    CompletingRebalance <- PreparingRebalance            (the join phase is over)
    Stable              <- CompletingRebalance           (the leader's assignment is in)
    Dead                <- any                           (the group was removed)

A member's protocols are (name, metadata) in its order of preference; the group's protocol
is the one all members support that most of them prefer. The leader is the first member to
join, and stays leader across rebalances as long as it rejoins (a sticky leader): it is
replaced only when it leaves or does not rejoin in time. What is not written to the log
(who is awaiting a join or a sync, pending members) lives only here, on the coordinator,
and a new coordinator starts from the last GroupMetadata record, as Kafka's does.

This module holds the data and the rules that need no clock or log; membership.py drives
it with timers and writes its records.
"""

import enum
import struct
from collections import Counter
from dataclasses import dataclass

from kraft.groups.group_messages import DescribedGroup, DescribedMember, JoinMember
from kraft.groups.offsets_records import GroupMetadataValue, MemberMetadata
from kraft.groups.replies import Reply

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupStateError(Exception):
    """The coordinator's in-memory groups broke their own rules (a transition Kafka's
    ClassicGroup forbids, members the log has and memory lacks): a bug, on which the node
    stops, as on a broken Raft invariant, rather than answer from a state it cannot trust."""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

_VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: set(GroupState),
}


@dataclass(eq=False)
class Member:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    group_instance_id: str | None = None
    awaiting_join: Reply | None = None
    awaiting_sync: Reply | None = None
    is_new: bool = False  # joined and not yet through a join phase: may time out while waiting

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among `candidates`."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """A member waiting in a rebalance needs no heartbeat, except a new one, whose join
        may time out (its client may have given up on the request)."""
        return not self.is_new and (self.awaiting_join is not None or self.awaiting_sync is not None)


class ClassicGroup:
    def __init__(self, group_id: str, now: int) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.previous_state = DEAD
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state_timestamp = now
        self.members: dict[str, Member] = {}  # in order of joining: the next leader is the first
        self.pending_join: set[str] = set()  # given an id by MEMBER_ID_REQUIRED, not joined with it yet
        self.pending_sync: set[str] = set()  # joined this generation, no SyncGroup yet
        self.new_member_added = False  # extends the initial rebalance delay
        self._awaiting_join = 0
        self._supported: Counter[str] = Counter()  # protocol name -> members supporting it

    @classmethod
    def from_metadata(cls, group_id: str, value: GroupMetadataValue | None, now: int) -> "ClassicGroup":
        """The group as its last GroupMetadata record left it (Kafka's load): Stable with
        its members, or Empty; none for a group that only has offsets (a simple group)."""
        group = cls(group_id, now)
        if value is None:
            return group
        for m in value.members:
            rebalance_timeout = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            group.add(Member(m.member_id, m.client_id, m.client_host, rebalance_timeout, m.session_timeout,
                             value.protocol_type, ((value.protocol or "", m.subscription),), m.assignment,
                             m.group_instance_id))
        group.state = STABLE if value.members else EMPTY
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp = value.current_state_timestamp
        return group

    # ---------------------------------------------------------------- members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(name for name, _ in member.protocols)
        if member.awaiting_join is not None:
            self._awaiting_join += 1
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(name for name, _ in member.protocols)
            if member.awaiting_join is not None:
                self._awaiting_join -= 1
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update(self, member: Member, protocols: tuple[tuple[str, bytes], ...], rebalance_timeout_ms: int,
               session_timeout_ms: int, reply: Reply | None) -> Reply | None:
        """A rejoining member's new protocols and timeouts; returns the join reply it replaces."""
        self._supported.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self._supported.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        return self.await_join(member, reply)

    def await_join(self, member: Member, reply: Reply | None) -> Reply | None:
        """Sets (or, with None, takes) the member's join reply; returns the one it had."""
        previous = member.awaiting_join
        self._awaiting_join += (reply is not None) - (previous is not None)
        member.awaiting_join = reply
        return previous

    def await_sync(self, member: Member, reply: Reply | None) -> Reply | None:
        previous = member.awaiting_sync
        member.awaiting_sync = reply
        return previous

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self._awaiting_join and not self.pending_join

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keeps a leader that rejoined; else makes the first member that did the leader.
        False if there is no leader, or no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    # ---------------------------------------------------------------- protocols and states

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """A new group takes any non-empty type and protocols; a group with members takes a
        member of its type that supports one protocol every member supports."""
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self._supported[name] == len(self.members) for name in names)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (ties: the one the
        first member prefers, so the choice does not depend on hashing)."""
        candidates = {name for name, count in self._supported.items() if count == len(self.members)}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        best = max(votes.values())
        first = next(iter(self.members.values()))
        return next(name for name, _ in first.protocols if votes.get(name) == best)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    def transition(self, state: GroupState, now: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise GroupStateError(f"group {self.group_id} cannot go from {self.state.value} to {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now

    def init_next_generation(self, now: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.transition(EMPTY, now)
        self.pending_sync.clear()

    def join_members(self) -> tuple[JoinMember, ...]:
        """What the leader's JoinGroup answer lists: each member's metadata for the protocol."""
        return tuple(JoinMember(m.member_id, m.metadata(self.protocol_name), m.group_instance_id)
                     for m in self.members.values())

    # ---------------------------------------------------------------- as records and answers

    def to_metadata(self, assignment: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadata record value of this group (Kafka's), with `assignment` (member
        id -> bytes) in place of the members' own when given."""
        members = tuple(
            MemberMetadata(m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                           m.metadata(self.protocol_name),
                           m.assignment if assignment is None else assignment.get(m.member_id, b""),
                           m.rebalance_timeout_ms, m.group_instance_id)
            for m in self.members.values())
        return GroupMetadataValue(self.protocol_type or "", self.generation, self.protocol_name, self.leader_id,
                                  members, self.state_timestamp)

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, read from the consumer protocol's
        subscriptions; None if unknown (not the consumer protocol, or unreadable)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = consumer_subscription_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics.update(found)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        if topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in topics

    def describe(self) -> DescribedGroup:
        stable = self.state is STABLE
        members = tuple(
            DescribedMember(m.member_id, m.client_id, m.client_host,
                            m.metadata(self.protocol_name) if stable else b"", m.assignment, m.group_instance_id)
            for m in self.members.values())
        return DescribedGroup(self.group_id, self.state.value, self.protocol_type or "",
                              (self.protocol_name or "") if stable else "", members)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (version int16, then the topics as an
    int32-counted array of int16-length strings: every version starts so), or None."""
    try:
        pos = 2
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics = []
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.append(metadata[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None

