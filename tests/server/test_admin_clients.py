"""Three admin clients (kafka-python, confluent-kafka, and kafkajs, not written in Python) on a
real cluster, each sending every write to a node that is not the active controller: a
follower voter, and the observer. Those nodes forward the writes (counted in their
kraft_forwarded_requests_total); what they did is checked in the metadata image through
another node.

One cluster for the module: 3 voters, 1 observer. Followers wait 20 s for a fetch before
they campaign, so the leader found at the start stays the leader (a follower that took
over would answer its clients itself, forwarding nothing). Every node's server.properties
sets log.segment.bytes (a STATIC_BROKER_CONFIG), and the cluster-wide default of
log.retention.bytes is set dynamically (DYNAMIC_DEFAULT_BROKER_CONFIG).

Each client is pointed at its node alone. Metadata from a node names that node as the
controller, so clients that follow it (kafkajs, librdkafka) send their admin writes there;
kafka-python sends each request to a random broker it knows, so it is pinned to the node.
"""

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from kafka.admin import KafkaAdminClient

from kraft.cli.cluster_client import leader, request, run_async, scrape
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request

from .cluster_helpers import wait_for

SEGMENT_BYTES = "536870912"  # in every server.properties
RETENTION_BYTES = "123456789"  # every broker's dynamic default
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
KAFKAJS = Path(__file__).with_name("kafkajs_admin.js")


class Admins(NamedTuple):
    cluster: LocalCluster
    leader: int
    follower: int
    observer: int

    def target(self, role: str) -> int:
        return self.follower if role == "follower" else self.observer

    def other(self, node: int) -> int:
        """A node that is neither `node` nor the leader: the image is read back there."""
        return next(n for n in self.cluster.nodes if n not in (node, self.leader))


def ask(cluster: LocalCluster, node: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return run_async(request(cluster.nodes[node].client_port, build_request(api_key, version, body), 40.0))


def brokers(cluster: LocalCluster, node: int) -> set[int]:
    response = ask(cluster, node, 3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    return {b.node_id for b in response.brokers}


def partitions(cluster: LocalCluster, node: int, topic: str) -> list[Any]:
    """The topic's partitions in the node's image, as its Metadata lists them."""
    response = ask(cluster, node, 3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    return list(response.topics[0].partitions)


def described(cluster: LocalCluster, node: int, resource_type: int, name: str) -> dict[str, Any]:
    """The resource's configs as the node describes them, by name (synonyms included)."""
    response = ask(cluster, node, 32, 4, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": True,
    })
    result = response.results[0]
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


def forwarded(cluster: LocalCluster, node: int) -> dict[str, float]:
    """kraft_forwarded_requests_total by API, on the node."""
    prefix = 'kraft_forwarded_requests_total{api="'
    return {k[len(prefix):-2]: v for k, v in scrape(cluster, node).items() if k.startswith(prefix)}


def forwarded_since(admins: Admins, node: int, before: dict[str, float]) -> set[str]:
    """The APIs the node forwarded at least once since `before`."""
    return {api for api, count in forwarded(admins.cluster, node).items() if count > before.get(api, 0)}


@pytest.fixture(scope="module")
def admins(tmp_path_factory) -> Any:
    c = LocalCluster(tmp_path_factory.mktemp("admins") / "cluster", voters=3, observers=1, overrides={
        "controller.quorum.fetch.timeout.ms": "20000",
        "log.segment.bytes": SEGMENT_BYTES,
    })
    c.start()
    try:
        for node in c.nodes:
            wait_for(lambda node=node: brokers(c, node) == {1, 2, 3, 4}, timeout=60,
                     what=f"node {node} to list every broker")
        default = ask(c, 4, 44, 1, {"validate_only": False, "resources": [{
            "resource_type": BROKER, "resource_name": "",
            "configs": [{"name": "log.retention.bytes", "config_operation": 0, "value": RETENTION_BYTES}]}]})
        assert default.responses[0].error_code == ErrorCode.none
        for node in c.nodes:
            wait_for(lambda node=node: described(c, node, BROKER, "").get("log.retention.bytes") is not None,
                     timeout=60, what=f"node {node} to apply the default broker config")
        leader_id, _ = leader(c)  # settled by now (a second election can follow the first at once)
        yield Admins(c, leader_id, next(n for n in c.voter_ids if n != leader_id), 4)
    finally:
        c.stop()


def check_topic_configs(admins: Admins, node: int, topic: str, dynamic: dict[str, str]) -> None:
    """The topic's configs on `node` once it has applied the writes: `dynamic` set on the
    topic, and the defaults from every other level."""
    c = admins.cluster
    wait_for(lambda: {k: v.value for k, v in described(c, node, TOPIC, topic).items()
                      if v.config_source == DYNAMIC_TOPIC} == dynamic, timeout=60,
             what=f"node {node} to show {dynamic} set on {topic}")
    configs = described(c, node, TOPIC, topic)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (SEGMENT_BYTES, STATIC)
    assert [(s.name, s.source) for s in configs["segment.bytes"].synonyms] == [
        ("log.segment.bytes", STATIC), ("log.segment.bytes", DEFAULT)]
    assert (configs["retention.bytes"].value, configs["retention.bytes"].config_source) == (
        RETENTION_BYTES, DYNAMIC_DEFAULT)
    assert (configs["segment.ms"].value, configs["segment.ms"].config_source) == ("604800000", DEFAULT)
    assert configs["segment.ms"].documentation and not configs["segment.ms"].read_only
    for name, value in dynamic.items():
        assert configs[name].synonyms[0].name == name and configs[name].synonyms[0].value == value


# ---------------------------------------------------------------- kafka-python


@pytest.mark.parametrize("role", ["follower", "observer"])
def test_kafka_python_admin_writes_anywhere(admins, role):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidPartitionsError

    node = admins.target(role)
    topic = f"kafka-python-{role}"
    before = forwarded(admins.cluster, node)
    admin = KafkaAdminClient(bootstrap_servers=admins.cluster.nodes[node].client, request_timeout_ms=40_000)
    admin._manager.least_loaded_node = lambda: node  # kafka-python picks a random broker per request
    try:
        admin.create_topics([NewTopic(topic, 1, 2, topic_configs={"retention.ms": "3600000"})], timeout_ms=30_000)
        admin.create_partitions({topic: 3}, timeout_ms=30_000)
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 2}, timeout_ms=30_000)
        # IncrementalAlterConfigs keeps retention.ms; the legacy AlterConfigs names the whole set.
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": "compact"})])
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(node), {"message.max.bytes": "2000000"})],
                            incremental=False)
        broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node))],
                                        include_synonyms=True, config_filter="all")["broker"][str(node)]
    finally:
        admin.close()
    assert forwarded_since(admins, node, before) == {
        "create_topics", "create_partitions", "incremental_alter_configs", "alter_configs"}
    assert broker["log.segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker["num.io.threads"]["config_source"] == "DEFAULT_CONFIG" and broker["num.io.threads"]["value"] == "8"
    assert broker["log.retention.hours"]["read_only"] and not broker["log.retention.ms"]["read_only"]
    other = admins.other(node)
    wait_for(lambda: len(partitions(admins.cluster, other, topic)) == 3, timeout=60, what="3 partitions elsewhere")
    assert all(len(p.replica_nodes) == 2 for p in partitions(admins.cluster, other, topic))
    check_topic_configs(admins, other, topic, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    # The broker config is this broker's own: it shows on the topic where that broker describes it.
    wait_for(lambda: described(admins.cluster, node, TOPIC, topic)["max.message.bytes"].config_source
             == DYNAMIC_BROKER, timeout=60, what="the broker's dynamic message.max.bytes")
    assert described(admins.cluster, node, TOPIC, topic)["max.message.bytes"].value == "2000000"


# ---------------------------------------------------------------- confluent-kafka


@pytest.mark.parametrize("role", ["follower", "observer"])
def test_confluent_kafka_admin_writes_anywhere(admins, role):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
    )

    node = admins.target(role)
    topic = f"confluent-{role}"
    before = forwarded(admins.cluster, node)
    admin = AdminClient({"bootstrap.servers": admins.cluster.nodes[node].client})
    new = NewTopic(topic, num_partitions=1, replication_factor=2, config={"retention.ms": "3600000"})
    admin.create_topics([new])[topic].result(60)  # operation_timeout 0: Kafka still waits for the commit
    admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=30)[topic].result(60)
    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions(topic, 2)], operation_timeout=30)[topic].result(60)
    assert shrink.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    # The legacy AlterConfigs replaces the whole set: retention.ms goes.
    legacy = ConfigResource("TOPIC", topic, set_config={"cleanup.policy": "compact"})
    with pytest.warns(DeprecationWarning):  # confluent-kafka still sends it, with a warning
        next(iter(admin.alter_configs([legacy]).values())).result(60)
    incremental = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("segment.jitter.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    next(iter(admin.incremental_alter_configs([incremental]).values())).result(60)
    broker = next(iter(admin.describe_configs([ConfigResource("BROKER", str(node))]).values())).result(60)
    # librdkafka sends admin writes to the controller its latest Metadata answer named, and a
    # node names itself: the first write goes to `node`, later ones to whichever node it last
    # refreshed metadata from (on a loaded run, sometimes the leader itself, unforwarded).
    sent_through = forwarded_since(admins, node, before)
    assert "create_topics" in sent_through
    assert sent_through <= {"create_topics", "create_partitions", "alter_configs", "incremental_alter_configs"}
    assert broker["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert (broker["log.retention.bytes"].value, broker["log.retention.bytes"].source) == (
        RETENTION_BYTES, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert broker["log.roll.hours"].is_read_only and broker["log.roll.hours"].value == "168"
    other = admins.other(node)
    wait_for(lambda: len(partitions(admins.cluster, other, topic)) == 3, timeout=60, what="3 partitions elsewhere")
    check_topic_configs(admins, other, topic, {"cleanup.policy": "compact", "segment.jitter.ms": "1000"})
    topic_configs = next(iter(admin.describe_configs([ConfigResource("TOPIC", topic)]).values())).result(60)
    assert topic_configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # removed by the legacy call


# ---------------------------------------------------------------- kafkajs


@pytest.mark.parametrize("role", ["follower", "observer"])
def test_kafkajs_admin_writes_anywhere(admins, role):
    node_binary = shutil.which("node")
    assert node_binary, "Node.js is needed for kafkajs (make test installs it and kafkajs: see the Makefile)"
    node = admins.target(role)
    topic = f"kafkajs-{role}"
    before = forwarded(admins.cluster, node)
    run = subprocess.run([node_binary, str(KAFKAJS), admins.cluster.nodes[node].client, topic, str(node)],
                         capture_output=True, text=True, timeout=300, cwd=KAFKAJS.parents[2])
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["created"] is True
    assert out["shrinking"] == ["INVALID_PARTITIONS"]
    assert forwarded_since(admins, node, before) == {"create_topics", "create_partitions", "alter_configs"}
    topic_result, broker_result = out["described"]["resources"]
    assert topic_result["errorCode"] == 0 and broker_result["errorCode"] == 0
    topic_configs = {c["configName"]: c for c in topic_result["configEntries"]}
    assert topic_configs["segment.bytes"]["configValue"] == SEGMENT_BYTES
    assert topic_configs["segment.bytes"]["configSynonyms"][0]["configSource"] == STATIC
    broker_configs = {c["configName"]: c for c in broker_result["configEntries"]}
    assert broker_configs["num.network.threads"]["configValue"] == "3"
    assert broker_configs["log.retention.hours"]["readOnly"] is True
    other = admins.other(node)
    wait_for(lambda: len(partitions(admins.cluster, other, topic)) == 3, timeout=60, what="3 partitions elsewhere")
    check_topic_configs(admins, other, topic, {"cleanup.policy": "compact"})  # the legacy call removed retention.ms
    wait_for(lambda: described(admins.cluster, node, BROKER, str(node))["message.max.bytes"].config_source
             == DYNAMIC_BROKER, timeout=60, what="the broker's dynamic message.max.bytes")


# ---------------------------------------------------------------- the API on the wire


def create_partitions(admins: Admins, node: int, topic: str, count: int, assignments: list[list[int]] | None = None,
                      validate_only: bool = False) -> Any:
    response = ask(admins.cluster, node, 37, 3, {
        "topics": [{"name": topic, "count": count,
                    "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments]}],
        "timeout": timedelta(seconds=30), "validate_only": validate_only,
    })
    return response.results[0]


def test_create_partitions_refuses_as_kafka_does(admins):
    node = admins.observer
    c = admins.cluster
    created = ask(c, node, 19, 7, {"topics": [{"name": "grow", "num_partitions": 2, "replication_factor": 2,
                                                "assignments": [], "configs": []}],
                                   "timeout": timedelta(seconds=30), "validate_only": False})
    assert created.topics[0].error_code == ErrorCode.none
    refusals = [
        (create_partitions(admins, node, "grow", 2), ErrorCode.invalid_partitions, "already has 2"),
        (create_partitions(admins, node, "grow", 1), ErrorCode.invalid_partitions, "would not be an increase"),
        (create_partitions(admins, node, "nowhere", 3), ErrorCode.unknown_topic_or_partition, "topic"),
        (create_partitions(admins, node, "grow", 4, [[1, 2]]), ErrorCode.invalid_replica_assignment, "only 1"),
        (create_partitions(admins, node, "grow", 3, [[1, 1]]), ErrorCode.invalid_replica_assignment, "more than once"),
        (create_partitions(admins, node, "grow", 3, [[1, 99]]), ErrorCode.invalid_replica_assignment,
         "no such broker"),
        (create_partitions(admins, node, "grow", 3, [[1, 2, 3]]), ErrorCode.invalid_replica_assignment,
         "previous partitions, which have 2"),
    ]
    for result, error, words in refusals:
        assert result.error_code == error and words in result.error_message, result
    assert create_partitions(admins, node, "grow", 5, validate_only=True).error_code == ErrorCode.none
    assert create_partitions(admins, node, "grow", 3, [[3, 4]]).error_code == ErrorCode.none
    wait_for(lambda: len(partitions(c, admins.leader, "grow")) == 3, timeout=60, what="the third partition")
    third = partitions(c, admins.leader, "grow")[2]
    assert (list(third.replica_nodes), third.leader_id) == ([3, 4], 3)  # as assigned; validate_only added none


def test_legacy_alter_configs_replaces_the_whole_set_and_validates(admins):
    node = admins.follower
    c = admins.cluster

    def alter(configs: dict[str, str | None], validate_only: bool = False, name: str = "whole") -> Any:
        return ask(c, node, 33, 2, {"validate_only": validate_only, "resources": [{
            "resource_type": TOPIC, "resource_name": name,
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}]}).responses[0]

    created = ask(c, node, 19, 7, {"topics": [{"name": "whole", "num_partitions": 1, "replication_factor": 1,
                                                "assignments": [], "configs": [
                                                    {"name": "retention.ms", "value": "1000"},
                                                    {"name": "segment.ms", "value": "2000"}]}],
                                   "timeout": timedelta(seconds=30), "validate_only": False})
    assert created.topics[0].error_code == ErrorCode.none
    assert alter({"cleanup.policy": "compact"}, validate_only=True).error_code == ErrorCode.none
    bad = alter({"cleanup.policy": "sometimes"})
    assert bad.error_code == ErrorCode.invalid_config and "sometimes" in bad.error_message
    assert alter({"retention.ms": None}).error_code == ErrorCode.invalid_request  # Kafka's null check
    assert alter({"retention.ms": "1"}, name="nowhere").error_code == ErrorCode.unknown_topic_or_partition
    assert alter({"message.timestamp.type": "LogAppendTime", "preallocate": "true"}).error_code == ErrorCode.none
    # retention.ms and segment.ms were not named: gone, back to their defaults.
    check_topic_configs(admins, admins.other(node), "whole", {"message.timestamp.type": "LogAppendTime",
                                                               "preallocate": "true"})


def test_metadata_names_the_answering_node_as_controller(admins):
    """Kafka's KRaft brokers name a live broker, not the active controller (KIP-590)."""
    for node in admins.cluster.nodes:
        response = ask(admins.cluster, node, 3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False})
        assert response.controller_id == node


def test_describe_configs_of_another_broker_is_refused_as_kafka_does(admins):
    response = ask(admins.cluster, admins.follower, 32, 4, {"resources": [
        {"resource_type": BROKER, "resource_name": str(admins.observer), "configuration_keys": None},
        {"resource_type": BROKER, "resource_name": "one", "configuration_keys": None},
        {"resource_type": BROKER, "resource_name": str(admins.follower), "configuration_keys": ["num.io.threads"]},
    ], "include_synonyms": False, "include_documentation": False})
    other, bad, own = response.results
    assert other.error_code == ErrorCode.invalid_request and "Unexpected broker id" in other.error_message
    assert bad.error_code == ErrorCode.invalid_request and "must be an integer" in bad.error_message
    assert [(c.name, c.value, c.config_source, c.synonyms, c.documentation) for c in own.configs] == [
        ("num.io.threads", "8", DEFAULT, (), None)]


def test_describe_quorum_in_every_version_kafka_defines(admins):
    """v0 without fetch times, v1, v2 (KIP-853) with directory ids and the voters'
    controller endpoints; kafka-python's describe_metadata_quorum asks v2 and reads its
    error message, so it failed while kraft served v1 only."""
    cluster = admins.cluster
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    for version in (0, 1, 2):
        answer = ask(cluster, admins.observer, 55, version, body)  # forwarded to the leader, as Kafka's brokers do
        (p,) = answer.topics[0].partitions
        assert (p.error_code, p.leader_id) == (ErrorCode.none, admins.leader)
        assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
        assert [o.replica_id for o in p.observers] == [4]
        if version >= 1:
            assert all(v.last_fetch_timestamp > 0 for v in p.current_voters if v.replica_id != admins.leader)
        if version >= 2:
            assert {n.node_id: (n.listeners[0].host, n.listeners[0].port) for n in answer.nodes} == {
                n: ("127.0.0.1", cluster.nodes[n].controller_port) for n in (1, 2, 3)}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers())
    try:
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    (p,) = quorum["topics"][0]["partitions"]
    assert p["leader_id"] == admins.leader and sorted(v["replica_id"] for v in p["current_voters"]) == [1, 2, 3]
    assert sorted(n["node_id"] for n in quorum["nodes"]) == [1, 2, 3]


def test_acls_without_an_authorizer_are_security_disabled_as_kafkas(admins):
    """No authorizer.class.name: Kafka's AclApis answers CreateAcls, DescribeAcls and
    DeleteAcls SECURITY_DISABLED and keeps nothing; so does every node here, and kraft's tool
    prints Kafka's line for it."""
    topic_acl = {"resource_type": 2, "resource_name": "unguarded", "resource_pattern_type": 3,
                 "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    any_acl = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    for node in (admins.leader, admins.follower, admins.observer):
        created = ask(admins.cluster, node, 30, 3, {"creations": [topic_acl]})
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (ErrorCode.security_disabled, "No Authorizer is configured.")]
        deleted = ask(admins.cluster, node, 31, 3, {"filters": [any_acl]})
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.security_disabled]
        described_acls = ask(admins.cluster, node, 29, 3, any_acl)
        assert (described_acls.error_code, list(described_acls.resources)) == (ErrorCode.security_disabled, [])
    listed = subprocess.run([sys.executable, "-m", "kraft.cli", "acls", "--bootstrap-server",
                             f"127.0.0.1:{admins.cluster.nodes[admins.follower].client_port}", "--list"],
                            capture_output=True, text=True, timeout=120)
    assert (listed.returncode, listed.stdout) == (1, "Error while executing ACL command: org.apache.kafka.common."
                                                     "errors.SecurityDisabledException: No Authorizer is configured "
                                                     "on the broker\n")
