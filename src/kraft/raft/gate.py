"""What the core refuses before acting on a message, and how it says so.

A quorum's peers are not all friendly or well: another cluster's node, a request that cannot
be right (a Vote whose last epoch is at or above the one it campaigns in), an epoch in the
reserve no election reaches. Each check here answers the error Kafka answers, and each kind
of refusal is logged once (a hostile peer repeats itself) or at most once a minute (a retry
loop repeats itself), so the log stays readable under attack.
"""

import logging

from kio.schema.errors import ErrorCode

from kraft.raft import messages as m
from kraft.raft.raft_config import RaftConfig
from kraft.raft.voters import Voters

log = logging.getLogger("kraft.raft")

# Epochs are int32 on the wire, and each election takes the next one. A request may move a
# replica to a newer epoch, but never into the last 2^16: one request naming 2^31-1 was
# granted once, after which no voter could campaign again (the next epoch does not fit),
# and the cluster could not serve even after a restart. 2^31 - 2^16 elections do not
# happen; the core's own elections may still use the reserve, one at a time.
MAX_EPOCH = 2**31 - 1
MAX_REQUESTED_EPOCH = MAX_EPOCH - 2**16
_THROTTLE_MS = 60_000
_MEMORY = 1000  # refusal kinds remembered; past that, lines repeat rather than memory grow


class Gate:
    def __init__(self, config: RaftConfig, voters: Voters) -> None:
        self.config = config
        self.voters = voters
        self.node_id = config.node_id
        self._foreign: set[int] = set()  # peers refusing our cluster id
        self._said: set[object] = set()
        self._throttled: dict[object, int] = {}  # key -> when last logged

    def once(self, key: object, level: int, message: str, *args: object) -> None:
        """Hostile or broken peers repeat themselves: one line per kind of refusal."""
        if key not in self._said:
            if len(self._said) < _MEMORY:
                self._said.add(key)
            log.log(level, message, *args)

    def throttled(self, key: object, now: int, level: int, message: str, *args: object) -> None:
        """A line that a retry loop would repeat every backoff: at most once a minute per key."""
        if now - self._throttled.get(key, -_THROTTLE_MS) >= _THROTTLE_MS:
            if len(self._throttled) > _MEMORY:
                self._throttled.clear()
            self._throttled[key] = now
            log.log(level, message, *args)

    def cluster_ok(self, request: m.RaftRequest) -> bool:
        theirs = getattr(request, "cluster_id", None)
        ours = self.config.cluster_id
        if theirs is None or ours is None or theirs == ours:
            return True
        # Said once per cluster id, quoted: the id is the sender's, any bytes at all.
        self.once(("cluster", theirs), logging.ERROR,
                  "node %d: refusing %s from cluster %r: this is cluster %s (INCONSISTENT_CLUSTER_ID)",
                  self.node_id, type(request).__name__, theirs, ours)
        return False

    def refused_as_foreign(self, source: int, response: m.RaftResponse) -> bool:
        """A peer answered INCONSISTENT_CLUSTER_ID: say so once; it will never accept us."""
        if response.error_code != ErrorCode.inconsistent_cluster_id:
            return False
        if source not in self._foreign:
            self._foreign.add(source)
            log.error(
                "node %d: node %d refuses our requests with INCONSISTENT_CLUSTER_ID: this node's cluster id %s "
                "is not the cluster's (check meta.properties)", self.node_id, source, self.config.cluster_id,
            )
        return True

    def out_of_reach(self, epoch: int, current_epoch: int, what: str) -> bool:
        """A newer epoch in the reserve (see MAX_REQUESTED_EPOCH): refused, said once."""
        if epoch <= current_epoch or epoch <= MAX_REQUESTED_EPOCH:
            return False
        self.once(("epoch", epoch), logging.ERROR,
                  "node %d: refusing %s naming epoch %d: epochs above %d are beyond what elections reach",
                  self.node_id, what, epoch, MAX_REQUESTED_EPOCH)
        return True

    def vote(self, request: m.VoteRequest, p: m.VoteRequestPartition, epoch: int) -> ErrorCode | None:
        """Why a Vote request is refused before it is considered (None: it is considered)."""
        # Kafka's check, before any other: a candidate bumped its epoch past every epoch in
        # its log, so a last epoch at or above the one it campaigns in is not a real log (a
        # pre-vote is asked in the asker's current epoch, which its log may have reached).
        newest_possible = p.replica_epoch if p.pre_vote else p.replica_epoch - 1
        if p.last_offset < 0 or p.last_offset_epoch < 0 or p.last_offset_epoch > newest_possible:
            return ErrorCode.invalid_request
        if request.voter_id not in (-1, self.node_id):  # meant for another voter
            return ErrorCode.invalid_voter_key
        if p.replica_epoch < epoch:
            return ErrorCode.fenced_leader_epoch
        if p.replica_id < 0 or p.replica_id == self.node_id or self.out_of_reach(
                p.replica_epoch, epoch, type(request).__name__):
            return ErrorCode.invalid_request
        if not self.voters.is_dynamic and not (self.voters.contains(self.node_id) and self.voters.contains(p.replica_id)):
            # A static quorum's voters are fixed. A dynamic one's may not have reached this
            # replica yet, so, as Kafka 3.9+, any candidate is answered: it counts only the
            # votes of its own voter set.
            return ErrorCode.inconsistent_voter_set
        return None

    def announcement(self, request: m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest,
                     p: m.LeaderAnnouncement, epoch: int, leader_id: int | None) -> ErrorCode | None:
        """Why a BeginQuorumEpoch or EndQuorumEpoch is refused (None: it is from our leader,
        or a newer one)."""
        if p.leader_epoch < epoch:
            return ErrorCode.fenced_leader_epoch
        if p.leader_id < 0 or p.leader_id == self.node_id or self.out_of_reach(
                p.leader_epoch, epoch, type(request).__name__):
            # This replica knows whether it leads: a message naming it is not from a leader.
            return ErrorCode.invalid_request
        if not self.voters.is_dynamic and not (self.voters.contains(self.node_id) and self.voters.contains(p.leader_id)):
            return ErrorCode.inconsistent_voter_set
        if p.leader_epoch == epoch and leader_id is not None and leader_id != p.leader_id:
            # Raft elects one leader per epoch; a second claim is refused, not followed.
            self.once(("claim", p.leader_epoch, p.leader_id), logging.ERROR,
                      "node %d: refusing %s: node %d claims epoch %d, whose leader is node %d",
                      self.node_id, type(request).__name__, p.leader_id, p.leader_epoch, leader_id)
            return ErrorCode.invalid_request
        return None

    def fetch_is_valid(self, request: m.FetchRequest, p: m.FetchRequestPartition) -> bool:
        """As Kafka, a Fetch that cannot be right is refused before its epoch is looked at."""
        return not (
            request.max_wait.total_seconds() < 0
            or request.replica_state.replica_id == self.node_id
            or p.fetch_offset < 0
            or p.last_fetched_epoch < 0
            or p.last_fetched_epoch > p.current_leader_epoch
        )
