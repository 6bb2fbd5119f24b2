"""A node's listeners and outbound peer connections, in this process so what happens inside
can be seen: FetchSnapshot chunks leave by os.sendfile, bad frames on the controller
listener cost only their own connection, and a peer's Vote never queues behind its Fetch."""

import asyncio
import os
import socket
import struct
import threading
from pathlib import Path

import pytest

from kraft.cli.cluster_client import create_topic, request, run_async
from kraft.cli.local_cluster import LOCAL_DEFAULTS, free_port
from kraft.protocol import ErrorCode, KafkaServer, decode_response, encode_request, response_class, server
from kraft.protocol.build import convert
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m
from kraft.server.apis.raft_versions import ABSENT, FETCH
from kraft.server.runtime.node import PARTITION_DIR, KraftNode
from kraft.server.runtime.peers import Peers
from kraft.server.settings.server_config import Endpoint, load_config
from kraft.storage import parse_snapshot_file_name
from kraft.storage.meta_properties import format_storage

from .cluster_helpers import wait_for

OBSERVER_ID = 9  # a replica the node has never heard of fetches as an observer would


class NodeThread:
    """A one-voter node on its own event loop thread, so blocking clients can talk to it."""

    def __init__(self, directory: Path, overrides: dict[str, str]) -> None:
        self.controller_port, self.client_port = free_port(), free_port()
        self.config = load_config({
            "node.id": "1",
            "process.roles": "broker,controller",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port},PLAINTEXT://127.0.0.1:{self.client_port}",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(directory),
            "kraft.metrics.port": "-1",
            **LOCAL_DEFAULTS,
            **overrides,
        })
        format_storage(directory, "MkU3OEVBNTcwNTJENDM2Qk", 1)
        self.partition_dir = directory / PARTITION_DIR
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node = self.call(self._start())

    async def _start(self) -> KraftNode:
        node = KraftNode(self.config)
        await node.start()
        return node

    def call(self, coroutine):  # noqa: ANN001, ANN201
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    def close(self) -> None:
        self.call(self.node.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_a_fetch_snapshot_chunk_goes_from_file_to_socket_by_sendfile_unless_it_is_small(node, monkeypatch):
    # Topics until the first snapshot is written, and no more: the log does not grow enough
    # for a second one, which would replace the first while it is being fetched.
    for i in range(100):
        if list(node.partition_dir.glob("*.checkpoint")):
            break
        assert create_topic(node.client_port, f"snap-{i}", 2).error_code == ErrorCode.none
    [path] = node.partition_dir.glob("*.checkpoint")
    snapshot_id = parse_snapshot_file_name(path.name)
    content = path.read_bytes()

    sent_from_snapshot = []  # bytes os.sendfile moved out of the snapshot file
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd, in_fd, offset, count):  # noqa: ANN001, ANN202
        sent = real_sendfile(out_fd, in_fd, offset, count)
        if os.fstat(in_fd).st_ino == path.stat().st_ino:
            sent_from_snapshot.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    position = len(content) // 3
    q = quorum(node.client_port)
    assert q.error_code == ErrorCode.none
    ask = m.fetch_snapshot_request(node.node.cluster_id, OBSERVER_ID, q.leader_epoch,
                                   (snapshot_id.end_offset, snapshot_id.epoch), position, 1 << 20)

    async def fetch_snapshot():  # noqa: ANN202
        conn = await KafkaConnection.connect("127.0.0.1", node.controller_port)
        try:
            return await conn.request(ask, 10)
        finally:
            conn.close()

    # The file is renamed into place before the store lists it: ask until it does.
    answers = []
    wait_for(lambda: answers.append(run_async(fetch_snapshot()).topics[0].partitions[0])
             or answers[-1].error_code != ErrorCode.snapshot_not_found, what="the snapshot listed by its store")
    p = answers[-1]
    assert (p.error_code, p.size, p.position) == (ErrorCode.none, len(content), position)
    assert bytes(p.unaligned_records) == content[position:]
    # This snapshot is about 1.5 KB: up to _INLINE_REGION_BYTES, a region is read and written
    # with its frame's bytes in one write (cheaper than a sendfile for a few hundred bytes).
    assert len(content) - position <= server._INLINE_REGION_BYTES and sent_from_snapshot == []
    monkeypatch.setattr(server, "_INLINE_REGION_BYTES", 0)
    p = run_async(fetch_snapshot()).topics[0].partitions[0]
    assert bytes(p.unaligned_records) == content[position:]
    assert sum(sent_from_snapshot) == len(content) - position, "the chunk was copied through Python"


def recv_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the node")
        data += chunk
    return bytes(data)


@pytest.mark.parametrize("bad", [
    pytest.param(struct.pack(">i", 1 << 30), id="oversized"),
    pytest.param(struct.pack(">ihhih", 20, 52, 0, 7, 3) + b"\xff" * 10, id="garbage-vote"),
    pytest.param(struct.pack(">ihhi", 8, 9999, 0, 7), id="unknown-api"),
])
def test_a_bad_frame_on_the_controller_listener_costs_only_its_connection(node, bad):
    wait_for(lambda: committed(quorum(node.client_port)), what="the node to lead and commit")
    q = quorum(node.client_port)
    # From the high watermark, not the log end: a one-voter node commits a record at its
    # fsync, so the log end may run ahead of it, and the answer's high watermark with it
    # (a loaded CI run: log end 2, the answer's high watermark 1).
    end = q.high_watermark
    fetch = m.fetch_request(node.node.cluster_id, OBSERVER_ID, q.leader_epoch, end, q.leader_epoch, 0, 5000, 1 << 20)
    with socket.create_connection(("127.0.0.1", node.controller_port), timeout=20) as fetcher, \
            socket.create_connection(("127.0.0.1", node.controller_port), timeout=20) as victim:
        fetcher.sendall(encode_request(fetch, correlation_id=41, client_id="observer"))  # parked: nothing new
        victim.sendall(bad)
        assert victim.recv(1) == b"", "the bad frame's connection is closed"
        # The parked Fetch is answered once there is something new: this topic.
        assert create_topic(node.client_port, "after-the-bad-frame").error_code == ErrorCode.none
        correlation_id, response = decode_response(recv_frame(fetcher), response_class(1, 13))
    p = response.responses[0].partitions[0]
    assert correlation_id == 41 and p.error_code == ErrorCode.none and p.high_watermark >= end
    for port in (node.client_port, node.controller_port):  # both listeners serve on
        assert quorum(port).high_watermark > end


def quorum(port: int):  # noqa: ANN201
    """The node's DescribeQuorum answer, asked on `port`."""
    return run_async(request(port, m.describe_quorum_request())).topics[0].partitions[0]


def committed(p) -> bool:  # noqa: ANN001
    """The node leads and has committed its first records."""
    return p.error_code == ErrorCode.none and p.high_watermark > 0


DEADLINE_S = 60  # a wait that runs out is a failure of the test, never a hang until pytest's timeout


def peer_sends(register, sends, server_class=KafkaServer) -> list[str]:  # noqa: ANN001
    """What a node's Peers report (answered or failed, by name) of the requests `sends(peers,
    done, events)` makes to a test server `register(server)` set up; `done(name)` gives a
    send's callbacks, which record it in `events`."""
    events: list[str] = []

    async def run() -> None:
        server = server_class()
        register(server)
        host, port = await server.start()
        peers = Peers({2: Endpoint(host, port)}.get, "node-1", request_timeout_ms=3000, election_timeout_ms=1000)
        try:
            def done(what: str):  # noqa: ANN202
                return (lambda response: events.append(what)), (lambda: events.append(f"{what} failed"))

            await asyncio.wait_for(sends(peers, done, events), DEADLINE_S)
        finally:
            await peers.close()
            await server.close()

    asyncio.run(run())
    return events


async def answered(events: list[str], count: int) -> None:
    while len(events) < count:
        await asyncio.sleep(0.01)


def test_a_peer_vote_is_answered_while_its_fetch_is_parked():
    """A server answers one connection's requests in order; if a Vote shared the Fetch's
    connection it would wait for the parked Fetch, which here waits for the Vote. The
    server serves Fetch v13 only, as a node of an older build: the core's Fetch (v18) goes to
    it in v13 (it refused v18 by closing the connection)."""
    fetch_arrived, vote_answered = asyncio.Event(), asyncio.Event()
    fetched = []

    def register(server: KafkaServer) -> None:
        async def parked_fetch(header, request):  # noqa: ANN001, ANN202
            fetched.append(header.request_api_version)
            fetch_arrived.set()
            await vote_answered.wait()
            return convert(m.fetch_response(ErrorCode.none, leader_id=2, epoch=1), response_class(1, 13), ABSENT[FETCH])

        async def vote(header, request):  # noqa: ANN001, ANN202
            vote_answered.set()
            return m.vote_response(ErrorCode.none, leader_id=-1, epoch=1, granted=True)

        server.register(1, 13, 13, parked_fetch)
        server.register(52, 0, 2, vote)

    async def sends(peers, done, events):  # noqa: ANN001, ANN202
        peers.send(2, m.fetch_request("c", 1, 1, 0, 0, 0, 500, 1 << 20, high_watermark=0), *done("fetch"), 500)
        while not fetch_arrived.is_set() and not events:
            await asyncio.sleep(0.01)
        peers.send(2, m.vote_request("c", 1, 1, 0, 0), *done("vote"))
        await answered(events, 2)

    assert peer_sends(register, sends) == ["vote", "fetch"]
    assert fetched == [13]


def test_a_request_no_version_the_peer_serves_can_carry_fails_at_once():
    """A pre-vote to a peer that serves Vote v0-1 only: dropping PreVote would make it a vote
    (a new epoch at the peer), so it is not sent; a vote goes, in v1."""
    voted = []

    def register(server: KafkaServer) -> None:
        async def vote(header, request):  # noqa: ANN001, ANN202
            voted.append((header.request_api_version, request.topics[0].partitions[0].replica_epoch))
            return response_class(52, 1)(error_code=ErrorCode.none, topics=(), node_endpoints=())

        server.register(52, 0, 1, vote)

    async def sends(peers, done, events):  # noqa: ANN001, ANN202
        peers.send(2, m.vote_request("c", 1, 4, 0, 0, pre_vote=True), *done("pre-vote"))
        await answered(events, 1)
        peers.send(2, m.vote_request("c", 1, 4, 0, 0), *done("vote"))
        await answered(events, 2)

    assert peer_sends(register, sends) == ["pre-vote failed", "vote"]
    assert voted == [(1, 1)], "the vote in v1, its epoch kept"


def test_a_version_the_peer_refuses_fails_the_send_and_does_not_hang():
    """A peer whose ApiVersions names a version it then refuses (it closes the connection, as
    Kafka's brokers close one on a version they do not serve): the send fails, at once."""

    class Lying(KafkaServer):
        def api_versions(self) -> list[tuple[int, int, int]]:
            return [(k, lo, 18 if k == 1 else hi) for k, lo, hi in super().api_versions()]

    async def fetch(header, request):  # noqa: ANN001, ANN202
        raise AssertionError("not reached: v18 is refused before a handler")

    async def sends(peers, done, events):  # noqa: ANN001, ANN202
        peers.send(2, m.fetch_request("c", 1, 1, 0, 0, 0, 500, 1 << 20), *done("fetch"))
        await answered(events, 1)

    assert peer_sends(lambda server: server.register(1, 13, 13, fetch), sends, Lying) == ["fetch failed"]
