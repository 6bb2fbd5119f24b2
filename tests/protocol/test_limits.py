"""Kafka's listener limits, with real sockets on loopback: max.connections (and per IP),
connections.max.idle.ms, queued.max.request.bytes, kraft.request.arrival.timeout.ms, the
file-descriptor budget, accept errors, and what a flood of bad requests costs in log."""

import asyncio
import logging
import resource
import select
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest, TopicData
from kio.schema.describe_quorum.v1.response import DescribeQuorumResponse

from kraft.protocol import ErrorCode, KafkaServer, ListenerLimits, encode_request
from kraft.protocol.build import build_request
from kraft.protocol.limits import DESCRIPTORS
from kraft.protocol.listener import STAGING_BYTES
from kraft.server.settings.server_config import load_config
from tests.protocol.test_server import (
    api_versions,
    connect,
    describe_quorum_frame,
    is_closed,
    recv_frame,
)

DEADLINE_S = 30.0  # waits for what must happen; never an assertion on how long it took


def limited(**limits: int) -> KafkaServer:
    return KafkaServer(max_frame_bytes=1 << 27, limits=ListenerLimits(**limits))


def until(what: str, predicate: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def served_after_a_wait(port: int) -> bool:
    """A new connection's ApiVersions is answered (retried: a close is seen asynchronously)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                return api_versions(sock, 3).error_code == 0
        except OSError:
            time.sleep(0.05)
    return False


def api_versions_frame(correlation_id: int) -> bytes:
    request = build_request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    return encode_request(request, correlation_id=correlation_id, client_id="t")


def blocking_describe_quorum(server: KafkaServer, release: threading.Event) -> None:
    """DescribeQuorum answers only once `release` is set."""

    async def handler(header: Any, request: Any) -> Any:
        while not release.is_set():
            await asyncio.sleep(0.005)
        return DescribeQuorumResponse(error_code=ErrorCode.none, topics=())

    server.register(55, 0, 1, handler)


def held_until_one_closes(t: Any, open_before: list[socket.socket]) -> None:
    """The next connection waits in the backlog while `open_before` are open, and is served
    as soon as one of them closes."""
    waiting = connect(t)
    waiting.settimeout(DEADLINE_S)
    try:
        waiting.sendall(api_versions_frame(33))
        assert api_versions(open_before[0], 3, correlation_id=2).header.correlation_id == 2
        assert t.server.open_connections == len(open_before)
        open_before[-1].close()
        assert struct.unpack_from(">i", recv_frame(waiting))[0] == 33
    finally:
        waiting.close()


def test_max_connections_holds_the_next_connection_until_one_closes(make_server):
    """As Kafka's acceptor waits for a connection slot."""
    t = make_server(limited(max_connections=2))
    first, second = connect(t), connect(t)
    try:
        assert api_versions(first, 3).error_code == 0 and api_versions(second, 3).error_code == 0
        held_until_one_closes(t, [first, second])
    finally:
        first.close()
        second.close()


def test_the_descriptor_budget_holds_connections_like_max_connections(make_server):
    t = make_server()
    first = connect(t)
    try:
        assert api_versions(first, 3).error_code == 0
        DESCRIPTORS.limit = DESCRIPTORS.used  # no descriptor to spare for another connection
        held_until_one_closes(t, [first])
    finally:
        first.close()
        DESCRIPTORS.limit = None  # computed again from the descriptor limit


def test_a_connection_past_max_connections_per_ip_is_closed_at_once(make_server):
    t = make_server(limited(max_connections_per_ip=1))
    with connect(t) as first:
        assert api_versions(first, 3).error_code == 0
        with connect(t) as second:
            second.settimeout(DEADLINE_S)
            assert is_closed(second)
        assert api_versions(first, 3, correlation_id=2).error_code == 0
    assert served_after_a_wait(t.port)


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(make_server, caplog):
    t = make_server(limited(connections_max_idle_ms=200))
    with connect(t) as sock:
        sock.settimeout(DEADLINE_S)
        assert api_versions(sock, 3).error_code == 0
        assert is_closed(sock)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warnings, "an idle close is no problem to log"


def test_a_request_being_handled_keeps_its_connection_past_the_idle_limit(make_server):
    release = threading.Event()
    server = limited(connections_max_idle_ms=100)
    blocking_describe_quorum(server, release)
    t = make_server(server)
    with connect(t) as sock:
        sock.settimeout(DEADLINE_S)
        sock.sendall(describe_quorum_frame(correlation_id=9))
        time.sleep(0.5)  # five idle limits pass while the handler works
        release.set()
        assert struct.unpack_from(">i", recv_frame(sock))[0] == 9


@pytest.mark.parametrize("size", [STAGING_BYTES - 100, 100_000], ids=["staged", "own-buffer"])
def test_a_request_trickling_in_a_byte_at_a_time_is_dropped(make_server, caplog, size):
    """Slowloris: a byte every 50 ms would take minutes to finish the frame."""
    t = make_server(limited(request_arrival_timeout_ms=300))
    with connect(t) as sock:
        sock.sendall(struct.pack(">i", size))
        closed = False
        deadline = time.monotonic() + DEADLINE_S
        while not closed and time.monotonic() < deadline:
            try:
                sock.sendall(b"\x00")
            except OSError:
                closed = True
                break
            readable, _, _ = select.select([sock], [], [], 0.05)
            closed = bool(readable) and is_closed(sock)
        assert closed
    until("the log line", lambda: "did not all arrive within 300 ms" in caplog.text)


def describe_quorum_of(name_bytes: int, correlation_id: int) -> bytes:
    """A DescribeQuorum request whose frame is larger than the staging buffer."""
    request = DescribeQuorumRequest(topics=(TopicData(topic_name="t" * name_bytes, partitions=()),))
    return encode_request(request, correlation_id=correlation_id, client_id="t")


def test_large_requests_wait_for_request_memory_and_small_ones_go_on(make_server):
    """queued.max.request.bytes: a second large request is not read while the first holds
    the memory; requests that fit a connection's own buffer are served meanwhile."""
    release = threading.Event()
    server = limited(queued_max_request_bytes=1)
    blocking_describe_quorum(server, release)
    t = make_server(server)
    first, second = describe_quorum_of(5000, 1), describe_quorum_of(6000, 2)
    with connect(t) as a, connect(t) as b, connect(t) as small:
        a.settimeout(DEADLINE_S)
        b.settimeout(DEADLINE_S)
        a.sendall(first)
        until("the first request's memory", lambda: t.server.queued_request_bytes == len(first) - 4)
        b.sendall(second)
        assert api_versions(small, 3).error_code == 0
        assert t.server.queued_request_bytes == len(first) - 4, "the second waits, unread"
        release.set()
        assert struct.unpack_from(">i", recv_frame(a))[0] == 1
        assert struct.unpack_from(">i", recv_frame(b))[0] == 2
    until("the memory to be released", lambda: t.server.queued_request_bytes == 0)


def _rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def test_a_size_prefix_alone_costs_no_memory(make_server):
    """Memory grows as a frame's bytes arrive, never from its size prefix: three prefixes of
    100 MiB, each followed by a few bytes, are reserved but not resident."""
    t = make_server(limited())
    socks = [connect(t) for _ in range(3)]
    try:
        before = _rss()
        for sock in socks:
            sock.sendall(struct.pack(">i", 100 << 20) + b"\x00\x12\x00\x03" + bytes(60))
        until("the reservations", lambda: t.server.queued_request_bytes == 3 * (100 << 20))
        assert _rss() - before < 32 << 20
    finally:
        for sock in socks:
            sock.close()
    until("the memory to be released", lambda: t.server.queued_request_bytes == 0)


def test_a_flood_of_bad_requests_costs_a_few_log_lines(make_server, caplog):
    t = make_server()
    for _ in range(200):
        with connect(t) as sock:
            sock.settimeout(DEADLINE_S)
            sock.sendall(struct.pack(">ihhih", 30, 55, 1, 1, 2) + b"\xff" * 20)
            assert is_closed(sock)
    lines = [r for r in caplog.records
             if r.name == "kraft.protocol.server" and r.levelno >= logging.WARNING]
    assert 1 <= len(lines) < 20 and not any(r.exc_info for r in lines)


ACCEPT_ERRORS = textwrap.dedent("""
    import asyncio, logging, resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    from kraft.protocol import KafkaServer
    from kraft.protocol.limits import DESCRIPTORS

    async def main():
        server = KafkaServer()
        host, port = await server.start()
        DESCRIPTORS.limit = 10_000  # a budget above the descriptors: accept() itself must fail
        print(port, flush=True)
        await asyncio.Event().wait()

    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main())
""")


def test_accept_errors_back_off_and_are_logged_once_per_burst(tmp_path):
    """Past the descriptor limit accept() fails with EMFILE: the listener backs off, logs
    the burst once (a traceback per attempt filled 853 MB of log), and accepts again when
    descriptors are free."""
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log_file:
        child = subprocess.Popen([sys.executable, "-c", ACCEPT_ERRORS], stdout=subprocess.PIPE,
                                 stderr=log_file, text=True)
    try:
        port = int(child.stdout.readline())
        socks = []
        for _ in range(120):
            sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
            sock.sendall(api_versions_frame(1))
            socks.append(sock)
        until("accept() to fail", lambda: "cannot accept connections" in log_path.read_text())
        time.sleep(0.5)  # the listener retries meanwhile
        for sock in socks:
            sock.close()
        assert served_after_a_wait(port)
        until("the recovery line", lambda: "accepting connections again" in log_path.read_text())
    finally:
        child.kill()
        child.wait()
    text = log_path.read_text()
    bursts = text.count("cannot accept connections"), text.count("accepting connections again")
    assert bursts == (1, 1), text
    assert "Traceback" not in text and "Too many open files" in text


RAISED_LIMIT = textwrap.dedent("""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    from kraft.protocol.limits import DESCRIPTORS
    DESCRIPTORS.start()
    print(resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard, DESCRIPTORS.limit)
""")


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one():
    out = subprocess.run([sys.executable, "-c", RAISED_LIMIT], capture_output=True, text=True,
                         check=False, timeout=60)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    raised, budget = out.stdout.split()
    assert raised == "True" and int(budget) == hard - min(1024, hard // 4), out.stderr


def test_limits_come_from_server_properties_with_kafkas_names():
    config = load_config({
        "node.id": "1", "process.roles": "broker,controller",
        "controller.quorum.voters": "1@127.0.0.1:9093", "metadata.log.dir": "/tmp/x",
        "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
        "max.connections": "100", "max.connections.per.ip": "7", "queued.max.request.bytes": "-1",
        "connections.max.idle.ms": "1000", "kraft.request.arrival.timeout.ms": "500",
    })
    assert config.listener_limits("PLAINTEXT") == ListenerLimits(100, 7, -1, 1000, 500)
