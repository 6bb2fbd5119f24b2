"""Consumer groups on a real cluster: three node processes, each replicating
`__consumer_offsets-0..2` as Raft logs of their own beside the metadata log, and Kafka's
own clients (kafka-python, librdkafka through confluent-kafka, kafkajs, and kcat as a
process) consuming `__cluster_metadata` with a group over real TCP: finding the coordinator,
joining, committing with the leader epoch of the last record consumed (KIP-320), a second
member of the group resuming where the first committed, and the committed offset surviving
the loss of the node that led its partition.
"""

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kraft.cli.cluster_client import request, run_async, settled_coordinators
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer
from kraft.client import TopicPartition as KraftTopicPartition
from kraft.groups import OFFSETS_TOPIC, partition_for
from kraft.protocol import ErrorCode
from kraft.raft import messages as m
from kraft.server.runtime.node import OFFSETS_TOPIC_ID

from ..server.cluster_helpers import create_topics, wait_for
from ..server.cluster_helpers import offsets_quorum as cluster_offsets_quorum

TOPIC = "__cluster_metadata"
KAFKAJS = Path(__file__).with_name("kafkajs_group.js")
GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("groups"), voters=3, observers=0, overrides=GROUPS)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def offsets_quorum(cluster: LocalCluster, partition: int) -> Any:
    return cluster_offsets_quorum([n.controller_port for n in cluster.nodes.values() if n.running], partition)


def consume_some(consumer: Any, deadline_s: float = 60) -> list[Any]:
    """kafka-python: polls until the group is joined and some records came. Each poll may
    wait long (it returns once records come): kafka-python 3.0.12 loses a rebalance whose
    SyncGroup is in flight when a poll times out, and then never gets a partition."""
    records: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while not records and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=30_000).values():
            records += batch
    assert records, "no records consumed through the group"
    return records


def describe_group(cluster: LocalCluster, group: str) -> str:
    """The group as the coordinator describes it, for a failure's message."""
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers())
        try:
            return repr(admin.describe_groups([group]))
        finally:
            admin.close()
    except Exception as e:  # the message of a failure already being reported
        return f"DescribeGroups failed: {e}"


def test_every_node_replicates_each_offsets_partition_as_a_raft_log(cluster):
    for p in range(3):
        # A leader, and its LeaderChange record committed by the followers' fetches.
        quorum = wait_for(lambda p=p: (q := offsets_quorum(cluster, p)) is not None and q.high_watermark >= 1 and q,
                          timeout=60, what=f"a leader of {OFFSETS_TOPIC}-{p} with a high watermark")
        assert sorted(v.replica_id for v in quorum.current_voters) == [1, 2, 3]
        for node in cluster.nodes.values():
            directory = node.data_dir / f"{OFFSETS_TOPIC}-{p}"
            assert (directory / "quorum-state").is_file() and list(directory.glob("*.log"))
    unknown = m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, 3)  # offsets.topic.num.partitions is 3
    answer = run_async(request(cluster.nodes[1].controller_port, m.describe_quorum_request(unknown)))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_kafka_python_group_commits_with_the_leader_epoch_and_a_second_member_resumes(cluster):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    tp = TopicPartition(TOPIC, 0)
    first = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), group_id="kp-group",
                          enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200)
    try:
        first.subscribe([TOPIC])
        records = consume_some(first)
        assert first.assignment() == {tp}
        last = records[-1]
        assert last.leader_epoch >= 1
        first.commit({tp: OffsetAndMetadata(last.offset + 1, "kp", last.leader_epoch)})
        committed = first.committed(tp, metadata=True)
        assert (committed.offset, committed.metadata, committed.leader_epoch) == (
            last.offset + 1, "kp", last.leader_epoch)
    finally:
        first.close()
    second = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), group_id="kp-group",
                           enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200)
    try:
        second.subscribe([TOPIC])
        resumed = consume_some(second)
        assert resumed[0].offset == last.offset + 1, "the second member starts at the committed offset"
    finally:
        second.close()


def test_librdkafka_group_commits_and_a_second_member_resumes(cluster):
    from confluent_kafka import Consumer, TopicPartition

    def consumer() -> Consumer:
        # A session of 10 s (librdkafka's default is 45 s), as the other clients here have: a
        # LeaveGroup lost on close (the coordinator moving under load) keeps the first member
        # in the group, and the second member's join waits out that session.
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "rdk-group",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
                      "session.timeout.ms": 10_000})
        c.subscribe([TOPIC])
        return c

    def first_message(c: Consumer) -> Any:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            message = c.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                return message
        raise AssertionError(f"no message consumed through the group: {describe_group(cluster, 'rdk-group')}")

    first = consumer()
    try:
        message = first_message(first)
        first.commit(message=message, asynchronous=False)
        [committed] = first.committed([TopicPartition(TOPIC, 0)], timeout=10)
        assert committed.error is None
        assert committed.offset == message.offset() + 1
        assert committed.leader_epoch == message.leader_epoch() >= 1
    finally:
        first.close()
    second = consumer()
    try:
        assert first_message(second).offset() == message.offset() + 1
    finally:
        second.close()


def test_a_committed_offset_survives_the_loss_of_its_partitions_leader(tmp_path: Path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaConnectionError
    from kafka.structs import OffsetAndMetadata

    group = "moving"
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=GROUPS)
    cluster.start()
    try:
        # The metadata leader hands the offsets partitions it leads to the other voters
        # (leadership_balance.py); while one is handed over, none leads it for a moment.
        settled_coordinators(cluster, [group])
        tp = TopicPartition(TOPIC, 0)
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), group_id=group,
                                 enable_auto_commit=False, fetch_max_wait_ms=200)
        try:
            consumer.assign([tp])
            consumer.commit({tp: OffsetAndMetadata(5, "before", 1)})
        finally:
            consumer.close()
        partition = partition_for(group, 3)
        old_leader = wait_for(lambda: offsets_quorum(cluster, partition), timeout=60,
                              what=f"a leader of {OFFSETS_TOPIC}-{partition}").leader_id
        cluster.kill(old_leader)
        wait_for(lambda: (q := offsets_quorum(cluster, partition)) is not None and q.leader_id != old_leader,
                 timeout=60, what=f"a new leader of {OFFSETS_TOPIC}-{partition}")
        alive = ",".join(n.client for n in cluster.nodes.values() if n.running)
        after = KafkaConsumer(bootstrap_servers=alive, group_id=group, enable_auto_commit=False)
        try:
            committed = None
            deadline = time.monotonic() + 60
            while committed is None and time.monotonic() < deadline:
                try:
                    committed = after.committed(tp, metadata=True)
                except KafkaConnectionError:  # its metadata refresh picked the killed node: ask again
                    pass
            assert committed is not None
            assert (committed.offset, committed.metadata, committed.leader_epoch) == (5, "before", 1)
        finally:
            after.close()
    finally:
        cluster.stop()


def test_kafkajs_group_commits_and_a_second_member_resumes(cluster):
    node_binary = shutil.which("node")
    assert node_binary, "Node.js is needed for kafkajs (make test installs it and kafkajs: see the Makefile)"
    run = subprocess.run([node_binary, str(KAFKAJS), cluster.bootstrap_servers(), "kafkajs-group"],
                         capture_output=True, text=True, timeout=300, cwd=KAFKAJS.parents[2])
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    committed = out["first"]["offset"] + 1
    [topic] = out["committed"]
    assert topic["topic"] == TOPIC
    assert [(p["partition"], int(p["offset"])) for p in topic["partitions"]] == [(0, committed)]
    assert out["second"]["offset"] == committed, "the second member starts at the committed offset"


def test_kcat_consumes_in_a_group_and_a_second_run_resumes_at_its_commit(cluster):
    """`kcat -G` (a librdkafka KafkaConsumer) with -e leaves at the end of the log; closing,
    it commits where it stopped. What landed is read back with kraft's own OffsetFetch."""
    kcat = shutil.which("kcat")
    assert kcat, "kcat is needed (make test installs it from Debian: see the Makefile)"
    tp = KraftTopicPartition(TOPIC, 0)

    def run() -> list[int]:
        # -e stops at the first Fetch answered without a record (librdkafka's PARTITION_EOF).
        # The controller appends a NoOp every metadata.max.idle.interval.ms (500 ms), which
        # is librdkafka's default fetch.wait.max.ms: a Fetch parked at the end of the log
        # then races the next NoOp and mostly loses, so kcat read on for 5 to 45 s (issue 26).
        # A wait well below the NoOp period ends at the first Fetch that finds the end.
        out = subprocess.run([kcat, "-G", "kcat-group", "-b", cluster.bootstrap_servers(), "-e",
                              "-X", "auto.offset.reset=earliest", "-X", "fetch.wait.max.ms=100",
                              "-f", "%o\n", TOPIC],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return [int(offset) for offset in out.stdout.split()]

    first = run()
    assert first and first == sorted(first)
    with Consumer(cluster.bootstrap_servers(), group_id="kcat-group", fetch_max_wait_ms=100) as ours:
        ours.assign([tp])
        committed = ours.committed([tp])[tp]
        assert committed is not None and committed.offset > first[-1] > 0
        create_topics(cluster, "after-kcat", 1)  # records for the second run to find
        ours.seek(tp, committed.offset)
        next_record: list[Any] = []
        wait_for(lambda: next_record.extend(ours.poll(200)) or bool(next_record), what=f"a record after offset {committed.offset}")
    second = run()
    assert second[0] == next_record[0].offset, "the second run starts at the committed offset (control records skipped)"
