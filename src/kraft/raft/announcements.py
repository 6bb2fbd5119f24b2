"""BeginQuorumEpoch and EndQuorumEpoch (KIP-595): leaders announcing themselves and handing over.

A leader sends BeginQuorumEpoch to every other voter when elected and then every half fetch
timeout, as Kafka 3.9+ does: a heartbeat that reaches a voter which missed the election or
lost its answer, whether or not it fetches. A resigning leader sends EndQuorumEpoch,
naming its successors most caught up first, until each voter acknowledges. A voter told by
its leader that it resigns campaigns at once if it is the first successor, the others
after a backoff that grows with their place in the list. The answers to these and to Vote
share one reading: an error is retried after the backoff, a newer leader is followed.
"""

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft import messages as m
from kraft.raft.gate import Gate
from kraft.raft.outbox import Outbox
from kraft.raft.quorum_state import QuorumState
from kraft.raft.raft_config import RaftConfig
from kraft.raft.roles import Follower, Leader, Resigned
from kraft.raft.voters import Voters


class Announcements:
    def __init__(self, config: RaftConfig, voters: Voters, quorum: QuorumState, outbox: Outbox, gate: Gate) -> None:
        self.config = config
        self.voters = voters
        self.node_id = config.node_id
        self.quorum = quorum
        self.outbox = outbox
        self.gate = gate

    # ---------------------------------------------------------------- sending

    def announce(self, leader: Leader, now: int) -> None:
        """A leader: when its timer runs out, BeginQuorumEpoch to every other voter that has
        not fetched within the timer's period (KAFKA-16926, Kafka 4.0: a voter that fetches
        knows its leader; one that does not may have missed the epoch)."""
        if now < leader.next_begin_quorum:
            return
        interval = leader.begin_quorum_interval_ms
        leader.next_begin_quorum = now + interval
        request = m.begin_quorum_request(self.config.cluster_id, self.node_id, self.quorum.epoch,
                                         where=self.config.partition)
        for voter in self.voters.ids:
            progress = leader.progress.voter_progress.get(voter)
            fetched = progress is not None and progress.last_fetch_ms >= 0 and now - progress.last_fetch_ms < interval
            if voter != self.node_id and not fetched and self.outbox.can_send(voter, now):
                self.outbox.send(voter, request, now)

    def hand_over(self, resigned: Resigned, now: int) -> None:
        """A resigned leader: EndQuorumEpoch to every voter that has not acknowledged it."""
        for voter in self.voters.ids:
            if voter not in resigned.end_quorum_acked and self.outbox.can_send(voter, now):
                request = m.end_quorum_request(self.config.cluster_id, self.node_id, self.quorum.epoch,
                                               resigned.successors, where=self.config.partition)
                self.outbox.send(voter, request, now)

    # ---------------------------------------------------------------- requests

    def _checked(self, handle: Any, request: m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest,
                 response: Callable[..., m.RaftResponse]) -> Any:
        """The checks both requests share. Returns the partition, or None once an error has
        been answered (with `response`, the API's own builder)."""
        p = m.partition_of(request, self.config.partition)
        if not self.gate.cluster_ok(request):
            error, top = ErrorCode.none, ErrorCode.inconsistent_cluster_id
        elif p is None:
            error, top = ErrorCode.unknown_topic_or_partition, ErrorCode.none
        else:
            refusal = self.gate.announcement(request, p, self.quorum.epoch, self.quorum.leader_id)
            if refusal is None:
                return p
            error, top = refusal, ErrorCode.none
        self.outbox.reply(handle, response(error, self.quorum.leader_field, self.quorum.epoch, top,
                                           where=self.config.partition))
        return None

    def on_begin_request(self, handle: Any, request: m.BeginQuorumEpochRequest, now: int) -> None:
        quorum = self.quorum
        p = self._checked(handle, request, m.begin_quorum_response)
        if p is None:
            return
        if p.leader_epoch > quorum.epoch or quorum.leader_id != p.leader_id:
            quorum.become_follower(p.leader_epoch, p.leader_id, now)
        self.outbox.reply(handle, m.begin_quorum_response(ErrorCode.none, quorum.leader_field, quorum.epoch,
                                                          where=self.config.partition))

    def on_end_request(self, handle: Any, request: m.EndQuorumEpochRequest, now: int) -> None:
        quorum = self.quorum
        p = self._checked(handle, request, m.end_quorum_response)
        if p is None:
            return
        if p.leader_epoch > quorum.epoch or quorum.leader_id is None:
            # As Kafka: a voter that knew no leader of this epoch follows the one resigning,
            # so that its successors' order applies to it too.
            quorum.become_follower(p.leader_epoch, p.leader_id, now)
        follower = quorum.state
        if isinstance(follower, Follower) and quorum.leader_id == p.leader_id:
            successors = list(p.preferred_successors)
            position = successors.index(self.node_id) if self.node_id in successors else len(successors)
            backoff = successor_backoff(position, len(successors), self.config.election_backoff_max_ms)
            follower.fetch_deadline = min(follower.fetch_deadline, now + backoff)
            follower.leader_resigned = True
        self.outbox.reply(handle, m.end_quorum_response(ErrorCode.none, quorum.leader_field, quorum.epoch,
                                                        where=self.config.partition))

    # ---------------------------------------------------------------- responses

    def read_response(self, source: int, response: m.RaftResponse, now: int) -> Any:
        """What Vote, BeginQuorumEpoch and EndQuorumEpoch responses share: the partition,
        or None when the request failed (retried after the backoff) or the answer named
        a newer leader (now followed)."""
        p = m.partition_of(response, self.config.partition)
        self.gate.refused_as_foreign(source, response)
        if response.error_code != ErrorCode.none or p is None:
            self.outbox.back_off(source, now)
            return None
        if self.quorum.learn_leader(p.leader_id, p.leader_epoch, now):
            return None
        return p

    def on_begin_response(self, source: int, response: m.BeginQuorumEpochResponse, now: int) -> None:
        p = self.read_response(source, response, now)
        if p is not None and p.error_code != ErrorCode.none:
            self.outbox.back_off(source, now)

    def on_end_response(self, source: int, response: m.EndQuorumEpochResponse, now: int) -> None:
        p = self.read_response(source, response, now)
        resigned = self.quorum.state
        if p is not None and isinstance(resigned, Resigned) and p.error_code == ErrorCode.none:
            resigned.end_quorum_acked.add(source)


def successor_backoff(position: int, successors: int, backoff_max_ms: int) -> int:
    """How long the successor at `position` waits before it campaigns (Kafka's strict
    exponential backoff): the first at once, the last (or one not named) the whole backoff,
    the others doubling up to it from backoff_max / 2^(successors - 1)."""
    if position == 0:
        return 0
    if position >= successors:
        return backoff_max_ms
    return min(backoff_max_ms, (backoff_max_ms >> (successors - 1)) << (position - 1))
