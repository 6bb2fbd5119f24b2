"""The asyncio server with real clients on loopback: kafka-python's protocol, aiokafka's connection."""

import asyncio
import socket
import struct
from datetime import timedelta

import pytest
from aiokafka.conn import create_conn
from aiokafka.protocol.admin import ApiVersionRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kio.schema.describe_quorum.v1.response import DescribeQuorumResponse

from kraft.protocol import ErrorCode, KafkaServer, encode_request, request_class
from kraft.protocol.build import build_response


def connect(t) -> socket.socket:
    return socket.create_connection((t.host, t.port), timeout=5)


def recv_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by server")
        data += chunk
    return data


def api_versions(sock: socket.socket, version: int, correlation_id: int = 1):
    request = ApiVersionsRequest(version=version, client_software_name="kafka-python", client_software_version="3")
    request.with_header(correlation_id=correlation_id, client_id="test")
    sock.sendall(request.encode(header=True, framed=True))
    return ApiVersionsResponse.decode(recv_frame(sock), version=version, header=True)


def is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_kafka_python_api_versions_every_version(make_server, version):
    t = make_server()
    with connect(t) as sock:
        response = api_versions(sock, version, correlation_id=40 + version)
    assert response.header.correlation_id == 40 + version
    assert response.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


def test_newer_api_versions_gets_unsupported_version_with_our_ranges(make_server):
    """KIP-511: answer v0 with UNSUPPORTED_VERSION so the client can downgrade."""
    t = make_server()
    request = ApiVersionsRequest(version=4, client_software_name="x", client_software_version="1")
    request.with_header(correlation_id=5, client_id="test")
    raw = bytearray(request.encode(header=True, framed=True))
    struct.pack_into(">h", raw, 6, 9)  # claim ApiVersions v9
    with connect(t) as sock:
        sock.sendall(raw)
        response = ApiVersionsResponse.decode(recv_frame(sock), version=0, header=True)
        assert response.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.max_version) for k in response.api_keys] == [(18, 4)]
        assert api_versions(sock, 4).error_code == 0, "the connection stays usable"


def test_aiokafka_connection_negotiates(make_server):
    t = make_server()

    async def run():
        conn = await create_conn(t.host, t.port)
        try:
            response = await conn.send(ApiVersionRequest())
            return [(k[0], k[1], k[2]) for k in response.api_versions]
        finally:
            conn.close()

    assert asyncio.run(run()) == [(18, 0, 4)]


def registered_server():
    server = KafkaServer(max_frame_bytes=4096)

    async def describe_quorum(header, request):
        return DescribeQuorumResponse(error_code=ErrorCode.none, topics=())

    async def broken(header, request):
        raise RuntimeError("handler bug")

    server.register(55, 0, 1, describe_quorum)
    server.register(3, 12, 12, broken)
    return server


def describe_quorum_frame(version=1, correlation_id=3):
    cls = request_class(55, version)
    return encode_request(cls(topics=()), correlation_id=correlation_id, client_id="t")


def test_registered_apis_are_advertised_and_served(make_server):
    t = make_server(registered_server())
    with connect(t) as sock:
        keys = [(k.api_key, k.min_version, k.max_version) for k in api_versions(sock, 3).api_keys]
        assert keys == [(3, 12, 12), (18, 0, 4), (55, 0, 1)]
        sock.sendall(describe_quorum_frame(correlation_id=77))
        body = recv_frame(sock)
        assert struct.unpack_from(">i", body)[0] == 77


def metadata_frame():
    cls = request_class(3, 12)
    request = cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return encode_request(request, correlation_id=1, client_id="t")


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(struct.pack(">i", 1 << 30), id="oversized"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">i", 1) + b"\x00", id="too-short-for-header"),
        pytest.param(struct.pack(">ihhi", 8, 9999, 0, 1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhi", 8, 55, 7, 1), id="unserved-version"),
        pytest.param(struct.pack(">ihhih", 30, 55, 1, 1, 2) + b"\xff" * 20, id="garbage-body"),
        pytest.param(metadata_frame(), id="handler-raises"),
    ],
)
def test_bad_frames_close_only_their_connection(make_server, bad):
    t = make_server(registered_server())
    with connect(t) as bystander, connect(t) as victim:
        assert api_versions(bystander, 2).error_code == 0
        victim.sendall(bad)
        assert is_closed(victim)
        assert api_versions(bystander, 3, correlation_id=9).header.correlation_id == 9
        with connect(t) as newcomer:
            assert api_versions(newcomer, 4).error_code == 0


def test_confluent_kafka_admin_metadata_with_bytes_left_over_is_served(make_server):
    """librdkafka's admin client sends Metadata v13 with three bytes after the request; Kafka
    ignores them, and the connection must not close over them."""
    from confluent_kafka.admin import AdminClient

    server = KafkaServer()
    requests = []

    async def metadata(header, request):
        requests.append(header.request_api_version)
        return build_response(3, header.request_api_version, {
            "throttle_time": timedelta(0), "cluster_id": "c", "controller_id": 1, "topics": [],
            "brokers": [{"node_id": 1, "host": t.host, "port": t.port, "rack": None}],
            "cluster_authorized_operations": -(2**31), "error_code": ErrorCode.none,
        })

    server.register(3, 0, 13, metadata)
    t = make_server(server)
    admin = AdminClient({"bootstrap.servers": f"{t.host}:{t.port}"})
    brokers = admin.list_topics(timeout=30).brokers
    assert list(brokers) == [1] and 13 in requests
