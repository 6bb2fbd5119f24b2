"""Elections (KIP-595) with pre-vote (KIP-996): asking for votes, and answering Vote.

A voter whose timer runs out (no leader heard from, or an election that went nowhere) first
asks, in its current epoch, whether a majority would vote for it: a pre-vote, which changes
nothing at the voters and writes nothing. Only a prospective that a majority would elect
campaigns in the next epoch. So a voter that cannot win, cut off from the others or behind
them, never bumps the epoch, and when it comes back it does not depose a leader the others
still hear from: they refuse its pre-votes and name their leader, which it then follows.
As Kafka 4.x: a candidate that loses or times out asks again (pre-vote) at once, and a
prospective that loses follows the leader it knows or, knowing none, waits unattached for a
new randomized election timeout.

The rules for granting, per role of the voter asked:

    pre-vote   granted when the asker's log is at least as up to date as ours, unless we
               lead, or follow a leader that has answered us since we began following it,
               even one that has resigned since (a follower that only heard of its leader
               from others grants,
               as Kafka's does: two voters that learnt a dead leader from each other would
               otherwise keep each other from ever campaigning)
    vote       as KIP-595: once per epoch, to an asker at least as up to date, never while
               a leader of the epoch is known

A Vote of a newer epoch, pre-vote or not, moves us to that epoch first (as Kafka), keeping
the election timer we had.
"""

import logging
from collections.abc import Callable
from random import Random
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft import messages as m
from kraft.raft.epochs import EpochHistory
from kraft.raft.gate import MAX_EPOCH, Gate
from kraft.raft.outbox import Outbox
from kraft.raft.quorum import VoteResult, vote_result
from kraft.raft.quorum_state import QuorumState
from kraft.raft.raft_config import RaftConfig
from kraft.raft.roles import Campaign, Candidate, Follower, Prospective, Role, Unattached
from kraft.raft.voters import Voters
from kraft.storage import OffsetAndEpoch

log = logging.getLogger("kraft.raft")


class Elections:
    def __init__(self, config: RaftConfig, voters: Voters, quorum: QuorumState, outbox: Outbox, gate: Gate,
                 history: EpochHistory, rng: Random, on_votes: Callable[[int], None]) -> None:
        self.config = config
        self.voters = voters
        self.node_id = config.node_id
        self.quorum = quorum
        self.outbox = outbox
        self.gate = gate
        self.history = history
        self.rng = rng
        self.on_votes = on_votes  # the core's: a campaign's votes changed (it may have won)

    # ---------------------------------------------------------------- asking

    def start(self, now: int) -> None:
        """The timer ran out: pre-vote (or, with pre-vote off, campaign at once). A replica
        the voter set no longer names (KIP-853: removed) observes instead."""
        if not self.voters.may_campaign(self.node_id):
            self.quorum.become_observer(now)
        elif self.config.pre_vote:
            self.quorum.become_prospective(now)
            self.on_votes(now)  # a single voter is its own majority
        else:
            self.campaign(now)

    def campaign(self, now: int) -> None:
        """Candidate in the next epoch, unless the epoch cannot grow."""
        if self.quorum.epoch >= MAX_EPOCH:
            self.gate.once("exhausted", logging.CRITICAL, "node %d: cannot campaign: epoch %d is the largest an "
                           "int32 holds; the quorum needs `kraft restore` or `kraft recover`", self.node_id,
                           self.quorum.epoch)
            self.quorum.postpone_timeout(now)
            return
        self.quorum.become_candidate(now)
        self.on_votes(now)

    def poll(self, campaign: Campaign, now: int) -> bool:
        """Sends the round's (pre-)votes; backs off after a lost round and starts the next.
        True if the role changed (the caller polls again)."""
        if campaign.backoff_until is not None:
            if now < campaign.backoff_until:
                return False
            self.start(now)
            return True
        # Lost, as Kafka counts it: the round timed out, or the votes granted and still
        # unanswered cannot make a majority. A voter that cannot be reached counts as refusing
        # (a dead leader's port refuses at once; with one peer refusing because it voted for
        # itself, a three-voter quorum would otherwise wait out the whole election timeout).
        voters = self.voters.ids
        lost = vote_result(voters, campaign.granted, campaign.rejected | campaign.unreachable) == VoteResult.LOST
        if now >= campaign.election_deadline or lost:
            leader = self.quorum.leader_id
            if isinstance(campaign, Prospective) and leader is not None and leader != self.node_id:
                # As Kafka: a follower whose pre-vote failed follows its leader again (the
                # voters refusing it still hear from that leader); it asks again if its
                # fetches time out again.
                self.quorum.become_follower(self.quorum.epoch, leader, now)
                return True
            if isinstance(campaign, Prospective) and leader is None:
                # As Kafka: one that knows no leader waits a new election timeout, unattached.
                self.quorum.become_unattached(self.quorum.epoch, now)
                return True
            if isinstance(campaign, Candidate) and self.config.pre_vote:
                # As Kafka 4.x: a lost election goes back to asking (pre-vote) at once; the
                # randomized election timeouts, not a backoff, keep candidates apart.
                self.start(now)
                return True
            # A resigned leader's own pre-vote (it keeps naming itself, so it never becomes a
            # candidate of the epoch it led), or a vote round without pre-vote: back off.
            campaign.backoff_until = now + self.rng.randrange(self.config.election_backoff_max_ms + 1)
            return False
        last = self.history.last()
        pre_vote = isinstance(campaign, Prospective)
        for voter in voters:
            if voter in campaign.granted or voter in campaign.rejected or not self.outbox.can_send(voter, now):
                continue
            self.outbox.send(voter, m.vote_request(self.config.cluster_id, self.quorum.epoch, self.node_id,
                                                   last.epoch, last.offset, voter=voter, pre_vote=pre_vote,
                                                   where=self.config.partition), now)
        return False

    def on_unreachable(self, voter: int) -> None:
        campaign = self.quorum.state
        if isinstance(campaign, Campaign) and self.voters.contains(voter):
            campaign.unreachable.add(voter)

    def on_response(self, p: Any, source: int, now: int) -> None:
        """A voter's answer in this epoch (read by Announcements.read_response)."""
        campaign = self.quorum.state
        if not isinstance(campaign, Campaign) or p.leader_epoch != self.quorum.epoch:
            return
        if p.error_code != ErrorCode.none:
            self.outbox.back_off(source, now)
            return
        campaign.unreachable.discard(source)
        if p.vote_granted:
            campaign.granted.add(source)
            self.on_votes(now)
        else:
            campaign.rejected.add(source)

    # ---------------------------------------------------------------- answering

    def on_request(self, request: m.VoteRequest, now: int) -> tuple[ErrorCode, bool, ErrorCode]:
        """(partition error, granted, top-level error) for a Vote request."""
        if not self.gate.cluster_ok(request):
            return ErrorCode.none, False, ErrorCode.inconsistent_cluster_id
        p = m.partition_of(request, self.config.partition)
        if p is None:
            return ErrorCode.unknown_topic_or_partition, False, ErrorCode.none
        refusal = self.gate.vote(request, p, self.quorum.epoch)
        if refusal is not None:
            return refusal, False, ErrorCode.none
        if p.replica_epoch > self.quorum.epoch:
            # A newer epoch, but not (yet) a vote: keep our election timer running rather
            # than restart it. Otherwise a candidate with a stale log, campaigning again and
            # again, would keep the voters that could win from ever timing out.
            deadline = self.quorum.timeout_deadline(now)
            self.quorum.become_unattached(p.replica_epoch, now)
            unattached = self.quorum.state
            assert isinstance(unattached, Unattached)
            if unattached.election_deadline is not None:  # None: an observer, which never campaigns
                unattached.election_deadline = min(unattached.election_deadline, deadline)
        up_to_date = OffsetAndEpoch(p.last_offset, p.last_offset_epoch) >= self.history.last()
        if p.pre_vote:
            return ErrorCode.none, up_to_date and self._would_grant_pre_vote(), ErrorCode.none
        return ErrorCode.none, self._grant(p.replica_id, up_to_date, now), ErrorCode.none

    def _would_grant_pre_vote(self) -> bool:
        """Kafka's rules: a follower only until its leader has answered a fetch (even once
        that leader resigned: it still hears from it), never a leader; a resigned leader
        grants, as its successors need a majority without it timing out."""
        state = self.quorum.state
        if isinstance(state, Follower):
            return not state.fetched
        return self.quorum.role != Role.LEADER

    def _grant(self, candidate: int, up_to_date: bool, now: int) -> bool:
        role, quorum = self.quorum.role, self.quorum
        if quorum.voted_id is not None:
            return role in (Role.VOTED, Role.PROSPECTIVE, Role.UNATTACHED) and quorum.voted_id == candidate
        if role in (Role.UNATTACHED, Role.PROSPECTIVE) and quorum.leader_id is None and up_to_date:
            quorum.become_voted(candidate, now)
            return True
        return False
