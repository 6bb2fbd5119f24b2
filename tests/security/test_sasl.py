"""SASL on a real cluster: the client listener SASL_SSL with PLAIN and SCRAM-SHA-256/512, the
controller listener SASL_PLAINTEXT where nodes log in with PLAIN; the first SCRAM user from
`--add-scram`, more through AlterUserScramCredentials; kafka-python and librdkafka logging
in; what an unauthenticated connection may do; no password anywhere on disk or in a tool."""

import asyncio
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import ClientLogin
from kraft.raft import messages as m
from kraft.security.local_ca import CertificateAuthority
from kraft.security.plain import PlainClient
from kraft.security.scram import ScramClient, ScramMechanism

from ..server.cluster_helpers import wait_for
from .secured import PLAIN_MODULE, ask, client_tls, tls_overrides, wait_for_leader

TP = ("__cluster_metadata", 0)
ADMIN_PASSWORD, ALICE_PASSWORD, BOB_PASSWORD = "admin-Secret-1", "alice-Secret-2", "bob-Secret-3"


@pytest.fixture
def sasl_cluster(tmp_path):
    ca = CertificateAuthority(tmp_path / "certs")
    overrides = {
        **tls_overrides(ca, ca.issue("node"), "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:SASL_SSL"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required username="node" password="node-pw" user_node="node-pw";',
        "listener.name.plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_admin="{ADMIN_PASSWORD}";',
    }
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=1, overrides=overrides,
                           add_scram=[f"SCRAM-SHA-256=[name=alice,password={ALICE_PASSWORD}]"])
    cluster.start()
    yield cluster, ca
    cluster.stop()


def kafka_python(cluster: LocalCluster, ca: CertificateAuthority, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap_servers": cluster.bootstrap_servers(), "security_protocol": "SASL_SSL",
            "ssl_cafile": str(ca.cert), "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}


def librdkafka(cluster: LocalCluster, ca: CertificateAuthority, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": cluster.bootstrap_servers(), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.cert), "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password}


def test_kafka_clients_log_in_with_plain_and_scram(sasl_cluster):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, UserScramCredentialUpsertion
    from confluent_kafka.admin import ScramMechanism as ConfluentScram
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationFactorError, KafkaError, UnknownBrokerIdError

    cluster, ca = sasl_cluster
    tls = client_tls(ca)
    wait_for_leader(cluster, tls, ClientLogin("PLAIN", lambda: PlainClient("admin", ADMIN_PASSWORD)))

    # PLAIN (the listener's JAAS user), writing through the observer: forwarded to the
    # controller over its SASL listener, where the observer logs in as `node`.
    def created() -> bool:
        admin = KafkaAdminClient(**kafka_python(cluster, ca, "PLAIN", "admin", ADMIN_PASSWORD),
                                 request_timeout_ms=40_000)
        try:
            admin._manager.least_loaded_node = lambda: 4
            admin.create_topics([NewTopic("over-sasl", 1, 1)], timeout_ms=30_000)
            described.update(admin.describe_user_scram_credentials())
        except (InvalidReplicationFactorError, UnknownBrokerIdError):
            return False  # the observer not registered, or no broker unfenced, yet
        finally:
            admin.close()
        return True

    described: dict = {}
    wait_for(created, timeout=60, what="a topic created through the observer")
    assert {user: [(int(c["mechanism"]), c["iterations"]) for c in info["credential_infos"]]
            for user, info in described.items()} == {"alice": [(1, 4096)]}  # from --add-scram

    # SCRAM-SHA-256 with the bootstrap credential: kafka-python reads the log.
    consumer = KafkaConsumer(**kafka_python(cluster, ca, "SCRAM-SHA-256", "alice", ALICE_PASSWORD),
                             enable_auto_commit=False, group_id=None, fetch_max_wait_ms=200)
    try:
        tp = TopicPartition(*TP)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
        assert consumer.position(tp) >= end > 0
    finally:
        consumer.close()
    with pytest.raises(KafkaError):
        KafkaAdminClient(**kafka_python(cluster, ca, "SCRAM-SHA-256", "alice", "wrong"), request_timeout_ms=5000)

    # librdkafka, as alice, creates bob's SCRAM-SHA-512 credential (AlterUserScramCredentials:
    # librdkafka salts the password), then logs in as bob.
    alice = AdminClient(librdkafka(cluster, ca, "SCRAM-SHA-256", "alice", ALICE_PASSWORD))
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ConfluentScram.SCRAM_SHA_512, 8192),
                                          BOB_PASSWORD.encode())
    alice.alter_user_scram_credentials([upsert])["bob"].result(60)
    bob_config = librdkafka(cluster, ca, "SCRAM-SHA-512", "bob", BOB_PASSWORD)

    def bob_lists_topics() -> bool:  # once every node has applied bob's record
        try:
            return "over-sasl" in AdminClient(bob_config).list_topics(timeout=5).topics
        except KafkaException:
            return False

    wait_for(bob_lists_topics, timeout=60, what="bob logging in with SCRAM-SHA-512")
    described_bob: list = []

    def bob_described(admin: AdminClient = alice) -> bool:  # any node answers, once it applied the record
        try:
            described_bob.append(admin.describe_user_scram_credentials(["bob"])["bob"].result(30))
        except KafkaException:
            return False
        return True

    wait_for(bob_described, timeout=60, what="bob's credential described")
    assert [(c.mechanism, c.iterations) for c in described_bob[-1].scram_credential_infos] == [
        (ConfluentScram.SCRAM_SHA_512, 8192)]
    refused = AdminClient({**bob_config, "sasl.password": "wrong"})
    with pytest.raises(KafkaException):
        refused.list_topics(timeout=5)
    # A librdkafka handle lives until its last reference goes: these retried the stopped
    # cluster for the rest of the run (a failure's traceback keeps the frame), filling the output.
    del refused, alice, bob_described

    # No password in the log, its snapshots, the bootstrap file or kraft dump-log's output.
    passwords = [p.encode() for p in (ALICE_PASSWORD, BOB_PASSWORD, ADMIN_PASSWORD)]
    for node in cluster.nodes.values():
        for path in node.data_dir.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert not any(p in data for p in passwords), path
    segment = next((cluster.nodes[1].partition_dir).glob("*.log"))
    dumped = subprocess.run([sys.executable, "-m", "kraft.cli", "dump-log", "--cluster-metadata-decoder",
                             "--files", str(segment)], capture_output=True, text=True, timeout=60)
    assert "USER_SCRAM_CREDENTIAL_RECORD" in dumped.stdout and "bob" in dumped.stdout
    assert not any(p.decode() in dumped.stdout for p in passwords)


def test_only_the_login_apis_before_a_login(sasl_cluster):
    cluster, ca = sasl_cluster
    tls = client_tls(ca)
    admin = ClientLogin("PLAIN", lambda: PlainClient("admin", ADMIN_PASSWORD))
    wait_for_leader(cluster, tls, admin)
    node = cluster.nodes[1]

    # ApiVersions is answered before a login, and lists the two SASL APIs.
    versions = asyncio.run(ask(node.client_port, build_request(18, 3, {
        "client_software_name": "t", "client_software_version": "1"}), tls))
    assert {(k.api_key, k.min_version, k.max_version) for k in versions.api_keys} >= {(17, 1, 1), (36, 0, 2)}
    # Anything else closes the connection, on either listener: a Metadata, a rogue Vote.
    with pytest.raises((ConnectionError, OSError)):
        asyncio.run(ask(node.client_port, m.describe_quorum_request(), tls))
    with pytest.raises((ConnectionError, OSError)):
        asyncio.run(ask(node.controller_port, m.vote_request("x", 99, 7, 0, 0)))
    # A mechanism not enabled, and wrong credentials, are refused and the connection closed.
    with pytest.raises(ConnectionError, match="UNSUPPORTED_SASL_MECHANISM|unsupported_sasl_mechanism"):
        asyncio.run(ask(node.controller_port, m.describe_quorum_request(), login=ClientLogin(
            "SCRAM-SHA-256", lambda: ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", ALICE_PASSWORD))))
    with pytest.raises(ConnectionError, match="Invalid username or password"):
        asyncio.run(ask(node.client_port, m.describe_quorum_request(), tls,
                        ClientLogin("PLAIN", lambda: PlainClient("admin", "guess"))))
    # Logged in, everything is served; the node's own login works on the controller listener.
    answer = asyncio.run(ask(node.client_port, m.describe_quorum_request(), tls, admin))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.none
    node_login = ClientLogin("PLAIN", lambda: PlainClient("node", "node-pw"))
    answer = asyncio.run(ask(node.controller_port, m.describe_quorum_request(), login=node_login))
    assert answer.topics[0].partitions[0].leader_id in cluster.voter_ids


def test_metadata_quorum_takes_kafkas_client_properties(sasl_cluster, tmp_path):
    """`kraft metadata-quorum --command-config`, as kafka-metadata-quorum takes it: SASL_SSL
    with a PEM truststore, PLAIN and SCRAM logins; a wrong password is one line."""
    cluster, ca = sasl_cluster
    wait_for_leader(cluster, client_tls(ca), ClientLogin("PLAIN", lambda: PlainClient("admin", ADMIN_PASSWORD)))

    def quorum(mechanism: str, user: str, password: str) -> subprocess.CompletedProcess:
        module = PLAIN_MODULE if mechanism == "PLAIN" else "org.apache.kafka.common.security.scram.ScramLoginModule"
        properties = tmp_path / f"{user}.properties"
        properties.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                              f"ssl.truststore.location={ca.cert}\nsasl.mechanism={mechanism}\n"
                              f'sasl.jaas.config={module} required username="{user}" password="{password}";\n')
        return subprocess.run([sys.executable, "-m", "kraft.cli", "metadata-quorum", "--bootstrap-server",
                               cluster.nodes[1].client, "--command-config", str(properties), "describe", "--status"],
                              capture_output=True, text=True, timeout=60)

    for mechanism, user, password in (("PLAIN", "admin", ADMIN_PASSWORD),
                                      ("SCRAM-SHA-256", "alice", ALICE_PASSWORD)):
        out = quorum(mechanism, user, password)
        assert out.returncode == 0 and cluster.cluster_id in out.stdout and "LeaderId" in out.stdout, out.stderr
    refused = quorum("PLAIN", "admin", "wrong")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "Invalid username or password" in refused.stderr
