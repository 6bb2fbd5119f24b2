"""Every version Kafka defines of the KRaft RPCs, answered by a core that speaks one of each.

The Raft core reads and writes one kio class per RPC (raft/messages.py); the node's table
RAFT_APIS names those versions. A request in another version is converted to the core's
class on the way in and the core's answer back to the version asked on the way out
(kraft.protocol.build.convert): fields the other version lacks are dropped, fields it
lacks are given Kafka's value for an absent field (below). A request in the core's own
version goes through untouched, so what kraft nodes send each other (peers.py sends the
core's versions) costs nothing here.

What each version adds, from Kafka's message schemas:
- Vote v1 (KIP-853): the voter's id, candidate and voter directory ids, the leader's endpoints
  in the answer; v2 (KIP-996): PreVote.
- BeginQuorumEpoch v1, EndQuorumEpoch v1 (KIP-853): the voter's id and directory id, the
  leader's endpoints, EndQuorumEpoch's successors as (id, directory id) candidates; the
  leader's endpoints in the answer.
- Fetch v13 (topic ids) is the oldest a KRaft leader accepts: below it topics are named, and
  Kafka's leader, which checks the topic id, answers them INVALID_REQUEST; so kraft does not
  advertise them. v14 changes nothing here (tiered storage's error), v15 (KIP-903) carries the
  replica as ReplicaState (id, broker epoch), v16 (KIP-951) has endpoints in the answer,
  v17 (KIP-853) the replica's directory id; Kafka's KRaft leader names itself in the
  answer's endpoints from v17 on, and so does kraft. v18 (KIP-1166) the replica's high
  watermark, which the core speaks: a parked Fetch is answered once the leader's is ahead.
- FetchSnapshot v1 (KIP-853): the replica's directory id; the leader's endpoints in the answer.
- DescribeQuorum v1: fetch and caught-up times; v2 (KIP-853): directory ids, error messages,
  and every voter's endpoints.

The endpoints a node gives are the ones it knows: controller.quorum.voters, or a dynamic
quorum's latest voter set (KIP-853), under the controller listener's name. A static quorum has no directory ids, so every one given is the
zero id. A version above the core's is served only if nothing it can say would be lost on
the way to the core: Vote v2's PreVote cannot be dropped (a pre-vote taken as a vote would
move the voter to the candidate's epoch), so Vote v2 is served only by a core that speaks it.
"""

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from kraft.protocol import KafkaServer
from kraft.protocol.build import convert, field_names
from kraft.protocol.codec import request_class, response_class
from kraft.raft import messages as m
from kraft.server.apis import raft_fetch_answer
from kraft.server.settings.server_config import Endpoint, ServerConfig

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, FETCH_SNAPSHOT, DESCRIBE_QUORUM = 52, 53, 54, 1, 59, 55
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER = 80, 81, 82

# The versions Kafka 4.x's controller listener serves, by the names RAFT_APIS uses.
KAFKA_VERSIONS: dict[str, tuple[int, int, int]] = {
    "Vote": (VOTE, 0, 2),
    "BeginQuorumEpoch": (BEGIN_QUORUM_EPOCH, 0, 1),
    "EndQuorumEpoch": (END_QUORUM_EPOCH, 0, 1),
    "Fetch": (FETCH, 13, 18),
    "FetchSnapshot": (FETCH_SNAPSHOT, 0, 1),
    "DescribeQuorum": (DESCRIBE_QUORUM, 0, 2),
    "AddRaftVoter": (ADD_RAFT_VOTER, 0, 1),  # v1 (KIP-1186): AckWhenCommitted
    "RemoveRaftVoter": (REMOVE_RAFT_VOTER, 0, 0),
    "UpdateRaftVoter": (UPDATE_RAFT_VOTER, 0, 0),
}

# The RPCs kraft nodes send each other: the controller listener serves them, and only it.
PEER_RPCS = ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot", "AddRaftVoter", "RemoveRaftVoter",
             "UpdateRaftVoter")

# The zero directory id (Kafka's absent value) as kio holds it: it reads zero as None, and
# writes None as zero, or leaves a tagged field out, as Kafka leaves out a default.
NO_DIRECTORY = None

# Kafka's value for a field the version at hand lacks, per API: a constant, or a function of
# the entity that carries the same fact in another shape.
ABSENT: dict[int, dict[str, Any]] = {
    VOTE: {"replica_directory_id": NO_DIRECTORY, "voter_directory_id": NO_DIRECTORY, "pre_vote": False},
    BEGIN_QUORUM_EPOCH: {"voter_directory_id": NO_DIRECTORY, "leader_endpoints": ()},
    END_QUORUM_EPOCH: {
        "leader_endpoints": (),
        "preferred_successors": lambda p: tuple(c.candidate_id for c in p.preferred_candidates),
        "preferred_candidates": lambda p: [{"candidate_id": i, "candidate_directory_id": NO_DIRECTORY}
                                           for i in p.preferred_successors],
    },
    FETCH: {
        "high_watermark": m.NO_HIGH_WATERMARK,  # a fetcher older than v18 gives none: never answered early
        "replica_id": lambda r: r.replica_state.replica_id,
        "replica_state": lambda r: {"replica_id": r.replica_id, "replica_epoch": -1},  # a controller has no broker epoch
        "replica_directory_id": NO_DIRECTORY,
    },
    FETCH_SNAPSHOT: {"replica_directory_id": NO_DIRECTORY},
    DESCRIBE_QUORUM: {"error_message": None, "replica_directory_id": NO_DIRECTORY},
    ADD_RAFT_VOTER: {"ack_when_committed": True},  # v0 is answered once the change commits
    REMOVE_RAFT_VOTER: {},
    UPDATE_RAFT_VOTER: {},
}

# Request fields that change what the core must do, so a version holding one is served only
# by a core whose version holds it too, and a peer is never sent one in a version without it
# (a pre-vote taken for a vote; a controller adding itself answered only at the commit it
# may be needed for, KIP-1186).
NOT_DROPPABLE = frozenset({"pre_vote", "ack_when_committed"})

# The first version whose answer names the leader's endpoints, where it is not the first
# version that has the field (Fetch v16 has it for brokers; Kafka's KRaft leader fills it from v17).
ENDPOINTS_SINCE = {FETCH: 17}

Answer = Callable[[Any, Any], Awaitable[Any]]


def served_range(key: int, low: int, high: int, core: int) -> tuple[int, int]:
    """Kafka's range, up to the first version above the core's that says what the core cannot hear."""
    hears = field_names(request_class(key, core))
    top = core
    while top < high and NOT_DROPPABLE & field_names(request_class(key, top + 1)) <= hears:
        top += 1
    return low, top


class RaftVersions:
    """The conversions for one node: its core's versions (RAFT_APIS) and its voters' endpoints."""

    def __init__(self, config: ServerConfig, core_versions: Mapping[str, tuple[int, int]],
                 voters: Callable[[], Mapping[int, Endpoint]],
                 directories: Callable[[], Mapping[int, uuid.UUID]] = dict,
                 endpoint_of: Callable[[int], Endpoint | None] | None = None) -> None:
        """`voters`: the voters' controller endpoints now (controller.quorum.voters, or the
        latest voter set in the log of a dynamic quorum); `directories`: their directory ids
        (KIP-853; none in a static quorum); `endpoint_of`: where this node knows a leader to
        be, voter or not (default: among `voters`). An observer that has not yet replicated
        the voter set still knows its leader from its own discovery, and names it as Kafka's
        replicas name the leader they know: a node bootstrapping through it must not learn a
        leader id it cannot reach."""
        self.config = config
        self.voters = voters
        self.directories = directories
        self.endpoint_of = endpoint_of or (lambda node_id: self.voters().get(node_id))
        self.core: dict[str, int] = {}
        self.served: dict[str, tuple[int, int]] = {}
        for name, (key, low, high) in KAFKA_VERSIONS.items():
            core_key, version = core_versions[name]
            if core_key != key or not low <= version <= high:
                raise ValueError(f"the core's {name} is API {core_key} v{version}; Kafka's is API {key} v{low}-v{high}")
            self.core[name] = version
            self.served[name] = served_range(key, low, high, version)

    def register(self, server: KafkaServer, name: str, answer: Answer, name_leader: bool = True) -> None:
        """Serves every version of `name` that can be, each through `answer`, which takes and
        returns the core's version. `name_leader`: whether answers name the leader's controller
        endpoint (on the client listener they do not: Kafka names the leader's endpoint on the
        listener the request came in on, and a client would not reach the controller one)."""
        key = KAFKA_VERSIONS[name][0]
        core = self.core[name]
        core_request = request_class(key, core)
        # The core's answer needs nothing here: a kraft follower's Fetch, each time.
        as_it_is = not field_names(response_class(key, core)) & {"node_endpoints", "nodes"}

        async def handle(header: Any, request: Any) -> Any:
            version = header.request_api_version
            if version == core and as_it_is:
                return await answer(header, request)
            if version != core:
                request = convert(request, core_request, ABSENT[key])
            return self._answer_in(key, version, await answer(header, request), name_leader)

        async def handle_fetch(header: Any, request: Any) -> Any:
            """Fetch, the answer every follower and observer gets on every commit: written as
            bytes (raft_fetch_answer.py), not converted and encoded through kio."""
            version = header.request_api_version
            if version != core:
                request = convert(request, core_request, ABSENT[key])
            got = await answer(header, request)
            endpoints = self._endpoints(key, version, got, name_leader)
            return raft_fetch_answer.encode(got, version, [(e["node_id"], e["host"], e["port"]) for e in endpoints])

        low, high = self.served[name]
        if key == FETCH and not raft_fetch_answer.FIRST_VERSION <= low <= high <= raft_fetch_answer.LAST_VERSION:
            # Fails at start, not on every follower's Fetch (a v18 that raft_fetch_answer did
            # not write closed each follower's connection, and no leader ever committed).
            raise ValueError(f"Fetch v{low}-v{high} is served, but raft_fetch_answer writes "
                             f"v{raft_fetch_answer.FIRST_VERSION}-v{raft_fetch_answer.LAST_VERSION}")
        server.register(key, low, high, handle_fetch if key == FETCH else handle)

    def _endpoints(self, key: int, version: int, answer: Any, name_leader: bool) -> list[dict[str, Any]]:
        """The leader's endpoint an answer in `version` names: the one this node knows, on
        the controller listener only, from the version that names it."""
        leader = _leader_of(answer)
        endpoint = self.endpoint_of(leader) if name_leader and leader >= 0 else None
        if endpoint is None or version < ENDPOINTS_SINCE.get(key, 0):
            return []
        return [{"node_id": leader, "host": endpoint.host, "port": endpoint.port}]

    def _answer_in(self, key: int, version: int, answer: Any, name_leader: bool = True) -> Any:
        """The core's `answer` in `version`, with the endpoints this node knows."""
        cls = response_class(key, version)
        fields = field_names(cls)
        given: dict[str, Any] = {}
        if "node_endpoints" in fields:
            given["node_endpoints"] = self._endpoints(key, version, answer, name_leader)
        if "nodes" in fields:  # DescribeQuorum v2: every voter
            listener = self.config.controller_listener_names[0]
            given["nodes"] = [{"node_id": n, "listeners": [{"name": listener, "host": ep.host, "port": ep.port}]}
                              for n, ep in sorted(self.voters().items())]
        converted = convert(answer, cls, ABSENT[key], given)
        if key == DESCRIBE_QUORUM and version >= 2:
            converted = self._with_directories(converted)
        return converted

    def _with_directories(self, answer: Any) -> Any:
        """DescribeQuorum v2 names each voter's directory id, which the core's v1 lacks."""
        directories = self.directories()
        if not directories:
            return answer

        def voters(p: Any) -> Any:
            states = tuple(replace(v, replica_directory_id=directories.get(v.replica_id, NO_DIRECTORY))
                           for v in p.current_voters)
            return replace(p, current_voters=states)

        topics = tuple(replace(t, partitions=tuple(voters(p) for p in t.partitions)) for t in answer.topics)
        return replace(answer, topics=topics)


def _leader_of(answer: Any) -> int:
    """The leader an answer names (-1 if none): a partition's leader_id, or its current_leader."""
    found = m.single(answer)
    if found is None:
        return -1
    p = found[1]
    current = getattr(p, "current_leader", None)
    return current.leader_id if current is not None else p.leader_id
