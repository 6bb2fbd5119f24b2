"""kraft's own consumer (`kraft.client.Consumer`) on secured clusters, with Kafka's client
settings: SSL with a client certificate (as a PEM keystore and as librdkafka's two files),
SASL_SSL with PLAIN (sasl.jaas.config as Java clients write it) and SCRAM-SHA-512
(sasl.username, sasl.password), against real nodes; a wrong password, a mechanism the
listener does not offer, an untrusted server and a topic the ACLs refuse each raise at once,
in one line; bad settings are refused when the consumer is made, naming the setting."""

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.client import AuthenticationError, AuthorizationError, Consumer, ConsumerRecord, TopicPartition
from kraft.client.security import ClientConfigError
from kraft.protocol.connection import ClientLogin
from kraft.security.local_ca import CertificateAuthority

from ..server.cluster_helpers import wait_for
from .secured import PLAIN_MODULE, client_tls, tls_overrides, wait_for_leader

TP = TopicPartition("__cluster_metadata", 0)
ADMIN_PASSWORD, ALICE_PASSWORD, MALLORY_PASSWORD = "admin-Secret-1", "alice-Secret-2", "mallory-Secret-3"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def read_to(security: dict[str, str], servers: str, end: int | None = None) -> tuple[int, list[ConsumerRecord]]:
    """(the end read to, every record from the log start to it) as kraft's consumer reads them
    with `security`; to the high watermark it finds if `end` is None."""
    records: list[ConsumerRecord] = []
    choose = end is None
    with Consumer(servers, security=security, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  default_api_timeout_ms=30_000) as consumer:
        consumer.assign([TP])
        consumer.seek_to_beginning(TP)
        if end is None:
            end = consumer.end_offsets([TP])[TP].offset

        def caught_up() -> bool:
            nonlocal end
            records.extend(consumer.poll(200))
            below = any(r.offset < end for r in records)
            if choose and not below:
                # Just after the election the high watermark may cover only control batches,
                # which a consumer skips: read on to one that covers a record.
                end = consumer.end_offsets([TP])[TP].offset
                below = any(r.offset < end for r in records)
            return (below or not choose) and consumer.position(TP) >= end

        wait_for(caught_up, timeout=60, what="the consumer at the high watermark")
    return end, [r for r in records if r.offset < end]


def rows(records: list[ConsumerRecord]) -> list[tuple]:
    return [(r.offset, r.leader_epoch, r.key, r.value) for r in records]


# ------------------------------------------------------------------ settings, no cluster

@pytest.mark.parametrize("security, message", [
    ({"security.protocol": "TLS"}, "security.protocol=TLS is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
     "sasl.mechanism=GSSAPI is not one kraft speaks"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "give sasl.username and sasl.password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
      "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="p";'}, "not both"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": f"{PLAIN_MODULE} required"},
     "sasl.jaas.config: expected"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/etc/hostname"}, "set ssl.truststore.type=PEM"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}, "ssl.ca.location /no/such/ca.pem does not"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "/etc/hostname"},
     "ssl.certificate.location and ssl.key.location go together"),
    ({"security.protocol": "SSL", "ssl.check.hostname": "maybe"}, "ssl.check.hostname=maybe is not true or false"),
    ({"security.protocol": "SSL", "ssl.check.hostname": "true", "ssl.endpoint.identification.algorithm": "none"},
     "disagree"),
    ({"ssl.ca.location": "/etc/hostname"}, "ssl.ca.location is set but security.protocol is PLAINTEXT"),
    ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}, "sasl.mechanism is set but security.protocol is SSL"),
    ({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.3"},
     "ssl.enabled.protocols is not a security setting kraft's clients have"),
])
def test_a_bad_setting_is_one_line_naming_it_when_the_consumer_is_made(security, message):
    with pytest.raises(ClientConfigError, match=message) as raised:
        Consumer("127.0.0.1:1", security=security)
    assert str(raised.value).startswith("kraft consumer: ") and "\n" not in str(raised.value)


# ------------------------------------------------------------------ SSL

def test_the_consumer_reads_over_tls_with_a_client_certificate_in_either_form(tmp_path):
    ca = CertificateAuthority(tmp_path / "certs")
    overrides = {**tls_overrides(ca, ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SSL"),
                 "listener.name.plaintext.ssl.client.auth": "required"}
    with LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides=overrides) as cluster:
        cluster.start()
        client = ca.issue("reader", password="key-Secret")
        wait_for_leader(cluster, client_tls(ca, ca.issue("probe")))
        keystore = {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert),
                    "ssl.keystore.type": "PEM", "ssl.keystore.location": str(client.keystore),
                    "ssl.key.password": "key-Secret"}
        end, first = read_to(keystore, cluster.bootstrap_servers())
        assert end > 0 and [r.offset for r in first] == list(range(first[0].offset, end))
        two_files = {"security.protocol": "SSL", "ssl.ca.location": str(ca.cert),
                     "ssl.certificate.location": str(client.cert), "ssl.key.location": str(client.key),
                     "ssl.key.password": "key-Secret", "ssl.endpoint.identification.algorithm": "https"}
        assert rows(read_to(two_files, cluster.bootstrap_servers(), end)[1]) == rows(first)

        stranger = CertificateAuthority(tmp_path / "stranger", name="stranger CA")
        with Consumer(cluster.bootstrap_servers(), security={**two_files, "ssl.ca.location": str(stranger.cert)},
                      default_api_timeout_ms=300_000) as consumer:
            with pytest.raises(AuthenticationError, match="TLS handshake failed .*certificate.* check the ssl"):
                consumer.end_offsets([TP])


# ------------------------------------------------------------------ SASL_SSL, with ACLs

@pytest.fixture
def sasl_ssl_cluster(tmp_path):
    """Three voters; the client listener SASL_SSL with PLAIN (admin, mallory in the JAAS
    entries) and SCRAM-SHA-512 (alice, from --add-scram); the controller listener SSL with
    the nodes' certificate required; the authorizer on, the nodes and admin super users."""
    ca = CertificateAuthority(tmp_path / "certs")
    overrides = {
        **tls_overrides(ca, ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SASL_SSL"),
        "listener.name.controller.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_admin="{ADMIN_PASSWORD}" user_mallory="{MALLORY_PASSWORD}";',
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:CN=node,O=kraft tests;User:admin",
    }
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=overrides,
                           add_scram=[f"SCRAM-SHA-512=[name=alice,password={ALICE_PASSWORD}]"])
    cluster.start()
    yield cluster, ca
    cluster.stop()


def test_the_consumer_logs_in_with_plain_and_scram_and_the_acls_decide_what_it_reads(sasl_ssl_cluster):
    from kafka import admin as kafka_admin

    cluster, ca = sasl_ssl_cluster
    servers = cluster.bootstrap_servers()
    wait_for_leader(cluster, client_tls(ca), ClientLogin.with_password("PLAIN", "admin", ADMIN_PASSWORD))

    def scram(user: str, password: str) -> dict[str, str]:
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.cert), "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password}

    # PLAIN, as Java clients write it: admin is a super user.
    admin_settings = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
                      "ssl.truststore.location": str(ca.cert), "sasl.mechanism": "PLAIN",
                      "sasl.jaas.config": f'{PLAIN_MODULE} required username="admin" password="{ADMIN_PASSWORD}";'}
    end, as_admin = read_to(admin_settings, servers)
    assert end > 0 and [r.offset for r in as_admin] == list(range(as_admin[0].offset, end))

    # SCRAM-SHA-512: alice logs in, but no ACL lets her describe the log yet.
    with Consumer(servers, security=scram("alice", ALICE_PASSWORD)) as consumer:
        with pytest.raises(AuthorizationError, match="TOPIC_AUTHORIZATION_FAILED"):
            consumer.end_offsets([TP])

    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=servers, security_protocol="SASL_SSL", ssl_cafile=str(ca.cert),
                             sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password=ADMIN_PASSWORD,
                             request_timeout_ms=40_000)
    try:
        read = kafka_admin.ACL("User:alice", "*", kafka_admin.ACLOperation.READ, kafka_admin.ACLPermissionType.ALLOW,
                               kafka_admin.ResourcePattern(kafka_admin.ResourceType.TOPIC, TP.topic,
                                                           kafka_admin.ACLResourcePatternType.LITERAL))
        assert not admin.create_acls([read])["failed"]
    finally:
        admin.close()

    def alice_reads() -> bool:  # once every node has applied the ACL
        try:
            as_alice.extend(read_to(scram("alice", ALICE_PASSWORD), servers, end)[1])
        except AuthorizationError:
            return False
        return True

    as_alice: list[ConsumerRecord] = []
    wait_for(alice_reads, timeout=60, what="alice allowed to read the log")
    assert rows(as_alice) == rows(as_admin)

    # Refusals that no retry changes: raised at once, well inside a long api timeout.
    for settings, refused in (
        (scram("alice", "wrong"), "invalid credentials with SASL mechanism SCRAM-SHA-512; check sasl.mechanism"),
        ({**scram("alice", ALICE_PASSWORD), "sasl.mechanism": "SCRAM-SHA-256"},
         "the server offers PLAIN, SCRAM-SHA-512, not SCRAM-SHA-256"),
        ({**admin_settings, "sasl.jaas.config": f'{PLAIN_MODULE} required username="admin" password="guess";'},
         "Invalid username or password"),
    ):
        with Consumer(servers, security=settings, default_api_timeout_ms=300_000) as consumer:
            with pytest.raises(AuthenticationError, match=refused) as raised:
                consumer.end_offsets([TP])
            assert "\n" not in str(raised.value)
    mallory = {**admin_settings,
               "sasl.jaas.config": f'{PLAIN_MODULE} required username="mallory" password="{MALLORY_PASSWORD}";'}
    with Consumer(servers, security=mallory) as consumer:
        with pytest.raises(AuthorizationError, match="ACLs do not let this consumer's principal DESCRIBE"):
            consumer.end_offsets([TP])
