"""The classic group protocol on the coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
and the timeouts between them, by the rules of Kafka's GroupMetadataManager.

A rebalance: members send JoinGroup and wait; the join phase ends when every known member
has rejoined, or at the group's rebalance timeout (the largest of its members'), and for a
new group only after `group.initial.rebalance.delay.ms`, extended while new members keep
arriving. Then the generation is bumped, the protocol chosen, and every waiting member
answered, the leader with everyone's subscriptions; members that did not rejoin are
removed. The leader's SyncGroup brings the assignment, which is written as a
GroupMetadata record and handed to each member's SyncGroup. A member that sends no
heartbeat for its session timeout is removed, which starts a rebalance; so is one that
joined but sent no SyncGroup within the rebalance timeout. A JoinGroup v4+ without a
member id is answered MEMBER_ID_REQUIRED with a new id (KIP-394), and the id is kept
pending for a session timeout. A group that becomes empty is written as such.

Only what the log does not say lives here: groups with members, pending members, or a
rebalance in progress. An empty group is read from the working image when it is asked
for, and dropped from memory once it is empty again. Static membership (KIP-345) is not
served: a request naming a group.instance.id is refused with UNSUPPORTED_VERSION, as Kafka
refused it before 2.3.
"""

import uuid
from collections.abc import Callable, Sequence
from random import Random
from typing import Any, Protocol

from kraft.groups.classic import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    GroupState,
    GroupStateError,
    Member,
)
from kraft.groups.group_config import GroupConfig
from kraft.groups.group_messages import (
    NONE,
    UNKNOWN_MEMBER_ID,
    CommitRequest,
    DescribedGroup,
    JoinAnswer,
    JoinRequest,
    LeaveAnswer,
    ListedGroup,
    SyncAnswer,
    SyncRequest,
)
from kraft.groups.offsets_records import GroupMetadataKey, GroupRecord
from kraft.groups.replies import CoordinatorError, Reply
from kraft.groups.state import GroupsImage
from kraft.groups.timers import Timers
from kraft.protocol import ErrorCode

MAX_GROUP_ID_BYTES = 0x7FFF  # a record key's string


class GroupLog(Protocol):
    """What the protocol needs of its coordinator."""

    @property
    def committed(self) -> GroupsImage:
        """What the partition's committed records say."""
        ...

    @property
    def working(self) -> GroupsImage:
        """The committed image plus the records appended since."""
        ...

    def write(self, records: Sequence[GroupRecord], now: int) -> None:
        """Appends the records in one batch and applies them to the working image; raises
        CoordinatorError (nothing appended) if they cannot be written."""
        ...

    def new_reply(self) -> Reply:
        """A reply the coordinator fails if its leadership ends first."""
        ...

    def answer(self, reply: Reply, value: Any, wait: bool = True) -> None:
        """Answers `reply` once everything appended so far has committed (at once if not
        `wait`: an answer read from the committed image alone)."""
        ...


def invalid_group_id(group_id: str | None) -> bool:
    """Kafka refuses a null or empty group id; kraft also one too long for a record key."""
    return not group_id or len(group_id.encode()) > MAX_GROUP_ID_BYTES


class Membership:
    def __init__(self, log: GroupLog, config: GroupConfig, rng: Random) -> None:
        self.log = log
        self.config = config
        self.rng = rng
        self.groups: dict[str, ClassicGroup] = {}
        self.timers = Timers()

    # ---------------------------------------------------------------- lifecycle

    def load(self, image: GroupsImage, now: int) -> None:
        """The groups with members in `image`, Stable, each member given a session timeout
        from now to heartbeat (a new coordinator, as Kafka's on loading its partition)."""
        self.clear()
        for group_id, value in image.groups.items():
            if value.members:
                group = self.groups[group_id] = ClassicGroup.from_metadata(group_id, value, now)
                for member in group.members.values():
                    self._heartbeat_deadline(group, member.member_id, now + member.session_timeout_ms)

    def clear(self) -> None:
        self.groups.clear()
        self.timers.clear()

    def find(self, group_id: str, now: int) -> ClassicGroup | None:
        """The group: in memory, else as the working image has it (Empty), else None."""
        group = self.groups.get(group_id)
        if group is None:
            working = self.log.working
            if working.has_group(group_id):
                group = ClassicGroup.from_metadata(group_id, working.metadata(group_id), now)
                if group.members:  # every group with members was loaded, and is changed only here
                    raise GroupStateError(f"group {group_id} has members in the log but none in memory")
        return group

    def _settle(self, group: ClassicGroup) -> None:
        """Keeps the group in memory only while the log does not say all of it."""
        if group.state in (EMPTY, DEAD) and not group.members and not group.pending_join:
            self.groups.pop(group.group_id, None)
        else:
            self.groups[group.group_id] = group

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def run_due(self, now: int) -> None:
        self.timers.run_due(now)

    # ---------------------------------------------------------------- helpers

    def _answer_join(self, reply: Reply, error: ErrorCode, member_id: str) -> None:
        self.log.answer(reply, JoinAnswer(error, member_id))

    def _answer_current(self, group: ClassicGroup, member: Member, reply: Reply, with_members: bool) -> None:
        self.log.answer(reply, JoinAnswer(
            NONE, member.member_id, group.generation, group.protocol_type, group.protocol_name,
            group.leader_id or "", group.join_members() if with_members else ()))

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def _schedule(self, key: tuple, deadline: int, action: Callable[[int], None]) -> None:
        self.timers.schedule(key, deadline, action)

    def _heartbeat_deadline(self, group: ClassicGroup, member_id: str, deadline: int) -> None:
        group_id = group.group_id
        self._schedule(("heartbeat", group_id, member_id), deadline,
                       lambda now: self._heartbeat_expired(group_id, member_id, now))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, now: int) -> None:
        self._heartbeat_deadline(group, member.member_id, now + member.session_timeout_ms)

    def _drop(self, group: ClassicGroup, member: Member) -> None:
        """Removes a member; a request of its still waiting is answered UNKNOWN_MEMBER_ID
        (it joins again if its client is still there)."""
        self.timers.cancel(("heartbeat", group.group_id, member.member_id))
        join = group.await_join(member, None)
        if join is not None:
            self._answer_join(join, ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID)
        sync = group.await_sync(member, None)
        if sync is not None:
            self.log.answer(sync, SyncAnswer(ErrorCode.unknown_member_id))
        group.remove(member.member_id)

    # ---------------------------------------------------------------- JoinGroup

    def join(self, request: JoinRequest, now: int) -> Reply:
        reply = self.log.new_reply()
        if invalid_group_id(request.group_id):
            self._answer_join(reply, ErrorCode.invalid_group_id, request.member_id)
            return reply
        if not self.config.min_session_timeout_ms <= request.session_timeout_ms <= self.config.max_session_timeout_ms:
            self._answer_join(reply, ErrorCode.invalid_session_timeout, request.member_id)
            return reply
        if request.group_instance_id is not None:
            self._answer_join(reply, ErrorCode.unsupported_version, request.member_id)
            return reply
        group = self.find(request.group_id, now)
        created = group is None
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:  # Kafka: an id for a group that does not exist
                self._answer_join(reply, ErrorCode.unknown_member_id, request.member_id)
                return reply
            group = ClassicGroup(request.group_id, now)
        working = self.log.working
        if not self._accept_joining(group, request.member_id):
            # Kafka removes the member asking: the last to rejoin a group over its size leave it.
            member = group.members.get(request.member_id)
            if member is not None:
                self._drop(group, member)
            group.pending_join.discard(request.member_id)
            self._answer_join(reply, ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID)
        elif request.member_id == UNKNOWN_MEMBER_ID:
            self._join_new(group, request, reply, now)
        else:
            self._join_existing(group, request, reply, now)
        if created and self.log.working is working:  # nothing written: Kafka writes a new group at once, empty
            self.log.write([(GroupMetadataKey(group.group_id), ClassicGroup(group.group_id, now).to_metadata())], now)
        self._settle(group)
        return reply

    def _accept_joining(self, group: ClassicGroup, member_id: str) -> bool:
        """Up to group.max.size members; while preparing, counting those that rejoined."""
        if group.state in (EMPTY, DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is PREPARING_REBALANCE:
            awaiting = sum(m.awaiting_join is not None for m in group.members.values())
            return (member is not None and member.awaiting_join is not None) or awaiting < self.config.max_size
        return member is not None or len(group.members) < self.config.max_size

    def _join_new(self, group: ClassicGroup, request: JoinRequest, reply: Reply, now: int) -> None:
        if group.state is DEAD:
            self._answer_join(reply, ErrorCode.coordinator_not_available, UNKNOWN_MEMBER_ID)
        elif not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            self._answer_join(reply, ErrorCode.inconsistent_group_protocol, UNKNOWN_MEMBER_ID)
        else:
            member_id = self._new_member_id(request.client_id)
            if request.requires_known_member_id:
                group.pending_join.add(member_id)
                self._heartbeat_deadline(group, member_id, now + request.session_timeout_ms)
                self._answer_join(reply, ErrorCode.member_id_required, member_id)
            else:
                self._add_member(group, request, member_id, reply, now)

    def _join_existing(self, group: ClassicGroup, request: JoinRequest, reply: Reply, now: int) -> None:
        member_id = request.member_id
        member = group.members.get(member_id)
        if group.state is DEAD:
            self._answer_join(reply, ErrorCode.coordinator_not_available, member_id)
        elif not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            self._answer_join(reply, ErrorCode.inconsistent_group_protocol, member_id)
        elif member_id in group.pending_join:
            self._add_member(group, request, member_id, reply, now)
        elif member is None or group.state is EMPTY:
            self._answer_join(reply, ErrorCode.unknown_member_id, member_id)
        elif group.state is PREPARING_REBALANCE:
            self._update_member(group, member, request, reply, now)
        elif group.state is COMPLETING_REBALANCE:
            if member.matches(request.protocols):  # its JoinGroup answer was lost: the same again
                self._answer_current(group, member, reply, with_members=group.is_leader(member_id))
            else:
                self._update_member(group, member, request, reply, now)
        elif group.is_leader(member_id) or not member.matches(request.protocols):
            # Stable: the leader rejoining forces a rebalance (its view of the topics changed),
            # as does a member whose subscription changed.
            self._update_member(group, member, request, reply, now)
        else:
            self._answer_current(group, member, reply, with_members=False)

    def _add_member(self, group: ClassicGroup, request: JoinRequest, member_id: str, reply: Reply,
                    now: int) -> None:
        member = Member(member_id, request.client_id, request.client_host, request.rebalance_timeout_ms,
                        request.session_timeout_ms, request.protocol_type, request.protocols,
                        awaiting_join=reply, is_new=True)
        if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat while its JoinGroup waits; it is given longer.
        self._heartbeat_deadline(group, member_id, now + self.config.new_member_join_timeout_ms)
        self._prepare_or_complete(group, now)

    def _update_member(self, group: ClassicGroup, member: Member, request: JoinRequest, reply: Reply,
                       now: int) -> None:
        replaced = group.update(member, request.protocols, request.rebalance_timeout_ms,
                                request.session_timeout_ms, reply)
        if replaced is not None:  # a second JoinGroup while the first waits: the first is not answered twice
            self._answer_join(replaced, ErrorCode.rebalance_in_progress, member.member_id)
        self._prepare_or_complete(group, now)

    # ---------------------------------------------------------------- rebalancing

    def _prepare_or_complete(self, group: ClassicGroup, now: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now)
        else:
            self._maybe_complete_join_phase(group, now)

    def _maybe_complete_join_phase(self, group: ClassicGroup, now: int) -> None:
        """Ends a join phase every member has rejoined, unless it is a new group's first
        (which waits out the initial rebalance delay)."""
        if (group.state is PREPARING_REBALANCE and group.previous_state is not EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.state is COMPLETING_REBALANCE:
            self._reset_assignment(group, ErrorCode.rebalance_in_progress, now)
        group.pending_sync.clear()
        self.timers.cancel(("sync", group.group_id))
        initial = group.state is EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delay(group.group_id, now + delay, delay, max(group.rebalance_timeout_ms() - delay, 0))
        group.transition(PREPARING_REBALANCE, now)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group, now)
            else:
                self._join_deadline(group, now + group.rebalance_timeout_ms())

    def _join_deadline(self, group: ClassicGroup, deadline: int) -> None:
        group_id = group.group_id

        def due(now: int) -> None:
            found = self.groups.get(group_id)
            if found is not None:
                self._complete_join(found, now)
                self._settle(found)

        self._schedule(("join", group_id), deadline, due)

    def _initial_delay(self, group_id: str, deadline: int, delay: int, remaining: int) -> None:
        """Kafka's initial rebalance: wait `delay`, and again while new members keep joining,
        until `remaining` (the rebalance timeout past the first delay) is spent."""

        def due(now: int) -> None:
            group = self.groups.get(group_id)
            if group is None:
                return
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self._initial_delay(group_id, now + next_delay, next_delay, max(remaining - delay, 0))
            else:
                self._complete_join(group, now)
                self._settle(group)

        self._schedule(("join", group_id), deadline, due)

    def _complete_join(self, group: ClassicGroup, now: int) -> None:
        group_id = group.group_id
        self.timers.cancel(("join", group_id))
        for member in group.not_yet_rejoined():
            self._drop(group, member)
        if group.state is DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # No member rejoined: wait another rebalance timeout for their sessions to end.
            self._join_deadline(group, now + group.rebalance_timeout_ms())
            return
        group.init_next_generation(now)
        if group.state is EMPTY:
            self.log.write([(GroupMetadataKey(group_id), group.to_metadata())], now)
            return
        for member in group.members.values():
            reply = group.await_join(member, None)
            if reply is not None:
                self._answer_current(group, member, reply, with_members=group.is_leader(member.member_id))
            self._reschedule_heartbeat(group, member, now)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation

        def sync_due(at: int) -> None:
            found = self.groups.get(group_id)
            if found is not None and found.generation == generation:
                self._sync_expired(found, at)
                self._settle(found)

        self._schedule(("sync", group_id), now + group.rebalance_timeout_ms(), sync_due)

    def _sync_expired(self, group: ClassicGroup, now: int) -> None:
        """Members that joined but sent no SyncGroup in time are removed, and the group
        rebalances without them."""
        if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync:
            for member_id in list(group.pending_sync):
                self._drop(group, group.members[member_id])
            self._prepare_rebalance(group, now)

    def _heartbeat_expired(self, group_id: str, member_id: str, now: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return
        if member_id in group.pending_join:
            group.remove(member_id)
            if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group, now)
        else:
            member = group.members.get(member_id)
            if member is not None and not member.has_satisfied_heartbeat():
                self._remove_and_rebalance(group, member, now)
        self._settle(group)

    def _remove_and_rebalance(self, group: ClassicGroup, member: Member, now: int) -> None:
        self._drop(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_or_complete(group, now)
        elif group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group, now)

    def _reset_assignment(self, group: ClassicGroup, error: ErrorCode, now: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error, now)

    def _propagate(self, group: ClassicGroup, error: ErrorCode, now: int) -> None:
        """Answers every waiting SyncGroup with its member's assignment, or `error`."""
        ok = error is NONE
        for member in group.members.values():
            reply = group.await_sync(member, None)
            if reply is not None:
                self.log.answer(reply, SyncAnswer(error, member.assignment,
                                                  group.protocol_type if ok else None,
                                                  group.protocol_name if ok else None))
                self._reschedule_heartbeat(group, member, now)

    # ---------------------------------------------------------------- SyncGroup

    def sync(self, request: SyncRequest, now: int) -> Reply:
        reply = self.log.new_reply()
        if invalid_group_id(request.group_id):
            self.log.answer(reply, SyncAnswer(ErrorCode.invalid_group_id))
            return reply
        group = self.find(request.group_id, now)
        if group is None or group.state is EMPTY:
            self.log.answer(reply, SyncAnswer(ErrorCode.unknown_member_id))
            return reply
        error = self._sync_error(group, request)
        member = group.members.get(request.member_id)
        if error is not None or member is None:
            self.log.answer(reply, SyncAnswer(error or ErrorCode.unknown_member_id))
        elif group.state is PREPARING_REBALANCE:
            self.log.answer(reply, SyncAnswer(ErrorCode.rebalance_in_progress))
        elif group.state is COMPLETING_REBALANCE:
            replaced = group.await_sync(member, reply)
            if replaced is not None:
                self.log.answer(replaced, SyncAnswer(ErrorCode.rebalance_in_progress))
            self._received_sync(group, member.member_id)
            if group.is_leader(member.member_id):
                self._store_assignment(group, dict(request.assignments), now)
        else:
            self._received_sync(group, member.member_id)
            self.log.answer(reply, SyncAnswer(NONE, member.assignment, group.protocol_type, group.protocol_name))
        self._settle(group)
        return reply

    def _sync_error(self, group: ClassicGroup, request: SyncRequest) -> ErrorCode | None:
        if group.state is DEAD:
            return ErrorCode.coordinator_not_available
        if request.group_instance_id is not None or not group.has_member(request.member_id):
            return ErrorCode.unknown_member_id
        if request.generation != group.generation:
            return ErrorCode.illegal_generation
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
                request.protocol_name, group.protocol_name):
            return ErrorCode.inconsistent_group_protocol
        return None

    def _received_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    def _store_assignment(self, group: ClassicGroup, assignment: dict[str, bytes], now: int) -> None:
        """The leader's assignment: written, then handed to every member waiting in SyncGroup
        (each answer held until the record commits), and the group is Stable."""
        try:
            self.log.write([(GroupMetadataKey(group.group_id), group.to_metadata(assignment))], now)
        except CoordinatorError as e:
            self._reset_assignment(group, e.error, now)
            self._prepare_or_complete(group, now)
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate(group, NONE, now)
        group.transition(STABLE, now)

    # ---------------------------------------------------------------- Heartbeat, LeaveGroup

    def heartbeat(self, group_id: str, member_id: str, generation: int, group_instance_id: str | None,
                  now: int) -> Reply:
        reply = self.log.new_reply()
        self.log.answer(reply, self._heartbeat(group_id, member_id, generation, group_instance_id, now))
        return reply

    def _heartbeat(self, group_id: str, member_id: str, generation: int, group_instance_id: str | None,
                   now: int) -> ErrorCode:
        if invalid_group_id(group_id):
            return ErrorCode.invalid_group_id
        group = self.find(group_id, now)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is DEAD:
            return ErrorCode.coordinator_not_available
        member = group.members.get(member_id)
        if group_instance_id is not None or member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        self._reschedule_heartbeat(group, member, now)
        return ErrorCode.rebalance_in_progress if group.state is PREPARING_REBALANCE else NONE

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]], now: int) -> Reply:
        """Members leaving: (member id, group instance id) each; a pending member may too."""
        reply = self.log.new_reply()
        if invalid_group_id(group_id):
            self.log.answer(reply, LeaveAnswer(ErrorCode.invalid_group_id))
            return reply
        group = self.find(group_id, now)
        if group is None:
            self.log.answer(reply, LeaveAnswer(NONE, tuple((m, i, ErrorCode.unknown_member_id) for m, i in members)))
            return reply
        if group.state is DEAD:
            self.log.answer(reply, LeaveAnswer(ErrorCode.coordinator_not_available))
            return reply
        results = []
        for member_id, instance_id in members:
            member = group.members.get(member_id)
            if member_id != UNKNOWN_MEMBER_ID and member_id in group.pending_join:
                group.remove(member_id)
                self.timers.cancel(("heartbeat", group_id, member_id))
                results.append((member_id, instance_id, NONE))
            elif instance_id is not None or member is None:
                results.append((member_id, instance_id, ErrorCode.unknown_member_id))
            else:
                self._drop(group, member)
                results.append((member_id, instance_id, NONE))
        if any(error is NONE for _, _, error in results):
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._prepare_or_complete(group, now)
            elif group.state is PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group, now)
        self._settle(group)
        self.log.answer(reply, LeaveAnswer(NONE, tuple(results)))
        return reply

    # ---------------------------------------------------------------- what the offset operations ask

    def commit_error(self, request: CommitRequest, now: int) -> ErrorCode | None:
        """Why the group refuses the commit (Kafka's ClassicGroup.validateOffsetCommit), or
        None; a commit by a member keeps its session alive."""
        group = self.find(request.group_id, now)
        if group is None:
            if request.generation < 0:
                return None  # a simple group: its offsets will say it exists
            return ErrorCode.group_id_not_found if request.group_id_not_found_error else ErrorCode.illegal_generation
        if group.state is DEAD:
            return ErrorCode.coordinator_not_available
        if request.generation < 0 and group.state is EMPTY:
            return None
        member = group.members.get(request.member_id)
        if request.generation >= 0 or request.member_id or request.group_instance_id is not None:
            if request.group_instance_id is not None or member is None:
                return ErrorCode.unknown_member_id
            if request.generation != group.generation:
                return ErrorCode.illegal_generation
        elif group.state is not EMPTY:
            return ErrorCode.unknown_member_id
        if group.state is COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self._reschedule_heartbeat(group, member, now)
        return None

    def deletion_error(self, group_id: str, now: int) -> ErrorCode:
        """DeleteGroups: a group that does not exist, or has members, is not deleted."""
        group = self.find(group_id, now)
        if group is None or group.state is DEAD:
            return ErrorCode.group_id_not_found
        if group.state is not EMPTY:
            return ErrorCode.non_empty_group
        return NONE

    def deleted(self, group_id: str, now: int) -> None:
        """The group's tombstones are written: forget it (pending members included)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition(DEAD, now)

    def offset_deletion(self, group_id: str, now: int) -> tuple[ErrorCode, ClassicGroup | None]:
        """OffsetDelete: the group, unless it does not exist (GROUP_ID_NOT_FOUND) or has members
        and is not a consumer group (NON_EMPTY_GROUP: only the consumer protocol says which
        topics its members read)."""
        group = self.find(group_id, now)
        if group is None or group.state is DEAD:
            return ErrorCode.group_id_not_found, None
        if group.state is not EMPTY and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group, None
        return NONE, group

    # ---------------------------------------------------------------- reads

    def describe(self, group_id: str, now: int) -> DescribedGroup:
        """A group that does not exist is described as Dead, without an error (Kafka's)."""
        group = self.find(group_id, now)
        return group.describe() if group is not None else DescribedGroup(group_id, DEAD.value)

    def list_groups(self, states: Sequence[str], types: Sequence[str]) -> list[ListedGroup]:
        """Every group, filtered by state (any case) and type (all are classic here)."""
        wanted_states = {s.strip().lower() for s in states}
        if types and "classic" not in {t.strip().lower() for t in types}:
            return []
        working = self.log.working
        listed = []
        for group_id in sorted({*working.group_ids(), *self.groups}):
            group = self.groups.get(group_id)
            state: GroupState = group.state if group is not None else EMPTY
            if wanted_states and state.value.lower() not in wanted_states:
                continue
            if group is not None:
                protocol_type = group.protocol_type or ""
            else:
                metadata = working.metadata(group_id)
                protocol_type = metadata.protocol_type if metadata is not None else ""
            listed.append(ListedGroup(group_id, protocol_type, state.value))
        return listed


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and actual is not None and asked != actual
