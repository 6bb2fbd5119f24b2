"""`make demo SECURE=1` (`kraft demo --secure`): the demo's cluster secured as Kafka's users
secure one, and a step that shows the security at work.

- **The nodes** hold one certificate (CN=kraft-node) from a CA the demo makes
  (`kraft.security.local_ca`). The controller listener is SSL and requires a client
  certificate, and the nodes' principal is the super user that the Raft and broker APIs
  need (CLUSTER_ACTION): another certificate from the same CA reaches the listener but
  may not vote.
- **The client listener** is SASL_SSL with SCRAM-SHA-512. `admin`'s credential is written
  before the first start, as `kraft storage format --add-scram` writes it; admin is a super
  user and does everything the plain demo's admin client does. `reader`'s credential is
  made by admin through AlterUserScramCredentials, and two ACLs let reader READ the log and
  the demo's consumer group (kraft-demo).
- **The readers** (kraft's consumer, Spark, the group's kafka-python consumer) log in as
  reader, with Kafka's client settings.
- **Refused, and shown:** reader creating a topic, taking over a group of admin's (reading,
  overwriting and deleting its offsets: GROUP_AUTHORIZATION_FAILED, the offset kept), a
  wrong password, and a Vote from a certificate that is not the nodes'. Any of them going
  through fails the demo.

Passwords are made for each run and never printed.
"""

import asyncio
import secrets
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from kraft.cli.cluster_client import find_coordinator, request, run_async
from kraft.cli.local_cluster import LocalCluster
from kraft.client import AuthenticationError, AuthorizationError, Consumer, TopicPartition
from kraft.client.security import client_security
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import ClientLogin, KafkaConnection
from kraft.raft import messages as m

ADMIN, READER = "admin", "reader"
MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LOG = TopicPartition("__cluster_metadata", 0)
READER_GROUP = "kraft-demo"  # demo_groups.GROUP: the group the demo's consumer joins as reader
ADMINS_GROUP = "admin-jobs"


class DemoSecurity:
    """The CA, the nodes' certificate, the users' passwords, and every client's settings."""

    def __init__(self, directory: Path) -> None:
        from kraft.security.local_ca import CertificateAuthority  # `cryptography`, installed with the dev extra

        self.ca = CertificateAuthority(directory, name="kraft demo CA", organization="kraft demo")
        self.node = self.ca.issue("kraft-node")
        self.passwords = {ADMIN: secrets.token_urlsafe(12), READER: secrets.token_urlsafe(12)}

    def overrides(self) -> dict[str, str]:
        """server.properties for every node."""
        return {
            "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.node.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.cert),
            "listener.name.controller.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": MECHANISM,
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:CN=kraft-node,O=kraft demo;User:{ADMIN}",
        }

    def add_scram(self) -> list[str]:
        """kafka-storage's --add-scram for admin, written into the log before the first start."""
        return [f"{MECHANISM}=[name={ADMIN},password={self.passwords[ADMIN]}]"]

    def settings(self, user: str, password: str | None = None) -> dict[str, str]:
        """Kafka's client settings for `user` (kraft's consumer; Spark's with "kafka." before each)."""
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca.cert), "sasl.mechanism": MECHANISM,
                "sasl.username": user, "sasl.password": self.passwords[user] if password is None else password}

    def kafka_python(self, user: str) -> dict[str, Any]:
        """The same for kafka-python's clients, in its keyword arguments."""
        return {"security_protocol": "SASL_SSL", "ssl_cafile": str(self.ca.cert), "sasl_mechanism": MECHANISM,
                "sasl_plain_username": user, "sasl_plain_password": self.passwords[user]}

    def connection(self) -> tuple[ssl.SSLContext | None, ClientLogin | None]:
        """TLS and login for the demo's own requests, as admin."""
        return client_security(self.settings(ADMIN), "kraft demo")


def show(console: Console, cluster: LocalCluster, security: DemoSecurity, leader: int,
         leader_and_epoch: Callable[[], tuple[int, int]]) -> None:
    """The security step: a user and an ACL made through Kafka's admin API, kraft's consumer
    reading as that user, and three refusals. RuntimeError if anything refused goes through."""
    from kafka import admin as kafka_admin
    from kafka.errors import TopicAuthorizationFailedError

    servers = cluster.bootstrap_servers()
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000, client_id="kraft-demo",
                             **security.kafka_python(ADMIN))
    try:
        failed = admin.alter_user_scram_credentials(
            [kafka_admin.UserScramCredentialUpsertion(READER, MECHANISM, security.passwords[READER])])
        if failed.get(READER):
            raise RuntimeError(f"AlterUserScramCredentials for {READER} failed: {failed[READER]}")
        acls = [kafka_admin.ACL(f"User:{READER}", "*", kafka_admin.ACLOperation.READ,
                                kafka_admin.ACLPermissionType.ALLOW,
                                kafka_admin.ResourcePattern(resource, name, kafka_admin.ACLResourcePatternType.LITERAL))
                for resource, name in ((kafka_admin.ResourceType.TOPIC, LOG.topic),
                                       (kafka_admin.ResourceType.GROUP, READER_GROUP))]
        if admin.create_acls(acls)["failed"]:
            raise RuntimeError(f"CreateAcls for {READER} failed")
    finally:
        admin.close()
    console.print(f"admin (a super user; its {MECHANISM} credential written by --add-scram before the first "
                  f"start) made {READER}'s credential by AlterUserScramCredentials (the request carries a salted "
                  f"password; the log holds salt and keys only) and two ACLs: ALLOW User:{READER} READ on topic "
                  f"{LOG.topic} and on group {READER_GROUP}")

    count, end = _read_as_reader(cluster, security)
    console.print(f"kraft.client.Consumer as {READER} over SASL_SSL: {count} records up to offset {end}")

    refused = []
    reader = kafka_admin.KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000, client_id="kraft-demo-reader",
                              **security.kafka_python(READER))
    try:
        reader.create_topics([kafka_admin.NewTopic("not-allowed", 1, 1)])
    except TopicAuthorizationFailedError:
        refused.append(f"{READER} creating a topic: TOPIC_AUTHORIZATION_FAILED (its ACL allows READ on the log only)")
    finally:
        reader.close()
    refused += _takeover(cluster, security)
    try:
        with Consumer(servers, security=security.settings(READER, password="not-the-password")) as consumer:
            consumer.end_offsets([LOG])
    except AuthenticationError as e:
        refused.append(f"{READER} with a wrong password: {str(e).split(': ', 1)[1]}")
    before = leader_and_epoch()
    answer = _vote_from_a_stranger(cluster, security, leader, before[1])
    if answer == ErrorCode.cluster_authorization_failed and leader_and_epoch() == before:
        refused.append("a certificate from the same CA, not the nodes', sending Vote to the controller listener: "
                       f"CLUSTER_AUTHORIZATION_FAILED; node {before[0]} still leads epoch {before[1]}")
    if len(refused) != 4:
        raise RuntimeError(f"security is not working: only {len(refused)} of 4 refusals happened ({refused})")
    for line in refused:
        console.print(f"[bold]refused:[/] {line}")


def _read_as_reader(cluster: LocalCluster, security: DemoSecurity, timeout: float = 60.0) -> tuple[int, int]:
    """(records, end offset) kraft's consumer reads as reader from the log start to the
    high watermark, once every node has applied reader's credential and ACL."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Consumer(cluster.bootstrap_servers(), security=security.settings(READER),
                          auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
                consumer.assign([LOG])
                end = consumer.end_offsets([LOG])[LOG].offset
                count = 0
                while consumer.position(LOG) < end:
                    count += sum(1 for r in consumer.poll(500) if r.offset < end)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{READER} did not read up to offset {end} within {timeout:.0f} s")
                return count, end
        except (AuthenticationError, AuthorizationError) as e:  # not applied on every node yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"{READER} still refused after {timeout:.0f} s: {e}") from None
            time.sleep(0.2)


def _takeover(cluster: LocalCluster, security: DemoSecurity) -> list[str]:
    """admin commits an offset in a group of its own; reader, with no ACL on that group,
    tries to read it, overwrite it and delete the group. One line if every attempt is
    refused and admin's offset is still there; none otherwise."""
    admin_tls, admin_login = security.connection()
    reader_tls, reader_login = client_security(security.settings(READER), "kraft demo")
    port = find_coordinator(cluster, ADMINS_GROUP, tls=admin_tls, login=admin_login).port

    def commit(offset: int) -> Any:
        return build_request(8, 8, {"group_id": ADMINS_GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                                    "group_instance_id": None, "topics": [{"name": LOG.topic, "partitions": [
                                        {"partition_index": LOG.partition, "committed_offset": offset,
                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}]})

    fetch = build_request(9, 8, {"require_stable": False, "groups": [
        {"group_id": ADMINS_GROUP, "member_id": None, "member_epoch": -1, "topics": None}]})
    run_async(request(port, commit(7), 10.0, admin_tls, admin_login))
    answers = [
        run_async(request(port, fetch, 10.0, reader_tls, reader_login)).groups[0].error_code,
        run_async(request(port, commit(0), 10.0, reader_tls, reader_login)).topics[0].partitions[0].error_code,
        run_async(request(port, build_request(42, 2, {"groups_names": [ADMINS_GROUP]}), 10.0, reader_tls,
                          reader_login)).results[0].error_code,
    ]
    kept = run_async(request(port, fetch, 10.0, admin_tls, admin_login)).groups[0]
    offsets = [p.committed_offset for t in kept.topics for p in t.partitions]
    if answers != [ErrorCode.group_authorization_failed] * 3 or offsets != [7]:
        return []
    return [f"{READER} reading, overwriting and deleting admin's group {ADMINS_GROUP}: GROUP_AUTHORIZATION_FAILED "
            "each time (no ACL on that group); admin's offset 7 is kept"]


def _vote_from_a_stranger(cluster: LocalCluster, security: DemoSecurity, leader: int, epoch: int) -> ErrorCode:
    """A Vote for a new epoch sent to the leader's controller listener with a certificate the
    CA signed for someone else: the TLS handshake succeeds, the authorizer refuses."""
    stranger = security.ca.issue("stranger")
    tls, _ = client_security({"security.protocol": "SSL", "ssl.ca.location": str(security.ca.cert),
                              "ssl.certificate.location": str(stranger.cert),
                              "ssl.key.location": str(stranger.key)}, "kraft demo")
    candidate = next(v for v in cluster.voter_ids if v != leader)
    vote = m.vote_request(cluster.cluster_id, epoch + 1, candidate, epoch, 1 << 40)

    async def ask() -> ErrorCode:
        connection = await KafkaConnection.connect("127.0.0.1", cluster.nodes[leader].controller_port, tls=tls)
        try:
            return (await connection.request(vote, 10.0)).error_code
        finally:
            connection.close()

    return asyncio.run(ask())
