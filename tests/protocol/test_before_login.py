"""What a stranger can make a SASL listener spend before it logs in, with real sockets on
loopback: a frame larger than sasl.server.max.receive.size closes its connection from its
size prefix (issue 25: a 60 MB SaslAuthenticate was read and parsed whole), a burst of them
is one log line, and connections still in their login past
kraft.max.unauthenticated.connections close the oldest of them. After a login the listener
takes frames up to socket.request.max.bytes again."""

import logging
import socket
import struct

import pytest

from kraft.protocol import KafkaServer, ListenerLimits, encode_request
from kraft.protocol.build import build_request
from kraft.protocol.session import SASL_PLAINTEXT, ListenerSecurity
from kraft.security.plain import PlainClient, PlainServer
from tests.protocol.test_limits import until
from tests.protocol.test_server import api_versions, connect, is_closed, recv_frame

MB = 1 << 20
USERS = {"alice": "alice-pw"}


def sasl_server(**limits: int) -> KafkaServer:
    """A SASL_PLAINTEXT listener with PLAIN, Kafka's sasl.server.max.receive.size (512 KiB)
    and socket.request.max.bytes of 100 MiB, Kafka's default."""
    security = ListenerSecurity("CLIENT", SASL_PLAINTEXT, sasl={"PLAIN": lambda: PlainServer(USERS)})
    return KafkaServer(max_frame_bytes=100 * MB, limits=ListenerLimits(**limits), security=security)


def ask(sock: socket.socket, api_key: int, version: int, fields: dict, correlation_id: int = 9) -> bytes:
    sock.sendall(encode_request(build_request(api_key, version, fields), correlation_id, "t"))
    return recv_frame(sock)


def log_in(sock: socket.socket) -> None:
    handshake = ask(sock, 17, 1, {"mechanism": "PLAIN"})
    assert handshake[4:6] == b"\x00\x00", handshake  # error code NONE after the correlation id
    answer = ask(sock, 36, 2, {"auth_bytes": PlainClient("alice", "alice-pw").first()})
    assert answer[5:7] == b"\x00\x00", answer  # after the correlation id and the header's tag byte


def authenticate_frame(size: int) -> bytes:
    """The start of a SaslAuthenticate v2 whose token makes the frame `size` bytes long."""
    header = encode_request(build_request(36, 2, {"auth_bytes": b""}), 1, "t")[4:]
    return struct.pack(">i", size) + header


def test_a_sasl_frame_past_the_limit_before_a_login_closes_at_its_size_prefix(make_server):
    t = make_server(sasl_server())
    with connect(t) as sock:
        assert api_versions(sock, 3).error_code == 0
        assert ask(sock, 17, 1, {"mechanism": "PLAIN"})[4:6] == b"\x00\x00"
        sock.sendall(authenticate_frame(60 * MB))  # a 60 MB token announced
        try:
            sock.sendall(bytes(MB))  # its first MiB; the server may already have closed
        except OSError:
            pass
        until("the connection closed", lambda: is_closed(sock))
    assert t.server.queued_request_bytes == 0  # nothing was reserved for it


def api_versions_of(size: int) -> bytes:
    """An ApiVersions v3 request whose frame body is `size` bytes (a long software name)."""
    def frame(name_length: int) -> bytes:
        return encode_request(build_request(18, 3, {"client_software_name": "n" * name_length,
                                                    "client_software_version": "1"}), 4, "t")

    name = size - (len(frame(0)) - 4)
    while len(frame(name)) - 4 > size:  # the name's varint length grows with it
        name -= 1
    built = frame(name)
    assert len(built) - 4 == size
    return built


def test_before_a_login_frames_up_to_the_limit_are_read_and_after_it_up_to_socket_request_max_bytes(
        make_server):
    t = make_server(sasl_server())
    with connect(t) as sock:
        sock.sendall(api_versions_of(512 * 1024))  # exactly sasl.server.max.receive.size
        assert recv_frame(sock)[4:6] == b"\x00\x00"
        sock.sendall(api_versions_of(512 * 1024 + 1))
        until("the connection closed", lambda: is_closed(sock))
    with connect(t) as sock:
        log_in(sock)
        sock.sendall(api_versions_of(2 * MB))
        assert recv_frame(sock)[4:6] == b"\x00\x00"


def test_a_burst_of_oversized_frames_before_a_login_is_one_log_line(make_server, caplog):
    caplog.set_level(logging.WARNING)
    t = make_server(sasl_server())
    for _ in range(20):
        with connect(t) as sock:
            sock.sendall(struct.pack(">i", 95 * MB) + bytes(64))
            until("the connection closed", lambda: is_closed(sock))  # noqa: B023
    lines = [r for r in caplog.records if "sasl.server.max.receive.size" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "before its login" in lines[0].getMessage()


def test_past_the_cap_the_oldest_unauthenticated_connection_closes(make_server):
    t = make_server(sasl_server(max_unauthenticated_connections=3))
    logged_in = [connect(t) for _ in range(3)]
    for sock in logged_in:
        log_in(sock)  # these no longer count
    strangers = [connect(t) for _ in range(3)]
    for sock in strangers:
        assert api_versions(sock, 3).error_code == 0  # accepted, and served what a stranger may ask
    newcomer = connect(t)
    until("the oldest stranger closed", lambda: is_closed(strangers[0]))
    log_in(newcomer)  # the newcomer logs in
    for sock in logged_in + strangers[1:]:
        assert api_versions(sock, 3).error_code == 0  # nobody else was closed
    for sock in logged_in + strangers + [newcomer]:
        sock.close()


@pytest.mark.parametrize("given, expected", [({}, 10_000), ({"max.connections": "50"}, 50)])
def test_max_connections_on_a_listener_with_tls_or_sasl_defaults_to_ten_thousand(given, expected):
    from kraft.protocol.limits import INT32_MAX
    from kraft.server.settings.server_config import load_config

    config = load_config({
        "node.id": "1", "process.roles": "broker,controller", "controller.quorum.voters": "1@127.0.0.1:9093",
        "metadata.log.dir": "/tmp/x", "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";', **given})
    assert config.listener_limits("PLAINTEXT").max_connections == expected
    assert config.listener_limits("CONTROLLER").max_connections == (INT32_MAX if not given else expected)
    assert config.listener_limits("PLAINTEXT").max_unauthenticated_connections == 1000
