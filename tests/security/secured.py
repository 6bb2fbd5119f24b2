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
    """The leader's id, once every node that answers names it on its client listener (asked over
    `tls`, with `login`). Every node, not one: the tests then ask particular nodes, and a node that
    has not yet had the leader's BeginQuorumEpoch (late, under load) answers NOT_LEADER_OR_FOLLOWER."""
    found: list[int] = []

    def named() -> bool:
        leaders = set()
        for node in cluster.nodes.values():
            try:
                answer = asyncio.run(ask(node.client_port, m.describe_quorum_request(), tls, login, 5.0))
            except (OSError, ConnectionError, TimeoutError):
                continue  # a node stopped on purpose
            state = answer.topics[0].partitions[0]
            if state.error_code != ErrorCode.none or state.leader_id < 0:
                return False
            leaders.add(state.leader_id)
        if len(leaders) != 1:
            return False
        found.append(leaders.pop())
        return True

    wait_for(named, timeout=timeout, what="a leader")
    return found[0]


def node_log(cluster: LocalCluster, node_id: int) -> str:
    return Path(cluster.nodes[node_id].log_path).read_text(errors="replace")


SCRAM_512 = "SCRAM-SHA-512"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class Hardened:
    """A cluster secured as issue 25's attack found it (and as `kraft demo --secure` makes
    one): the controller listener SSL with client certificates required, the client
    listener SASL_SSL with SCRAM-SHA-512, the StandardAuthorizer with
    allow.everyone.if.no.acl.found=false, the nodes' certificate and admin super users;
    admin and alice have SCRAM credentials from `--add-scram`, and, once `grant_alice_log`
    ran, alice may READ `__cluster_metadata` and nothing else."""

    def __init__(self, directory: Path, voters: int = 3, observers: int = 0,
                 overrides: dict[str, str] | None = None) -> None:
        self.ca = CertificateAuthority(directory / "certs")
        self.passwords = {"admin": "admin-Secret-9", "alice": "alice-Secret-8"}
        overrides = {
            **tls_overrides(self.ca, self.ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SASL_SSL"),
            "listener.name.controller.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": SCRAM_512,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:CN=node,O=kraft tests;User:admin",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "3",
            **(overrides or {}),
        }
        self.cluster = LocalCluster(directory / "cluster", voters=voters, observers=observers, overrides=overrides,
                                    add_scram=[f"{SCRAM_512}=[name={u},password={p}]"
                                               for u, p in self.passwords.items()])

    def start(self) -> None:
        """Starts every node and waits until each lets admin log in (it has applied the
        bootstrap credentials) and names a leader."""
        self.cluster.start()
        self.wait_for_logins(list(self.cluster.nodes))

    def wait_for_logins(self, node_ids: list[int]) -> None:
        for node_id in node_ids:
            port = self.cluster.nodes[node_id].client_port
            wait_for(lambda p=port: self._names_a_leader(p), timeout=60, what=f"admin logging in to node {node_id}")

    def _names_a_leader(self, port: int) -> bool:
        from kraft.protocol.connection import LoginRefused

        try:
            state = self.ask(port, m.describe_quorum_request(), "admin", 5.0).topics[0].partitions[0]
        except (LoginRefused, OSError, ConnectionError, TimeoutError):
            return False
        return state.leader_id >= 0

    def leader(self) -> int:
        return wait_for_leader(self.cluster, self.tls(), self.login("admin"))

    def logs_in(self, node_id: int, user: str, password: str | None = None) -> bool:
        """Whether `user` logs in to the node's client listener (and is answered ApiVersions)."""
        from kraft.protocol.build import build_request
        from kraft.protocol.connection import LoginRefused

        request = build_request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        try:
            asyncio.run(ask(self.cluster.nodes[node_id].client_port, request, self.tls(),
                            self.login(user, password), 10.0))
        except LoginRefused:
            return False
        except (OSError, TimeoutError):
            return False
        return True

    def add_user(self, user: str, password: str) -> None:
        """A SCRAM-SHA-512 credential made by admin through AlterUserScramCredentials."""
        from kafka.admin import KafkaAdminClient, UserScramCredentialUpsertion

        admin = KafkaAdminClient(**self.kafka_python("admin"), request_timeout_ms=40_000)
        try:
            failed = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, SCRAM_512, password)])
            assert not failed.get(user), failed
        finally:
            admin.close()
        self.passwords[user] = password

    def tls(self) -> ssl.SSLContext:
        return client_tls(self.ca)

    def login(self, user: str, password: str | None = None) -> ClientLogin:
        from kraft.security.scram import ScramClient, ScramMechanism

        secret = self.passwords[user] if password is None else password
        return ClientLogin(SCRAM_512, lambda: ScramClient(ScramMechanism.SCRAM_SHA_512, user, secret))

    def ask(self, port: int, request: Any, user: str, timeout: float = 10.0) -> Any:
        return asyncio.run(ask(port, request, self.tls(), self.login(user), timeout))

    def kafka_python(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.cluster.bootstrap_servers(), "security_protocol": "SASL_SSL",
                "ssl_cafile": str(self.ca.cert), "sasl_mechanism": SCRAM_512, "sasl_plain_username": user,
                "sasl_plain_password": self.passwords[user]}

    def librdkafka(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.cluster.bootstrap_servers(), "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.ca.cert), "sasl.mechanism": SCRAM_512, "sasl.username": user,
                "sasl.password": self.passwords[user]}

    def kraft_consumer(self, user: str) -> dict[str, str]:
        """kraft's Consumer(security=...), in Kafka's client settings."""
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca.cert), "sasl.mechanism": SCRAM_512,
                "sasl.username": user, "sasl.password": self.passwords[user]}

    def kafkajs(self, user: str) -> dict[str, str]:
        return {"ca": str(self.ca.cert), "mechanism": SCRAM_512.lower(), "username": user,
                "password": self.passwords[user]}

    def create_acls(self, *acls: Any) -> None:
        """kafka-python's ACL objects, made by admin, then waited for on every running node."""
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(**self.kafka_python("admin"), request_timeout_ms=40_000)
        try:
            created = admin.create_acls(list(acls))
            assert not created["failed"], created
        finally:
            admin.close()
        wanted = {(int(a.resource_pattern.resource_type), a.resource_pattern.resource_name,
                   int(a.resource_pattern.pattern_type), a.principal, int(a.operation), int(a.permission_type))
                  for a in acls}
        for node_id, node in self.cluster.nodes.items():
            if node.running:
                wait_for(lambda n=node_id: wanted <= self._described_acls(n), timeout=60,
                         what=f"node {node_id} applying the ACLs")

    def _described_acls(self, node_id: int) -> set[tuple]:
        from kraft.protocol.build import build_request

        answer = self.ask(self.cluster.nodes[node_id].client_port, build_request(29, 2, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}), "admin")
        return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation, a.permission_type)
                for r in answer.resources for a in r.acls}

    def grant_alice_log(self) -> None:
        """The ACL `kraft demo --secure` gives its reader: READ on the metadata log."""
        from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern
        from kafka.admin import ResourceType as KResource

        self.create_acls(ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                             ResourcePattern(KResource.TOPIC, "__cluster_metadata", ACLResourcePatternType.LITERAL)))
