"""Voter changes (KIP-853) as a replica lives them: the state they own on the role objects.

voter_change_rules.py decides (Kafka's checks in Kafka's order, the new set); this module acts on
what only voter changes touch, at both ends:

- the leader's change waiting for its commit (`Leader.voter_change`): appended when
  AddRaftVoter or RemoveRaftVoter passes the checks, answered once the high watermark passes
  it, when its deadline passes, or when the leader steps down first (unknown then: the next
  leader may still commit it). UpdateRaftVoter, and AddRaftVoter with AckWhenCommitted false
  (KIP-1186), are answered at once, as Kafka does.
- a voter's UpdateRaftVoter (`Follower.voter_update_due`): when the committed voter set
  names other endpoints (or kraft.version range) than the voter has, again every update
  period while it does; a new leader whose own entry is so rewrites it in the batch of its
  LeaderChange (`own_entry_update`), as Kafka's does.
- a controller's auto-join (`controller.quorum.auto.join.enable`, KIP-1186): an observer
  that is a controller asks its leader to add it (AddRaftVoter v1, AckWhenCommitted false),
  every update period while it is not a voter; an entry of its id with another directory id
  (its disk before it was lost) it asks to remove first, as Kafka's does.
- what a new latest voter set means for the replica's role: a leader counts the new voters,
  a replica that may no longer campaign becomes an observer, one just added gets an election
  timer.

The core calls these at the points of its step where they happen; nothing here decides a
transition Raft owns (the leader that removed itself resigns in the core, at the commit).
"""

import logging
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft import kraft_upgrade, membership_messages, voter_change_rules
from kraft.raft import messages as m
from kraft.raft.gate import Gate
from kraft.raft.outbox import Outbox
from kraft.raft.quorum_state import QuorumState
from kraft.raft.raft_config import RaftConfig
from kraft.raft.roles import Follower, Leader, Unattached
from kraft.raft.voters import Voters
from kraft.records.control import ControlMessage, KRaftVersionRecord, Voter

log = logging.getLogger("kraft.raft")

AUTO_JOIN_TIMEOUT_MS = 30_000  # an auto-join's AddRaftVoter TimeoutMs (KIP-853)


class VoterChanges:
    def __init__(self, config: RaftConfig, voters: Voters, quorum: QuorumState, outbox: Outbox, gate: Gate,
                 fence: Callable[[int], ErrorCode],
                 append_control: Callable[[Leader, tuple[ControlMessage, ...], int], int]) -> None:
        self.config = config
        self.node_id = config.node_id
        self.voters = voters
        self.quorum = quorum
        self.outbox = outbox
        self.gate = gate
        self.fence = fence  # the core's KIP-320 check of a request that must reach the leader
        self.append_control = append_control  # the core's: a control batch after what is queued
        self._seen = voters.generation

    # ---------------------------------------------------------------- the leader

    def _answer(self, request: m.MembershipRequest, error: ErrorCode,
                message: str | None = None) -> m.MembershipResponse:
        if isinstance(request, membership_messages.UpdateRaftVoterRequest):  # names the leader instead
            return membership_messages.update_raft_voter_response(error, leader_id=self.quorum.leader_field,
                                                                  leader_epoch=self.quorum.epoch)
        return membership_messages.response_for(request, error, message)

    def on_request(self, handle: Any, request: m.MembershipRequest, now: int) -> None:
        """AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter: checked, then one VotersRecord."""
        reply = self.outbox.reply
        if not self.gate.cluster_ok(request):
            return reply(handle, self._answer(request, ErrorCode.inconsistent_cluster_id))
        updating = isinstance(request, membership_messages.UpdateRaftVoterRequest)
        if isinstance(request, membership_messages.UpdateRaftVoterRequest):  # to its leader: fenced, as Fetch is
            fenced = self.fence(request.current_leader_epoch)
            if fenced != ErrorCode.none:
                return reply(handle, self._answer(request, fenced))
        leader = self.quorum.state
        if not isinstance(leader, Leader):
            return reply(handle, self._answer(
                request, ErrorCode.not_leader_or_follower,
                f"node {self.node_id} is not the leader (leader {self.quorum.leader_id}, epoch {self.quorum.epoch})"))
        listener = self.config.endpoints[0].name if self.config.endpoints else None
        why = voter_change_rules.invalid(request, listener)
        static = not self.voters.is_dynamic
        if why is None and static and isinstance(request, membership_messages.UpdateRaftVoterRequest):
            # kept in memory for the kraft.version upgrade
            return reply(handle, self._answer(request, *kraft_upgrade.record_update(leader, request)))
        why = why or voter_change_rules.refusal(
            request, self.voters, leader.progress, leader.voter_change, self.config.fetch_timeout_ms, now)
        if why is not None:
            return reply(handle, self._answer(request, *why))
        changed = voter_change_rules.changed_set(request, self.voters.latest)
        offset = self.append_control(leader, (changed.record(),), now)
        log.info("node %d: voters %s -> %s at offset %d", self.node_id, list(self.voters.at(offset - 1).ids),
                 list(changed.ids), offset)
        if updating:  # answered at once, as Kafka does: the voter's endpoints changed, not the majority
            return reply(handle, self._answer(request, ErrorCode.none))
        timeout_ms = int(request.timeout.total_seconds() * 1000) if hasattr(request, "timeout") else 0
        deadline = now + (timeout_ms if timeout_ms > 0 else self.config.request_timeout_ms)
        acknowledged = not getattr(request, "ack_when_committed", True)
        leader.voter_change = voter_change_rules.PendingChange(request, handle, offset, deadline, acknowledged)
        if acknowledged:
            reply(handle, self._answer(request, ErrorCode.none))

    def committed(self, leader: Leader, high_watermark: int) -> None:
        """The high watermark moved: the waiting change is answered once it passes it."""
        change = leader.voter_change
        if change is not None and high_watermark > change.offset:
            leader.voter_change = None
            if not change.acknowledged:
                self.outbox.reply(change.handle, change.answer(ErrorCode.none))

    def expire(self, leader: Leader, now: int) -> None:
        """The waiting change's deadline passed: REQUEST_TIMED_OUT (the record stays)."""
        change = leader.voter_change
        if change is not None and now >= change.deadline:
            leader.voter_change = None
            if not change.acknowledged:
                self.outbox.reply(change.handle, change.answer(
                ErrorCode.request_timed_out, f"the voter change at offset {change.offset} did not commit in time"))

    def abandon(self, old: Leader) -> None:
        """The leader stepped down with a change appended: maybe committed later by the next
        leader, so the answer is that it is unknown."""
        if old.voter_change is not None and not old.voter_change.acknowledged:
            self.outbox.reply(old.voter_change.handle, old.voter_change.answer(
                ErrorCode.not_leader_or_follower, f"node {self.node_id} stopped leading before the change committed"))

    # ---------------------------------------------------------------- a voter

    def _outdated_entry(self, follower: Follower, high_watermark: int | None, now: int) -> bool:
        """This voter's entry in the committed voter set names other endpoints than it is
        reached at (it moved, or was added with others): it tells its leader, as Kafka's
        voters do after a restart, and again every update period while the entry stays so."""
        config, voters = self.config, self.voters
        if now < follower.voter_update_due or not follower.fetched or not config.endpoints or config.directory_id is None:
            return False
        if not voters.is_dynamic:
            return voters.contains(self.node_id) and not follower.leader_updated
        hw = high_watermark if high_watermark is not None else 0
        return (voter_change_rules.outdated_entry(voters, self.node_id, config.directory_id, config.endpoints)
                is not None and voters.latest_offset < hw)

    def own_entry_update(self) -> tuple[ControlMessage, ...]:
        """What a new leader writes after its LeaderChange, in that batch, when its own entry in
        the voter set is outdated: the kraft.version record and the set with its entry
        rewritten, as Kafka's leader does at the start of its epoch (LeaderState's
        appendStartOfEpochControlRecords)."""
        config, voters = self.config, self.voters
        if voter_change_rules.outdated_entry(voters, self.node_id, config.directory_id, config.endpoints) is None:
            return ()
        assert config.directory_id is not None
        low, high = voter_change_rules.KRAFT_VERSIONS_SUPPORTED
        mine = Voter(self.node_id, config.directory_id, config.endpoints, low, high)
        log.info("node %d: rewriting its own entry in the voters: endpoints %s", self.node_id,
                 [f"{e.name}://{e.host}:{e.port}" for e in config.endpoints])
        return KRaftVersionRecord(voters.kraft_version), voters.latest.without(self.node_id).with_voter(mine).record()

    def ask_to_update(self, follower: Follower, leader_id: int, high_watermark: int | None, now: int) -> bool:
        """Sends UpdateRaftVoter to the leader if this voter's entry is outdated (True: sent,
        the follower's request for this step)."""
        if not self._outdated_entry(follower, high_watermark, now):
            return False
        follower.voter_update_due = now + 3 * self.config.fetch_timeout_ms
        mine = self.config.endpoints
        update = membership_messages.update_raft_voter_request(
            self.config.cluster_id, self.quorum.epoch, self.node_id,
            uuid.UUID(bytes=self.config.directory_id or bytes(16)), mine, voter_change_rules.KRAFT_VERSIONS_SUPPORTED)
        log.info("node %d: asking leader %d to record its endpoints %s", self.node_id, leader_id,
                 [f"{e.name}://{e.host}:{e.port}" for e in mine])
        self.outbox.send(leader_id, update, now)
        return True

    def ask_to_join(self, follower: Follower, leader_id: int, now: int) -> bool:
        """Auto-join: sends RemoveRaftVoter (an entry of this id with another directory id) or
        AddRaftVoter (none) to the leader of a dynamic quorum, if this replica is a controller
        that is not a voter (True: sent, the follower's request for this step)."""
        config, voters = self.config, self.voters
        if (not config.auto_join or now < follower.voter_update_due or not follower.fetched or not config.endpoints
                or config.directory_id is None or not voters.is_dynamic):
            return False
        entry = voters.latest.get(self.node_id)
        if entry is not None and entry.directory_id == config.directory_id:
            return False  # a voter
        follower.voter_update_due = now + 3 * config.fetch_timeout_ms
        request: m.MembershipRequest
        if entry is not None:
            request = membership_messages.remove_raft_voter_request(
                config.cluster_id, self.node_id, uuid.UUID(bytes=entry.directory_id))
            log.info("node %d: asking leader %d to remove its old directory %s from the voters", self.node_id,
                     leader_id, request.voter_directory_id)
        else:
            request = membership_messages.add_raft_voter_request(
                config.cluster_id, AUTO_JOIN_TIMEOUT_MS, self.node_id, uuid.UUID(bytes=config.directory_id),
                config.endpoints, ack_when_committed=False)
            log.info("node %d: asking leader %d to add it to the voters", self.node_id, leader_id)
        self.outbox.send(leader_id, request, now)
        return True

    def on_join_response(self, source: int, response: membership_messages.AddRaftVoterResponse
                         | membership_messages.RemoveRaftVoterResponse, now: int) -> None:
        """An auto-join's answer: a refusal (not caught up yet, a change pending...) is tried
        again at the next update period."""
        error, message = membership_messages.response_error(response)
        if error != ErrorCode.none:
            self.gate.once(("join", error), logging.INFO, "node %d: leader %d did not change the voters for its "
                           "auto-join (%s: %s); asking again", self.node_id, source, error.name, message)
            self.outbox.back_off(source, now)

    def on_update_response(self, source: int, response: membership_messages.UpdateRaftVoterResponse,
                           now: int) -> None:
        """An answer naming a newer leader is followed (as Kafka's common response handling);
        refused (a change pending, the leader's epoch not committed yet...): asked again at
        the next update period, as Kafka's follower does (its timer is reset when it sends).
        Not sooner: the update is the follower's request of its step, so asking at every
        step would starve its fetches, and the leader waiting on them for its high watermark
        would refuse every time (seen in the simulator's upgrade seeds)."""
        leader = response.current_leader
        if self.quorum.learn_leader(leader.leader_id, leader.leader_epoch, now):
            return
        follower = self.quorum.state
        if response.error_code == ErrorCode.none and isinstance(follower, Follower) and source == self.quorum.leader_id:
            follower.leader_updated = True
        if response.error_code != ErrorCode.none and isinstance(follower, Follower) and source == self.quorum.leader_id:
            self.gate.once(("update voter", response.error_code), logging.INFO, "node %d: leader %d did not record "
                           "its endpoints (%s); asking again", self.node_id, source, response.error_code.name)
            self.outbox.back_off(source, now)

    # ---------------------------------------------------------------- the latest voter set

    def settled(self) -> None:
        """The voter set as the start-up replay left it is no change."""
        self._seen = self.voters.generation

    def poll(self, now: int) -> None:
        """The latest voter set changed since the last step (appended, truncated away or
        loaded from a snapshot): the replica's role follows it."""
        if self.voters.generation == self._seen:
            return
        self._seen = self.voters.generation
        state = self.quorum.state
        if isinstance(state, Leader):
            state.progress.set_voters(self.voters.ids)
        elif not self.voters.may_campaign(self.node_id):
            self.quorum.become_observer(now)
        elif isinstance(state, Unattached) and state.election_deadline is None:
            state.election_deadline = self.quorum.election_timer(now)  # added: a voter now
