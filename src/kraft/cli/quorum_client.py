"""The network side of `kraft metadata-quorum`: connections that know what the node
serves, finding the leader, and asking it (DescribeQuorum; KIP-853's AddRaftVoter and
RemoveRaftVoter).

Every connection asks ApiVersions first, as Kafka's clients do, so the tool sends each API at
a version the node serves and says so in one line when it serves none (a static-quorum node
of an older build has no AddRaftVoter). Every wait has the request timeout as its bound: a
node that does not answer is an error line, never a hang.

Where requests go, as Kafka's admin client sends them: with --bootstrap-controller, to the
active controller, which DescribeCluster on a controller listener names (KIP-919); with
--bootstrap-server, to the broker asked (Kafka's brokers forward AddRaftVoter and
RemoveRaftVoter to the active controller). DescribeQuorum is answered by the leader only;
a node that does not lead names it, and the tool asks it there.
"""

import asyncio
import time
from typing import Any

from kraft.cli.admin_connection import UNREACHABLE, ClientSettings, NodeConnection, ToolError, first_answering
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.raft import messages as m
from kraft.raft.membership_messages import ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, MembershipRequest, response_error
from kraft.server.runtime.peer_versions import NoCommonVersion, PeerVersions

DESCRIBE_QUORUM, DESCRIBE_CLUSTER = 55, 60
DESCRIBE_CLUSTER_VERSION = 1  # v1: EndpointType (KIP-919)
BROKERS, CONTROLLERS = 1, 2  # DescribeCluster's endpoint types
API_NAMES = {ADD_RAFT_VOTER: "AddRaftVoter", REMOVE_RAFT_VOTER: "RemoveRaftVoter", DESCRIBE_QUORUM: "DescribeQuorum"}
# Answers that mean "ask the leader, which has moved": found again until the time is up.
LEADER_MOVED = (ErrorCode.not_controller, ErrorCode.not_leader_or_follower)
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
QUORUM_SETTINGS = ClientSettings(client_id="kraft-metadata-quorum", request_timeout_s=10.0)


def require(node: NodeConnection, api_key: int, version: int) -> None:
    """ToolError unless the node serves `api_key` at `version`."""
    if node.highest(api_key, range(version, version + 1)) is None:
        served = node.versions.get(api_key)
        what = f"only v{served[0]}-v{served[1]}" if served else f"no API key {api_key}"
        raise ToolError(f"the node at {node.where} does not support {API_NAMES.get(api_key, api_key)} "
                        f"v{version} (its ApiVersions lists {what}): it runs a build without KIP-853's "
                        "dynamic quorum")


def in_a_version_served(node: NodeConnection, request: MembershipRequest) -> Any:
    """`request` in the nearest version `node` serves, as Kafka's admin client picks it: the
    tool's AddRaftVoter v1 asks AckWhenCommitted true, which is what v0 means, so a controller
    serving v0 alone (Kafka 4.0 and 4.1) gets v0. ToolError if it serves the API in no version."""
    try:
        return PeerVersions(node.versions).outgoing(request)
    except NoCommonVersion:
        require(node, type(request).__api_key__, type(request).__version__)
        raise


async def _first_answering(bootstrap: list[tuple[str, int]], endpoint_type: int,
                           settings: ClientSettings) -> NodeConnection:
    return await first_answering(bootstrap, settings, "controller" if endpoint_type == CONTROLLERS else "server")


async def _endpoint_of(node: NodeConnection, node_id: int, endpoint_type: int) -> tuple[str, int]:
    """Where `node_id` listens, as `node`'s DescribeCluster lists it."""
    cluster = await node.ask(build_request(DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_VERSION, {
        "include_cluster_authorized_operations": False, "endpoint_type": endpoint_type}))
    found = next((b for b in cluster.brokers if b.broker_id == node_id), None)
    if found is None:
        kind = "controllers" if endpoint_type == CONTROLLERS else "brokers"
        raise ToolError(f"the leader, node {node_id}, is not among the {kind} {node.where} lists")
    return found.host, found.port


async def describe(bootstrap: list[tuple[str, int]], endpoint_type: int,
                   settings: ClientSettings = QUORUM_SETTINGS) -> tuple[str, Any, tuple[Any, ...]]:
    """(cluster id, the leader's DescribeQuorum partition, the voters' endpoints if the
    answer has them), asked at the highest version both ends speak (v2 names directory ids
    and endpoints)."""
    node = await _first_answering(bootstrap, endpoint_type, settings)
    try:
        cluster = await node.ask(build_request(DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_VERSION, {
            "include_cluster_authorized_operations": False, "endpoint_type": endpoint_type}))
        response = await _describe_quorum(node)
        quorum = response.topics[0].partitions[0]
        if quorum.error_code == ErrorCode.not_leader_or_follower and quorum.leader_id >= 0:
            leader = await NodeConnection.open(await _endpoint_of(node, quorum.leader_id, endpoint_type), settings)
            try:
                response = await _describe_quorum(leader)
            finally:
                leader.close()
            quorum = response.topics[0].partitions[0]
    except UNREACHABLE as e:
        raise ToolError(f"DescribeQuorum: {e}") from None
    finally:
        node.close()
    if quorum.error_code != ErrorCode.none:
        message = getattr(quorum, "error_message", None)
        raise ToolError(f"DescribeQuorum: {quorum.error_code.name.upper()}" + (f": {message}" if message else ""))
    return cluster.cluster_id, quorum, tuple(getattr(response, "nodes", ()))


async def _describe_quorum(node: NodeConnection) -> Any:
    version = node.highest(DESCRIBE_QUORUM, range(0, 3))
    if version is None:
        require(node, DESCRIBE_QUORUM, 2)
    request = m.describe_quorum_request()
    if version != m.DescribeQuorumRequest.__version__:
        request = build_request(DESCRIBE_QUORUM, version or 0, {"topics": [
            {"topic_name": m.METADATA_TOPIC, "partitions": [{"partition_index": m.METADATA_PARTITION}]}]})
    return await node.ask(request)


async def _leader_connection(bootstrap: list[tuple[str, int]], endpoint_type: int,
                             settings: ClientSettings) -> NodeConnection:
    """Where a membership change is sent: the active controller (through controllers) or
    the broker that answers (through brokers, which forward it)."""
    node = await _first_answering(bootstrap, endpoint_type, settings)
    if endpoint_type == BROKERS:
        return node
    try:
        cluster = await node.ask(build_request(DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_VERSION, {
            "include_cluster_authorized_operations": False, "endpoint_type": CONTROLLERS}))
        if cluster.controller_id < 0:
            raise ConnectionError(f"{node.where} knows no active controller yet")
        address = await _endpoint_of(node, cluster.controller_id, CONTROLLERS)
    except BaseException:
        node.close()
        raise
    if address == node.address:
        return node
    node.close()
    return await NodeConnection.open(address, settings)


async def change_voters(bootstrap: list[tuple[str, int]], endpoint_type: int, request: MembershipRequest,
                        settings: ClientSettings = QUORUM_SETTINGS, wait_s: float | None = None) -> None:
    """Sends AddRaftVoter or RemoveRaftVoter where Kafka's admin client would, again to the
    new active controller while the answer says it moved, until `wait_s` (the request
    timeout) is spent. ToolError in one line for every other outcome than success:
    the node does not serve the API, the leader's error (UNSUPPORTED_VERSION for a static
    quorum, DUPLICATE_VOTER, VOTER_NOT_FOUND, REQUEST_TIMED_OUT...) with its message, or no
    answer in time."""
    api_key = type(request).__api_key__
    name = API_NAMES[api_key]
    wait_s = settings.request_timeout_s if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    last = "no answer"
    while True:
        left = deadline - time.monotonic()
        try:
            node = await asyncio.wait_for(_leader_connection(bootstrap, endpoint_type, settings), max(left, 0.001))
            try:
                sent = in_a_version_served(node, request)
                # The leader answers within the request's own timeout; wait a little longer
                # for that answer rather than cut it off.
                response = await node.ask(sent, max(left, 0.001) + 1.0)
            finally:
                node.close()
            error, message = response_error(response)
            if error == ErrorCode.none:
                return
            last = error.name.upper() + (f": {message}" if message else "")
            if error not in LEADER_MOVED:
                raise ToolError(f"{name} failed with {last}")
        except TimeoutError:
            last = f"REQUEST_TIMED_OUT: no answer within {wait_s * 1000:.0f} ms (request.timeout.ms)"
        except (OSError, ConnectionError, ValueError) as e:
            last = str(e)
        if time.monotonic() + RETRY_BACKOFF_S >= deadline:
            raise ToolError(f"{name} failed: {last}")
        await asyncio.sleep(RETRY_BACKOFF_S)
