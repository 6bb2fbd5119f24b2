"""Outbound connections to the other voters, for the core's requests.

Connections per peer, because a server answers the requests on one connection in order:
one for the Fetch naming every partition this node follows on that peer (fetch_batch.py), one
for each partition's replication alone (a Fetch or FetchSnapshot naming only it: the metadata
partition's, each `__consumer_offsets` partition's), one for a FetchSnapshot naming several
partitions (fetch_snapshot_batch.py) and one for elections (Vote, BeginQuorumEpoch,
EndQuorumEpoch, of every partition; answered at once). A follower's Fetch may be parked at
its leader for up to its max wait; on a shared connection a Vote or an EndQuorumEpoch
answer, or another partition's Fetch, would wait behind it, and an election or that
partition's replication would take that much longer. The cores of all partitions share
these connections.

Each connection is made on first use and made again after it breaks, with an exponential
backoff between attempts to reach the peer (reconnect.backoff.ms 50 to
reconnect.backoff.max.ms 1000, Kafka's defaults, but at most a quarter of the election
timeout: a voter that restarts without knowing the leader campaigns after one election
timeout, and without PreVote its new epoch unseats a healthy leader, so the leader must
reach it before then). The backoff is the peer's, shared by all its connections: whether
the peer can be reached is one fact. A request that cannot be sent (no connection, or
one not to be tried again yet), or whose connection breaks, is reported to the core as a
send failure at once; the core decides when to try again.

Where a peer is, is asked of the node when it is first sent to (and again if it moved): a
voter of controller.quorum.voters or of a dynamic quorum's voter set (KIP-853), or one of
controller.quorum.bootstrap.servers (ids -2, -3, ...). A Fetch answer from a bootstrap server
(v17 on) names the leader's endpoint: how a node that knows no voter finds its leader.

Each connection starts with ApiVersions, and each request goes in the version nearest the
core's that the peer serves (peer_versions.py), so nodes of two builds speak during a
rolling upgrade.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kraft.protocol.connection import KafkaConnection
from kraft.protocol.tasks import cancel_and_wait
from kraft.raft import messages as m
from kraft.server.runtime.peer_versions import NoCommonVersion, PeerVersions, api_versions_request
from kraft.server.settings.listener_security import ControllerConnector
from kraft.server.settings.server_config import Endpoint

log = logging.getLogger("kraft.server.peers")

RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000

REPLICATION, SNAPSHOTS, ELECTION = "replication", "snapshots", "election"


def channel_of(request: Any) -> str:
    """Which of a peer's connections carries `request`."""
    if not isinstance(request, (m.FetchRequest, m.FetchSnapshotRequest)):
        return ELECTION
    named = m.named(request)
    if named is None:
        return REPLICATION if isinstance(request, m.FetchRequest) else SNAPSHOTS
    return f"{REPLICATION} {named[0]}-{named[1]}"


class _Channel:
    """One connection to a peer, and the attempt to make it, if one is under way."""

    def __init__(self) -> None:
        self.connection: KafkaConnection | None = None
        self.versions = PeerVersions({})  # what the peer serves, asked first on each connection
        self.connecting: asyncio.Task | None = None


class Peer:
    def __init__(self, node_id: int, endpoint: Endpoint, client_id: str, backoff_max_ms: int,
                 connector: ControllerConnector) -> None:
        self.node_id = node_id
        self.connector = connector
        self.backoff_max_ms = backoff_max_ms
        self.endpoint = endpoint
        self.client_id = client_id
        self.channels: dict[str, _Channel] = {}  # made on first use
        self._failures = 0
        self._next_attempt = 0.0
        self._unsendable: set[str] = set()  # what the peer's versions cannot carry, said once each

    async def connected(self, channel_name: str) -> _Channel:
        channel = self.channels.setdefault(channel_name, _Channel())
        if channel.connection is not None and not channel.connection.closed:
            return channel
        if channel.connecting is None:
            channel.connecting = asyncio.create_task(self._connect(channel))
        try:
            return await asyncio.shield(channel.connecting)
        finally:
            if channel.connecting is not None and channel.connecting.done():
                channel.connecting = None

    async def _connect(self, channel: _Channel) -> _Channel:
        wait = self._next_attempt - time.monotonic()
        if wait > 0:
            # Fail now rather than hold the request through the backoff: the core learns at
            # once that the peer is unreachable (a candidate counts that, see RaftCore), and
            # the next attempt to connect still waits for the backoff to pass.
            raise ConnectionError(f"node {self.node_id} at {self.endpoint}: unreachable, next attempt in "
                                  f"{wait * 1000:.0f} ms")
        try:
            channel.connection = await self.connector.connect(self.endpoint, self.client_id, timeout=2.0)
            channel.versions = PeerVersions.of(await channel.connection.request(api_versions_request(), 2.0))
        except (TimeoutError, OSError) as e:
            if channel.connection is not None:
                channel.connection.close()
            self._failures += 1
            backoff = min(self.backoff_max_ms, RECONNECT_BACKOFF_MS * 2 ** (self._failures - 1)) / 1000
            self._next_attempt = time.monotonic() + backoff
            if self._failures in (1, 10) or self._failures % 100 == 0:
                log.info("cannot reach node %d at %s (%s); retrying", self.node_id, self.endpoint, e)
            raise ConnectionError(f"node {self.node_id} at {self.endpoint}: {e}") from None
        if self._failures:
            log.info("connected to node %d at %s", self.node_id, self.endpoint)
        self._failures = 0
        return channel

    def refused(self, error: BaseException) -> None:
        """A send that failed; one the peer's versions cannot carry is logged, once."""
        if isinstance(error, NoCommonVersion) and str(error) not in self._unsendable:
            self._unsendable.add(str(error))
            log.warning("not sent to node %d at %s: %s", self.node_id, self.endpoint, error)

    def close(self) -> list[asyncio.Task]:
        """Closes its connections; returns the attempts to connect still under way, to be
        cancelled and waited for (a TLS handshake or a login takes several round trips)."""
        attempts = []
        for channel in self.channels.values():
            if channel.connection is not None:
                channel.connection.close()
            if channel.connecting is not None:
                attempts.append(channel.connecting)
        return attempts


class Peers:
    def __init__(self, endpoint_of: Callable[[int], Endpoint | None], client_id: str, request_timeout_ms: int,
                 election_timeout_ms: int, connector: ControllerConnector = ControllerConnector()) -> None:
        """`endpoint_of`: where a node is (None: unknown); asked the first time a node is sent
        to, and again if its endpoint changed. `connector`: the controller listener's TLS and
        login (plain TCP by default)."""
        self.endpoint_of = endpoint_of
        self.client_id = client_id
        self.connector = connector
        self.backoff_max_ms = max(RECONNECT_BACKOFF_MS, min(RECONNECT_BACKOFF_MAX_MS, election_timeout_ms // 4))
        self._peers: dict[int, Peer] = {}
        self.learned: dict[int, Endpoint] = {}  # leaders' endpoints named in Fetch answers (KIP-853)
        self.request_timeout_s = request_timeout_ms / 1000
        self._tasks: set[asyncio.Task] = set()

    def _peer(self, node_id: int) -> Peer | None:
        endpoint = self.endpoint_of(node_id)
        if endpoint is None:
            return None
        peer = self._peers.get(node_id)
        if peer is None or peer.endpoint != endpoint:
            if peer is not None:
                for attempt in peer.close():
                    attempt.cancel()
            peer = self._peers[node_id] = Peer(node_id, endpoint, self.client_id, self.backoff_max_ms, self.connector)
        return peer

    def send(
        self,
        destination: int,
        request: Any,
        on_response: Callable[[Any], None],
        on_failure: Callable[[], None],
        extra_timeout_ms: int = 0,
    ) -> None:
        peer = self._peer(destination)
        if peer is None:
            log.error("no endpoint for node %d; not a voter this node knows", destination)
            asyncio.get_running_loop().call_soon(on_failure)
            return
        task = asyncio.create_task(self._send(peer, request, on_response, on_failure, extra_timeout_ms))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, peer: Peer, request: Any, on_response, on_failure, extra_timeout_ms: int) -> None:
        try:
            channel = await peer.connected(channel_of(request))
            assert channel.connection is not None
            timeout_s = self.request_timeout_s + extra_timeout_ms / 1000
            answer = await channel.connection.request(channel.versions.outgoing(request), timeout_s)
        except (TimeoutError, ConnectionError, OSError) as e:
            peer.refused(e)
            on_failure()
            return
        if peer.node_id <= -2 and isinstance(request, m.FetchRequest):
            # A bootstrap server's answer names the leader's endpoint (Fetch v17 on, KIP-853):
            # how a node that knows no voter learns where its leader is.
            for node in getattr(answer, "node_endpoints", ()):
                self.learned[node.node_id] = Endpoint(node.host, node.port)
        on_response(PeerVersions.incoming(answer, request))

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        await cancel_and_wait([attempt for peer in self._peers.values() for attempt in peer.close()])
