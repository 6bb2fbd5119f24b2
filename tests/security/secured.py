"""Secured local clusters and the clients that reach them, shared by the security tests."""

import asyncio
import ssl
from pathlib import Path
from typing import Any

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.connection import ClientLogin, KafkaConnection
from kraft.raft import messages as m
from kraft.security.local_ca import CertificateAuthority, Issued

from ..server.cluster_helpers import wait_for

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def tls_overrides(ca: CertificateAuthority, node: Issued, protocols: str) -> dict[str, str]:
    """server.properties for listeners secured as `protocols` says (listener.security.protocol.map),
    every node with `node`'s keystore and the CA as truststore."""
    return {
        "listener.security.protocol.map": protocols,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(node.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.cert),
    }


def client_tls(ca: CertificateAuthority, client: Issued | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.cert))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    return context


async def ask(port: int, request: Any, tls: ssl.SSLContext | None = None, login: ClientLogin | None = None,
              timeout: float = 10.0) -> Any:
    connection = await KafkaConnection.connect("127.0.0.1", port, timeout=timeout, tls=tls, login=login)
    try:
        return await connection.request(request, timeout)
    finally:
        connection.close()


def wait_for_leader(cluster: LocalCluster, tls: ssl.SSLContext | None = None, login: ClientLogin | None = None,
                    timeout: float = 60.0) -> int:
    """The leader's id, once a node's client listener names one (asked over `tls`, with `login`)."""
    found: list[int] = []

    def named() -> bool:
        for node in cluster.nodes.values():
            try:
                answer = asyncio.run(ask(node.client_port, m.describe_quorum_request(), tls, login, 5.0))
            except (OSError, ConnectionError, TimeoutError):
                continue
            state = answer.topics[0].partitions[0]
            if state.error_code == ErrorCode.none and state.leader_id >= 0:
                found.append(state.leader_id)
                return True
        return False

    wait_for(named, timeout=timeout, what="a leader")
    return found[0]


def node_log(cluster: LocalCluster, node_id: int) -> str:
    return Path(cluster.nodes[node_id].log_path).read_text(errors="replace")
