"""Issue 25's group takeover, on a real cluster secured as the attack found it (`Hardened`):
alice, whose one ACL is READ on `__cluster_metadata`, tries every group API on admin's group
(read its offset, list and describe it, overwrite the offset, join and sync as its leader,
delete its offsets, delete it) and is refused each time with Kafka's errors, while admin's
group and offset stay as they were. A group alice is then allowed (a PREFIXED READ) works
for kafka-python, confluent-kafka (librdkafka) and kafkajs."""

import json
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kraft.cli.cluster_client import find_coordinator
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request

from ..groups.test_real_clients import KAFKAJS, consume_some
from ..server.cluster_helpers import wait_for
from .secured import Hardened

TOPIC = "__cluster_metadata"
E = ErrorCode


@pytest.fixture(scope="module")
def hardened(tmp_path_factory):
    secured = Hardened(tmp_path_factory.mktemp("takeover"), voters=3)
    secured.start()
    try:
        secured.grant_alice_log()
        yield secured
    finally:
        secured.cluster.stop()


def admins_group(secured: Hardened) -> tuple[int, int]:
    """admin's kafka-python consumer joins admin-group, reads the log and commits; returns
    (the committed offset, the coordinator's client port)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(**secured.kafka_python("admin"), group_id="admin-group", enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=200)
    try:
        consumer.subscribe([TOPIC])
        last = consume_some(consumer)[-1]
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(last.offset + 1, "admin's", last.leader_epoch)})
    finally:
        consumer.close()
    found = find_coordinator(secured.cluster, "admin-group", tls=secured.tls(), login=secured.login("admin"))
    return last.offset + 1, found.port


def offsets_of(secured: Hardened, port: int, user: str, group: str) -> Any:
    return secured.ask(port, build_request(9, 8, {"require_stable": False, "groups": [
        {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]}), user).groups[0]


def test_alice_cannot_read_change_join_or_delete_admins_group(hardened):
    secured = hardened
    committed, port = admins_group(secured)

    def as_alice(api: int, version: int, fields: dict) -> Any:
        return secured.ask(port, build_request(api, version, fields), "alice")

    found = as_alice(10, 3, {"key": "admin-group", "key_type": 0})
    assert (found.error_code, found.node_id) == (E.group_authorization_failed, -1)
    fetched = offsets_of(secured, port, "alice", "admin-group")
    assert (fetched.error_code, fetched.topics) == (E.group_authorization_failed, ())
    listed = as_alice(16, 4, {"states_filter": []})
    assert "admin-group" not in [g.group_id for g in listed.groups]
    described = as_alice(15, 5, {"groups": ["admin-group"], "include_authorized_operations": True})
    assert (described.groups[0].error_code, described.groups[0].members) == (E.group_authorization_failed, ())
    overwrite = as_alice(8, 8, {"group_id": "admin-group", "generation_id_or_member_epoch": -1, "member_id": "",
                                "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                                    {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                     "committed_metadata": "alice's"}]}]})
    assert overwrite.topics[0].partitions[0].error_code == E.group_authorization_failed
    join = {"group_id": "admin-group", "session_timeout": timedelta(seconds=10),
            "rebalance_timeout": timedelta(seconds=10), "member_id": "", "group_instance_id": None,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    joined = as_alice(11, 5, join)
    assert (joined.error_code, joined.member_id) == (E.group_authorization_failed, "")
    synced = as_alice(14, 3, {"group_id": "admin-group", "generation_id": 1, "member_id": "x",
                              "group_instance_id": None, "assignments": [{"member_id": "x", "assignment": b""}]})
    assert synced.error_code == E.group_authorization_failed
    deleted_offsets = as_alice(47, 0, {"group_id": "admin-group", "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]})
    assert deleted_offsets.error_code == E.group_authorization_failed
    deleted = as_alice(42, 2, {"groups_names": ["admin-group"]})
    assert deleted.results[0].error_code == E.group_authorization_failed

    # admin's group and offset are as they were.
    kept = offsets_of(secured, port, "admin", "admin-group")
    assert kept.error_code == E.none
    assert [(t.name, p.partition_index, p.committed_offset, p.metadata) for t in kept.topics for p in t.partitions] == [
        (TOPIC, 0, committed, "admin's")]
    described = secured.ask(port, build_request(15, 5, {"groups": ["admin-group"],
                                                        "include_authorized_operations": False}), "admin")
    assert (described.groups[0].error_code, described.groups[0].group_state) == (E.none, "Empty")

    # A Kafka client as alice meets Kafka's exception.
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    consumer = KafkaConsumer(**secured.kafka_python("alice"), group_id="admin-group", enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        consumer.subscribe([TOPIC])
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(timeout_ms=1000)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def alices_groups(hardened):
    """alice may READ the groups whose names start with alice-."""
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern
    from kafka.admin import ResourceType as KResource

    hardened.create_acls(ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                             ResourcePattern(KResource.GROUP, "alice-", ACLResourcePatternType.PREFIXED)))
    return hardened


def test_kafka_python_in_a_group_alice_may_read(alices_groups):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    secured = alices_groups
    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(**secured.kafka_python("alice"), group_id="alice-kp", enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=200)
    try:
        consumer.subscribe([TOPIC])
        last = consume_some(consumer)[-1]
        consumer.commit({tp: OffsetAndMetadata(last.offset + 1, "", last.leader_epoch)})
        assert consumer.committed(tp) == last.offset + 1
    finally:
        consumer.close()


def test_librdkafka_in_a_group_alice_may_read(alices_groups):
    from confluent_kafka import Consumer, TopicPartition

    secured = alices_groups
    consumer = Consumer({**secured.librdkafka("alice"), "group.id": "alice-rdk", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10_000})
    try:
        consumer.subscribe([TOPIC])
        messages: list[Any] = []

        def polled() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
            return bool(messages)

        wait_for(polled, timeout=120, what="librdkafka consuming in alice-rdk")
        consumer.commit(message=messages[0], asynchronous=False)
        [committed] = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
        assert (committed.error, committed.offset) == (None, messages[0].offset() + 1)
    finally:
        consumer.close()


def test_kafkajs_in_a_group_alice_may_read(alices_groups):
    secured = alices_groups
    node_binary = shutil.which("node")
    assert node_binary, "Node.js is needed for kafkajs (make test installs it and kafkajs: see the Makefile)"
    run = subprocess.run([node_binary, str(KAFKAJS), secured.cluster.bootstrap_servers(), "alice-js",
                          json.dumps(secured.kafkajs("alice"))],
                         capture_output=True, text=True, timeout=300, cwd=Path(KAFKAJS).parents[2])
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    [topic] = out["committed"]
    assert [(p["partition"], int(p["offset"])) for p in topic["partitions"]] == [(0, out["first"]["offset"] + 1)]
    assert out["second"]["offset"] == out["first"]["offset"] + 1
