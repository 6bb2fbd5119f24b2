"""What idle TLS connections cost a node process, and that it gets the memory back: five
rounds of 1,000 connections opened and closed against a node whose client listener is SSL,
its resident memory (VmRSS) read with all of them open and again once they closed. Issue
25 measured 309 KiB a connection (asyncio's 256 KiB read buffer each) and a node going from
62 to 812 MB over five rounds, never given back; the bound is 50 MB a thousand, and the
memory back within 20 MB of where the node started. Connections that never finish their
handshake are held to the same bound."""

import os
import resource
import socket
import ssl
from pathlib import Path

import pytest

from kraft.cli.fuzz import rss
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol.build import build_request
from kraft.security.local_ca import CertificateAuthority
from tests.security.secured import client_tls, tls_overrides

from ..server.cluster_helpers import wait_for
from .test_server import recv_frame

CONNECTIONS, ROUNDS = 1000, 5
MB = 1 << 20
OPEN_BOUND = 50 * MB  # what 1,000 idle TLS connections may cost
RETURN_BOUND = 20 * MB  # how far above its start a node may stay once they closed


def accepted(pid: int, port: int) -> int:
    """The connections the process has accepted on its listener at `port`: its sockets
    (their inodes) that the kernel's TCP table shows on that local port, not listening."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed as it was read
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            count += local_port == port and state != "0A" and inode in inodes  # 0A: LISTEN
    return count


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = CONNECTIONS + 512
    if soft < wanted:
        assert hard == resource.RLIM_INFINITY or hard >= wanted, f"the test needs {wanted} file descriptors"
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    directory = tmp_path_factory.mktemp("tls-memory")
    ca = CertificateAuthority(directory / "certs")
    overrides = {**tls_overrides(ca, ca.issue("node"), "CONTROLLER:PLAINTEXT,PLAINTEXT:SSL"),
                 "kraft.max.unauthenticated.connections": str(2 * CONNECTIONS)}
    cluster = LocalCluster(directory / "cluster", voters=1, observers=0, overrides=overrides)
    cluster.start()
    try:
        yield cluster.nodes[1], client_tls(ca)
    finally:
        cluster.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def served(port: int, tls: ssl.SSLContext) -> bool:
    """An ApiVersions over a new TLS connection is answered: the node has handled what
    came before it."""
    with tls.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                         server_hostname="127.0.0.1") as sock:
        sock.sendall(_api_versions())
        return len(recv_frame(sock)) > 4


def _api_versions() -> bytes:
    from kraft.protocol import encode_request

    return encode_request(build_request(18, 3, {"client_software_name": "t", "client_software_version": "1"}), 1, "t")


@pytest.mark.parametrize("handshake", ["finished", "never started"])
def test_idle_tls_connections_cost_at_most_50_mb_a_thousand_and_it_comes_back(tls_node, handshake):
    node, tls = tls_node
    pid = node.started().pid
    assert served(node.client_port, tls)
    wait_for(lambda: accepted(pid, node.client_port) == 0, timeout=60, what="the probe's connection closed")
    start = rss(pid)
    costs, after = [], []
    for _ in range(ROUNDS):
        opened = []
        try:
            for _ in range(CONNECTIONS):
                sock = socket.create_connection(("127.0.0.1", node.client_port), timeout=30)
                if handshake == "finished":
                    sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
                opened.append(sock)
            wait_for(lambda: accepted(pid, node.client_port) >= CONNECTIONS, timeout=60,
                     what="the node holding every connection")
            assert served(node.client_port, tls)
            costs.append(rss(pid) - start)
        finally:
            for sock in opened:
                sock.close()
        wait_for(lambda: accepted(pid, node.client_port) == 0, timeout=60, what="the node closing every connection")
        # the memory is given back once closing has quieted down (a second): waited for
        wait_for(lambda: rss(pid) - start <= RETURN_BOUND, timeout=30,
                 what=f"the memory back within {RETURN_BOUND // MB} MB of the start")
        after.append(rss(pid) - start)
    figures = f"open: {[c // MB for c in costs]} MB, closed: {[a // MB for a in after]} MB above {start // MB} MB"
    assert max(costs) <= OPEN_BOUND, figures
    print(f"{handshake} handshakes, {CONNECTIONS} connections a round: {figures}")
