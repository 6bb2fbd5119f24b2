"""ACLs as Kafka's StandardAuthorizer decides them: the rules on their own, then a cluster
with the authorizer on, where ACLs are made, described and deleted by Kafka clients, a user
is allowed and refused through a forwarding node, and a rogue client that logged in to the
controller listener is refused every Raft and broker-lifecycle API."""

import asyncio
import uuid

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import ClientLogin
from kraft.raft import messages as m
from kraft.raft.membership_messages import add_raft_voter_request, remove_raft_voter_request, update_raft_voter_request
from kraft.records.control import VoterEndpoint
from kraft.security.acl import Acl, AclFilter, AclOperation, Authorizer, ResourceType
from kraft.security.acl import AclPermissionType as Permission
from kraft.security.acl import PatternType as Pattern
from kraft.security.plain import PlainClient

from ..server.cluster_helpers import wait_for
from .secured import PLAIN_MODULE, ask, wait_for_leader

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
READ, DESCRIBE, WRITE, CREATE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.CREATE


def acl(name: str, pattern: Pattern, principal: str, operation: AclOperation, permission: Permission,
        resource: ResourceType = TOPIC, host: str = "*") -> Acl:
    return Acl(resource, name, pattern, principal, host, operation, permission)


def test_the_standard_authorizers_rules():
    acls = [
        acl("orders", Pattern.LITERAL, "User:alice", READ, Permission.ALLOW),
        acl("pay-", Pattern.PREFIXED, "User:*", WRITE, Permission.ALLOW),
        acl("pay-secret", Pattern.LITERAL, "User:bob", WRITE, Permission.DENY),
        acl("*", Pattern.LITERAL, "User:carol", AclOperation.ALL, Permission.ALLOW),
        acl("hosts", Pattern.LITERAL, "User:alice", READ, Permission.ALLOW, host="10.0.0.1"),
    ]
    strict = Authorizer(acls, frozenset({"User:admin"}), allow_if_no_acl=False)
    assert strict.authorize("User:alice", "127.0.0.1", READ, TOPIC, "orders")
    assert strict.authorize("User:alice", "127.0.0.1", DESCRIBE, TOPIC, "orders")  # READ implies DESCRIBE
    assert not strict.authorize("User:alice", "127.0.0.1", WRITE, TOPIC, "orders")
    assert not strict.authorize("User:bob", "127.0.0.1", READ, TOPIC, "orders")
    assert strict.authorize("User:bob", "127.0.0.1", WRITE, TOPIC, "pay-ins")  # prefixed, any user
    assert not strict.authorize("User:bob", "127.0.0.1", WRITE, TOPIC, "pay-secret")  # a deny wins
    assert strict.authorize("User:carol", "127.0.0.1", AclOperation.DELETE, TOPIC, "anything")  # wildcard, ALL
    assert not strict.authorize("User:alice", "127.0.0.1", READ, TOPIC, "hosts")  # another host's ACL
    assert strict.authorize("User:alice", "10.0.0.1", READ, TOPIC, "hosts")
    assert strict.authorize("User:admin", "127.0.0.1", AclOperation.ALTER, CLUSTER, "kafka-cluster")  # super user
    # A resource no ACL names: allow.everyone.if.no.acl.found decides (carol's wildcard names every topic).
    assert not strict.authorize("User:bob", "127.0.0.1", CREATE, CLUSTER, "kafka-cluster")
    lenient = Authorizer(acls, frozenset(), allow_if_no_acl=True)
    assert lenient.authorize("User:bob", "127.0.0.1", CREATE, CLUSTER, "kafka-cluster")
    assert not lenient.authorize("User:bob", "127.0.0.1", READ, TOPIC, "orders")  # it has ACLs: not open


def test_filters_match_as_kafkas():
    prefixed = acl("pay-", Pattern.PREFIXED, "User:bob", WRITE, Permission.ALLOW)
    literal = acl("pay-ins", Pattern.LITERAL, "User:bob", WRITE, Permission.ALLOW)
    anything = AclFilter(ResourceType.ANY, None, Pattern.ANY, None, None, AclOperation.ANY, Permission.ANY)
    assert anything.matches(prefixed) and anything.matches(literal)
    match = AclFilter(TOPIC, "pay-ins", Pattern.MATCH, None, None, AclOperation.ANY, Permission.ANY)
    assert match.matches(prefixed) and match.matches(literal)  # both apply to the topic pay-ins
    exact = AclFilter(TOPIC, "pay-", Pattern.LITERAL, None, None, AclOperation.ANY, Permission.ANY)
    assert not exact.matches(prefixed) and not exact.matches(literal)
    assert AclFilter(TOPIC, None, Pattern.UNKNOWN, None, None, AclOperation.ANY, Permission.ANY).unknown


USERS = {"node": "node-pw", "admin": "admin-pw", "alice": "alice-pw", "mallory": "mallory-pw"}


@pytest.fixture
def acl_cluster(tmp_path):
    """One voter and an observer (which forwards), both listeners SASL_PLAINTEXT with PLAIN,
    the authorizer on, the nodes and admin super users."""
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    overrides = {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required username="node" password="node-pw" {users};',
        "listener.name.plaintext.plain.sasl.jaas.config": f"{PLAIN_MODULE} required {users};",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:node;User:admin",
    }
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=1, overrides=overrides)
    cluster.start()
    yield cluster
    cluster.stop()


def login(user: str) -> ClientLogin:
    return ClientLogin("PLAIN", lambda: PlainClient(user, USERS[user]))


def kafka_python(cluster: LocalCluster, user: str, node: int = 2) -> dict:
    return {"bootstrap_servers": cluster.nodes[node].client, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def test_a_rogue_login_on_the_controller_listener_is_refused_every_cluster_api(acl_cluster):
    cluster = acl_cluster
    wait_for_leader(cluster, login=login("admin"))
    before = asyncio.run(ask(cluster.nodes[1].client_port, m.describe_quorum_request(), login=login("admin")))
    epoch = before.topics[0].partitions[0].leader_epoch
    cluster_id = cluster.cluster_id
    rogue = {
        "Vote": m.vote_request(cluster_id, epoch + 1, 3, epoch, 1 << 40),
        "BeginQuorumEpoch": m.begin_quorum_request(cluster_id, 3, epoch + 1),
        "EndQuorumEpoch": m.end_quorum_request(cluster_id, 1, epoch, (3,)),
        "Fetch as a voter": m.fetch_request(cluster_id, 3, epoch, 0, 0, 0, 0, 1 << 20),
        "FetchSnapshot": m.fetch_snapshot_request(cluster_id, 3, epoch, (1, epoch), 0, 1 << 20),
        "BrokerRegistration": build_request(62, 3, {
            "broker_id": 1, "cluster_id": cluster_id, "incarnation_id": None, "listeners": [], "features": [],
            "rack": None, "log_dirs": [], "previous_broker_epoch": -1}),
        "BrokerHeartbeat": build_request(63, 1, {
            "broker_id": 1, "broker_epoch": 0, "current_metadata_offset": 0, "want_fence": True,
            "want_shut_down": True, "offline_log_dirs": []}),
        "Envelope": build_request(58, 0, {"request_data": b"", "request_principal": b"", "client_host_address": b""}),
        "UpdateRaftVoter": update_raft_voter_request(cluster_id, epoch, 3, uuid.UUID(int=3),
                                                     (VoterEndpoint("CONTROLLER", "evil", 1),), (0, 1)),
    }
    # AddRaftVoter and RemoveRaftVoter need ALTER on the cluster, on either listener (a broker
    # forwards them under its own login, so its client listener checks the caller first).
    changes = {
        "AddRaftVoter": add_raft_voter_request(cluster_id, 1000, 9, uuid.UUID(int=9),
                                               (VoterEndpoint("CONTROLLER", "evil", 1),)),
        "RemoveRaftVoter": remove_raft_voter_request(cluster_id, 3, uuid.UUID(int=0)),
    }
    port = cluster.nodes[1].controller_port
    for name, request in rogue.items():
        answer = asyncio.run(ask(port, request, login=login("mallory")))
        assert answer.error_code == ErrorCode.cluster_authorization_failed, name
    for name, request in changes.items():
        for listener in (port, cluster.nodes[2].client_port):
            answer = asyncio.run(ask(listener, request, login=login("mallory")))
            assert answer.error_code == ErrorCode.cluster_authorization_failed, (name, listener)
    # The node's own login is a super user's: it is served.
    answer = asyncio.run(ask(port, m.describe_quorum_request(), login=login("node")))
    assert answer.topics[0].partitions[0].leader_epoch == epoch  # the rogue requests changed nothing
    refused = asyncio.run(ask(cluster.nodes[1].client_port, m.describe_quorum_request(), login=login("mallory")))
    assert refused.error_code == ErrorCode.cluster_authorization_failed  # DESCRIBE on the cluster


def test_acls_made_described_and_deleted_by_kafka_clients_decide_forwarded_writes(acl_cluster):
    from confluent_kafka.admin import AclBindingFilter, AdminClient, ResourcePatternType
    from confluent_kafka.admin import AclOperation as COp
    from confluent_kafka.admin import AclPermissionType as CPermission
    from confluent_kafka.admin import ResourceType as CResource
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import (
        ResourceType as KResource,
    )
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    cluster = acl_cluster
    wait_for_leader(cluster, login=login("admin"))

    def create_as_alice(name: str) -> None:
        """Through the observer, which forwards: decided on the controller as alice."""
        admin = KafkaAdminClient(**kafka_python(cluster, "alice"), request_timeout_ms=40_000)
        try:
            admin._manager.least_loaded_node = lambda: 2
            admin.create_topics([NewTopic(name, 1, 1)], timeout_ms=30_000)
        finally:
            admin.close()

    def brokers_up() -> bool:  # a topic needs an unfenced broker; alice is refused before that matters
        answer = asyncio.run(ask(cluster.nodes[1].client_port, build_request(60, 1, {
            "include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": False}),
            login=login("admin")))
        return len(answer.brokers) == 2

    wait_for(brokers_up, timeout=60, what="both brokers unfenced")
    with pytest.raises(TopicAuthorizationFailedError):
        create_as_alice("alice-1")

    admin = KafkaAdminClient(**kafka_python(cluster, "admin", node=1), request_timeout_ms=40_000)
    try:
        allow = ACL("User:alice", "*", ACLOperation.CREATE, ACLPermissionType.ALLOW,
                    ResourcePattern(KResource.TOPIC, "alice-", ACLResourcePatternType.PREFIXED))
        deny = ACL("User:alice", "*", ACLOperation.CREATE, ACLPermissionType.DENY,
                   ResourcePattern(KResource.TOPIC, "alice-2", ACLResourcePatternType.LITERAL))
        created = admin.create_acls([allow, deny])
        assert not created["failed"] and len(created["succeeded"]) == 2
        wait_for(lambda: _try(create_as_alice, "alice-1"), timeout=60, what="alice allowed by the ACL")
        with pytest.raises(TopicAuthorizationFailedError):
            create_as_alice("alice-2")  # the DENY wins
        with pytest.raises(TopicAuthorizationFailedError):
            create_as_alice("bob-1")  # no ACL covers it
        everything = ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(KResource.ANY, None, ACLResourcePatternType.ANY))
        described, error = admin.describe_acls(everything)
        assert {(a.resource_pattern.resource_name, a.permission_type) for a in described} == {
            ("alice-", ACLPermissionType.ALLOW), ("alice-2", ACLPermissionType.DENY)}
        deleted = admin.delete_acls([ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ALLOW,
                                               ResourcePatternFilter(KResource.TOPIC, "alice-",
                                                                     ACLResourcePatternType.LITERAL))])
        assert deleted[0][1] == []  # a LITERAL filter does not match a PREFIXED ACL
        deleted = admin.delete_acls([ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ALLOW,
                                               ResourcePatternFilter(KResource.TOPIC, "alice-", ACLResourcePatternType.ANY))])
        assert [a.resource_pattern.resource_name for a in deleted[0][1]] == ["alice-"]
    finally:
        admin.close()
    with pytest.raises(TopicAuthorizationFailedError):
        create_as_alice("alice-3")  # the ALLOW is gone
    alice = KafkaAdminClient(**kafka_python(cluster, "alice", node=1), request_timeout_ms=10_000)
    try:
        escalation = alice.create_acls([ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                                            ResourcePattern(KResource.CLUSTER, "kafka-cluster",
                                                            ACLResourcePatternType.LITERAL))])
        assert escalation == {"succeeded": [], "failed": [ClusterAuthorizationFailedError]}
    finally:
        alice.close()

    # librdkafka reads the remaining DENY.
    confluent = AdminClient({"bootstrap.servers": cluster.nodes[2].client, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw"})

    def remaining() -> list[tuple]:  # the observer answers from its image: once it applied the delete
        bindings = confluent.describe_acls(AclBindingFilter(CResource.ANY, None, ResourcePatternType.ANY, None,
                                                            None, COp.ANY, CPermission.ANY)).result(30)
        return [(b.name, b.principal, b.operation, b.permission_type) for b in bindings]

    wait_for(lambda: remaining() == [("alice-2", "User:alice", COp.CREATE, CPermission.DENY)], timeout=60,
             what="librdkafka describing the remaining DENY")


def _try(action, *args) -> bool:  # noqa: ANN001
    from kafka.errors import TopicAuthorizationFailedError

    try:
        action(*args)
    except TopicAuthorizationFailedError:
        return False
    return True


def test_over_tls_only_the_certificates_the_acls_allow_act_as_nodes(tmp_path):
    """The controller listener requires certificates; the nodes' (CN=node) is a super user,
    another certificate from the same CA is refused every cluster API."""
    from kraft.security.local_ca import CertificateAuthority

    from .secured import client_tls, tls_overrides

    ca = CertificateAuthority(tmp_path / "certs")
    overrides = {**tls_overrides(ca, ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SSL"),
                 "listener.name.controller.ssl.client.auth": "required",
                 "listener.name.plaintext.ssl.client.auth": "requested",  # a certificate names its holder
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:CN=node,O=kraft tests"}
    with LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides=overrides) as cluster:
        cluster.start()
        node = cluster.nodes[1]
        as_node, as_rogue = client_tls(ca, ca.issue("node")), client_tls(ca, ca.issue("rogue"))

        def registered() -> bool:  # the node's own registration, over its certificate
            answer = asyncio.run(ask(node.client_port, build_request(60, 1, {
                "include_cluster_authorized_operations": False, "endpoint_type": 1,
                "include_fenced_brokers": True}), as_node))
            return answer.error_code == ErrorCode.none and len(answer.brokers) == 1

        wait_for(registered, timeout=60, what="the node registered as a broker")
        epoch = asyncio.run(ask(node.controller_port, m.describe_quorum_request(), as_node)
                            ).topics[0].partitions[0].leader_epoch
        vote = m.vote_request(cluster.cluster_id, epoch + 1, 1, epoch, 1 << 40)
        assert asyncio.run(ask(node.controller_port, vote, as_rogue)).error_code == \
            ErrorCode.cluster_authorization_failed
        heartbeat = build_request(63, 1, {"broker_id": 1, "broker_epoch": 0, "current_metadata_offset": 0,
                                          "want_fence": True, "want_shut_down": True, "offline_log_dirs": []})
        assert asyncio.run(ask(node.controller_port, heartbeat, as_rogue)).error_code == \
            ErrorCode.cluster_authorization_failed
        assert registered()
        anonymous = asyncio.run(ask(node.client_port, m.describe_quorum_request(), client_tls(ca)))
        assert anonymous.error_code == ErrorCode.cluster_authorization_failed  # no certificate: User:ANONYMOUS


def test_reading_the_log_needs_read_and_metadata_shows_only_what_may_be_described(acl_cluster):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
    )
    from kafka.admin import ResourceType as KResource

    cluster = acl_cluster
    leader_id = wait_for_leader(cluster, login=login("admin"))
    port = cluster.nodes[leader_id].client_port
    metadata = build_request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    list_offsets = build_request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "__cluster_metadata", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                        "timestamp": -1}]}]})

    def as_alice(request):  # noqa: ANN001, ANN202
        return asyncio.run(ask(port, request, login=login("alice")))

    assert [t.name for t in as_alice(metadata).topics] == []  # nothing she may describe
    assert as_alice(list_offsets).topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    snapshot = as_alice(m.fetch_snapshot_request(cluster.cluster_id, -1, 1, (1, 1), 0, 1024))
    assert snapshot.error_code == ErrorCode.topic_authorization_failed

    admin = KafkaAdminClient(**kafka_python(cluster, "admin", node=1), request_timeout_ms=40_000)
    try:
        read = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                   ResourcePattern(KResource.TOPIC, "__cluster_metadata", ACLResourcePatternType.LITERAL))
        assert not admin.create_acls([read])["failed"]
    finally:
        admin.close()
    wait_for(lambda: [t.name for t in as_alice(metadata).topics] == ["__cluster_metadata"], timeout=60,
             what="the log described to alice (READ implies DESCRIBE)")
    assert as_alice(list_offsets).topics[0].partitions[0].error_code == ErrorCode.none
    consumer = KafkaConsumer(**kafka_python(cluster, "alice", node=leader_id), enable_auto_commit=False,
                             group_id=None, fetch_max_wait_ms=200)
    try:
        tp = TopicPartition("__cluster_metadata", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = []
        wait_for(lambda: bool(records.extend(r for batch in consumer.poll(timeout_ms=500).values() for r in batch))
                 or len(records) > 0, timeout=30, what="alice reading the log")
    finally:
        consumer.close()
