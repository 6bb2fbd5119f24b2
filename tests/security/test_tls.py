"""TLS on both listeners of a real cluster: peers (Raft, broker registration, forwarding) over
the controller listener with client certificates required, Kafka clients over the client
listener, and the one line a node gives for a keystore it cannot use."""

import asyncio
import ssl
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.raft import messages as m
from kraft.security.local_ca import CertificateAuthority
from kraft.security.tls import TlsConfigError, TlsSettings, client_context, server_context, subject_name
from kraft.server.settings.server_config import parse_properties

from ..server.cluster_helpers import wait_for
from .secured import ask, client_tls, tls_overrides, wait_for_leader

TP = ("__cluster_metadata", 0)


@pytest.fixture
def tls_cluster(tmp_path):
    """Three voters and an observer; both listeners SSL, the controller listener requiring a
    client certificate (each node presents its own)."""
    ca = CertificateAuthority(tmp_path / "certs")
    overrides = tls_overrides(ca, ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SSL")
    overrides["listener.name.controller.ssl.client.auth"] = "required"
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=1, overrides=overrides)
    cluster.start()
    yield cluster, ca
    cluster.stop()


def test_a_cluster_runs_over_tls_and_kafka_clients_use_it(tls_cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaNewTopic
    from kafka.errors import InvalidReplicationFactorError, UnknownBrokerIdError

    cluster, ca = tls_cluster
    tls = client_tls(ca)
    wait_for_leader(cluster, tls)  # elected over TLS: Vote, BeginQuorumEpoch, Fetch between voters
    observer = cluster.nodes[4]

    # kafka-python writes through the observer, which forwards over the controller listener's TLS.
    def created() -> bool:
        admin = KafkaAdminClient(bootstrap_servers=observer.client, security_protocol="SSL",
                                 ssl_cafile=str(ca.cert), request_timeout_ms=40_000)
        try:
            admin._manager.least_loaded_node = lambda: 4
            admin.create_topics([KafkaNewTopic("over-tls", 1, 1)], timeout_ms=30_000)
        except (InvalidReplicationFactorError, UnknownBrokerIdError):
            return False  # the observer not registered, or no broker unfenced, yet
        finally:
            admin.close()
        return True

    def registered() -> set[int]:
        admin = KafkaAdminClient(bootstrap_servers=observer.client, security_protocol="SSL", ssl_cafile=str(ca.cert))
        try:
            return {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
        finally:
            admin.close()

    wait_for(created, timeout=60, what="a topic created through the observer")
    wait_for(lambda: registered() == {1, 2, 3, 4}, timeout=60, what="every node registered over TLS")

    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap_servers(), "security.protocol": "SSL",
                             "ssl.ca.location": str(ca.cert)})
    confluent.create_topics([NewTopic("librdkafka-over-tls", 1, 1)])["librdkafka-over-tls"].result(60)
    wait_for(lambda: {"over-tls", "librdkafka-over-tls"} <= set(confluent.list_topics(timeout=10).topics),
             timeout=60, what="both topics listed over TLS")

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), security_protocol="SSL",
                             ssl_cafile=str(ca.cert), enable_auto_commit=False, group_id=None, fetch_max_wait_ms=200)
    try:
        tp = TopicPartition(*TP)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        records = 0
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            records += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
        assert consumer.position(tp) >= end and records > 0
    finally:
        consumer.close()


def test_tls_listeners_refuse_what_they_must(tls_cluster):
    cluster, ca = tls_cluster
    node = cluster.nodes[1]
    wait_for_leader(cluster, client_tls(ca))

    # Plain TCP on a TLS port: no Kafka answer comes back.
    with pytest.raises((ConnectionError, TimeoutError, OSError)):
        asyncio.run(ask(node.client_port, m.describe_quorum_request(), timeout=3.0))

    # The controller listener requires a client certificate signed by the CA it trusts.
    with pytest.raises((ConnectionError, OSError)):
        asyncio.run(ask(node.controller_port, m.describe_quorum_request(), client_tls(ca)))
    stranger = CertificateAuthority(cluster.directory / "stranger-ca", "stranger CA")
    with pytest.raises((ConnectionError, OSError)):
        asyncio.run(ask(node.controller_port, m.describe_quorum_request(), client_tls(ca, stranger.issue("rogue"))))
    answer = asyncio.run(ask(node.controller_port, m.describe_quorum_request(), client_tls(ca, ca.issue("admin"))))
    assert answer.topics[0].partitions[0].leader_id in cluster.voter_ids  # served: it names the leader

    # A client that checks names refuses a node whose certificate does not name the host it dialled.
    wrong_name = client_tls(ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(_connect_as(node.client_port, wrong_name, "elsewhere.example"))


async def _connect_as(port: int, context: ssl.SSLContext, server_hostname: str) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=server_hostname)
    writer.close()


def _start(config_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(config_path)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("problem,expected", [
    ("missing", "ssl.keystore.location {dir}/nowhere.pem does not exist"),
    ("not a key", "cannot load the keystore"),
    ("wrong password", "cannot load the keystore"),
    ("missing truststore", "ssl.truststore.location {dir}/no-ca.pem does not exist"),
])
def test_a_keystore_the_node_cannot_use_is_one_line_at_start(tmp_path, problem, expected):
    ca = CertificateAuthority(tmp_path / "certs")
    locked = ca.issue("locked", password="right")
    overrides = {**tls_overrides(ca, ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SSL"),
                 "ssl.key.password": "right"}
    if problem == "missing":
        overrides["ssl.keystore.location"] = str(tmp_path / "nowhere.pem")
    elif problem == "not a key":
        overrides["ssl.keystore.location"] = str(ca.cert)
    elif problem == "wrong password":
        overrides |= {"ssl.keystore.location": str(locked.keystore), "ssl.key.password": "wrong"}
    else:
        overrides["ssl.truststore.location"] = str(tmp_path / "no-ca.pem")
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides=overrides)
    out = _start(cluster.nodes[1].config_path)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert expected.format(dir=tmp_path) in lines[0] and "listener" in lines[0]


def test_inline_pem_and_encrypted_keys_load(tmp_path):
    """ssl.keystore.certificate.chain/ssl.keystore.key and ssl.truststore.certificates (PEM text
    in the properties file, its line breaks lost as a one-line value loses them), and a key
    encrypted with ssl.key.password: a server and a client made from them complete a handshake."""
    ca = CertificateAuthority(tmp_path)
    node = ca.issue("node", password="secret")
    one_line = {name: path.read_text().replace("\n", " ") for name, path in
                (("chain", node.cert), ("key", node.key), ("ca", ca.cert))}
    properties = parse_properties(f"chain={one_line['chain']}\nkey={one_line['key']}\nca={one_line['ca']}\n")
    server = server_context(TlsSettings("test", keystore_type="PEM", keystore_certificate_chain=properties["chain"],
                                        keystore_key=properties["key"], key_password="secret"))
    client = client_context(TlsSettings("test", truststore_type="PEM", truststore_certificates=properties["ca"]))

    async def handshake() -> str | None:
        async def serve(reader, writer):  # noqa: ANN001, ANN202
            writer.write(b"ok")
            await writer.drain()
            writer.close()

        listening = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
        port = listening.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
        peer = writer.get_extra_info("peercert")
        assert await reader.read() == b"ok"
        writer.close()
        listening.close()
        return subject_name(peer)

    assert asyncio.run(handshake()) == "CN=node,O=kraft tests"
    with pytest.raises(TlsConfigError, match="cannot load the keystore"):
        server_context(TlsSettings("test", keystore_type="PEM", keystore_certificate_chain=properties["chain"],
                                   keystore_key=properties["key"], key_password="wrong"))
