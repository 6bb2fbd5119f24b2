"""`kraft consumer-groups` against live clusters: the lag of groups of kafka-python,
confluent-kafka (librdkafka) and kafkajs while their members consume `__cluster_metadata`,
in the columns Kafka's ConsumerGroupCommand prints; the documented examples (list,
describe, reset, delete) on a plain and a secured cluster; a reset keeping the leader epoch
of the offset it sets (KIP-320), and refused on a group with members."""

import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ..server.cluster_helpers import wait_for

TOPIC = "__cluster_metadata"
KAFKAJS = Path(__file__).with_name("kafkajs_member.js")


def offsets_row(group: str, partition: Any, offset: Any, end: Any, lag: Any, member: str, host: str,
                client: str, widths: tuple[str, ...] = ()) -> str:
    """A line of Kafka's describe (printOffsetFormat): group, topic, consumer id and host as
    wide as their widest value (`widths` holds the others of the table), at least 15."""
    g, t, m, h = (max(15, len(x), *(len(w) for w in widths[i::4])) for i, x in
                  enumerate((group, TOPIC if partition != "PARTITION" else "TOPIC", member, host)))
    topic = "TOPIC" if partition == "PARTITION" else TOPIC
    return (f"{group:<{g}} {topic:<{t}} {partition!s:<10} {offset!s:<15} {end!s:<15} {lag!s:<15} "
            f"{member:<{m}} {host:<{h}} {client}")


def header(group: str, member: str, host: str) -> str:
    return offsets_row("GROUP", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                       "CLIENT-ID", (group, TOPIC, member, host))


def log_end(tools) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=tools.cluster.bootstrap_servers(), **tools.kafka_python)
    try:
        return consumer.end_offsets([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)]
    finally:
        consumer.close()


def described_group(tools, group: str) -> dict[str, Any]:
    """DescribeGroups as kafka-python's admin client answers it."""
    admin = tools.admin()
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


def member_of(tools, group: str) -> dict[str, Any] | None:
    """The group's one member, once the group is stable; None before."""
    described = described_group(tools, group)
    stable = described["group_state"] == "Stable" and len(described["members"]) == 1
    return described["members"][0] if stable else None


def coordinator_of(tools, group: str) -> str:
    """The coordinator as Kafka's tool names it (host:port  (id)), from FindCoordinator."""
    from kraft.cli.cluster_client import run_async

    async def find() -> str:
        from kraft.cli.admin_client import Admin
        from kraft.cli.admin_connection import read_command_config

        settings = read_command_config(str(tools.config) if tools.config else None)
        async with Admin([("127.0.0.1", tools.cluster.nodes[1].client_port)], settings) as admin:
            node, _ = await admin.coordinator(group)
        return f"{node.host}:{node.port}  ({node.node_id})"
    return run_async(find())


# ---------------------------------------------------------------- members that stay while the tool looks


@contextmanager
def polling(poll: Callable[[], object]) -> Iterator[None]:
    """Keeps a member in its group (its heartbeats and polls) until the block ends."""
    stop = threading.Event()
    keeper = threading.Thread(target=lambda: [poll() for _ in iter(stop.is_set, True)])
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()


@contextmanager
def kafka_python_member(tools, group: str, client_id: str) -> Iterator[int]:
    """A kafka-python member that committed the offset after its fifth record and stays."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=tools.cluster.bootstrap_servers(), group_id=group,
                             client_id=client_id, enable_auto_commit=False, auto_offset_reset="earliest",
                             **tools.kafka_python)
    try:
        consumer.subscribe([TOPIC])
        records: list[Any] = []
        wait_for(lambda: records.extend(r for b in consumer.poll(timeout_ms=5000).values() for r in b)
                 or len(records) >= 5, timeout=90, what="kafka-python consuming")
        consumer.pause(tp)
        committed = records[4].offset + 1
        consumer.commit({tp: OffsetAndMetadata(committed, "", records[4].leader_epoch)})
        with polling(lambda: consumer.poll(timeout_ms=200)):
            yield committed
    finally:
        consumer.close()


@contextmanager
def confluent_member(tools, group: str, client_id: str) -> Iterator[int]:
    """A librdkafka member (confluent-kafka) that committed the offset after its third record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": tools.cluster.bootstrap_servers(), "group.id": group,
                         "client.id": client_id, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 10000})
    try:
        consumer.subscribe([TOPIC])
        records: list[Any] = []

        def consumed() -> bool:
            message = consumer.poll(5)
            if message is not None and message.error() is None:
                records.append(message)
            return len(records) >= 3
        wait_for(consumed, timeout=120, what="confluent-kafka consuming")
        tp = TopicPartition(TOPIC, 0)
        consumer.pause([tp])
        committed = records[2].offset() + 1
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, committed)], asynchronous=False)
        with polling(lambda: consumer.poll(0.2)):
            yield committed
    finally:
        consumer.close()


@contextmanager
def kafkajs_member(tools, group: str, client_id: str) -> Iterator[int]:
    node = shutil.which("node")
    assert node, "Node.js is needed for kafkajs (make test installs it and kafkajs: see the Makefile)"
    process = subprocess.Popen([node, str(KAFKAJS), tools.cluster.bootstrap_servers(), group, client_id],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=KAFKAJS.parents[2])
    try:
        line = process.stdout.readline()
        assert line, process.stderr.read()
        yield json.loads(line)["committed"]
    finally:
        process.stdin.close()
        process.wait(timeout=60)


@pytest.mark.parametrize("client", [kafka_python_member, confluent_member, kafkajs_member],
                         ids=["kafka-python", "confluent-kafka", "kafkajs"])
def test_describe_shows_the_lag_of_a_real_clients_group_while_it_consumes(plain, client):
    group, client_id = f"lag-{client.__name__}", f"{client.__name__}-client"
    with client(plain, group, client_id) as committed:
        wait_for(lambda: member_of(plain, group) is not None, what="the member in a stable group")
        member = member_of(plain, group)
        before = log_end(plain)
        described = plain.kraft("consumer-groups", "--describe", "--group", group)
        after = log_end(plain)
        assert described.returncode == 0, described
        blank, head, row = described.stdout.split("\n")[:3]
        assert blank == "" and described.stdout.endswith("\n")
        end = int(row.split()[4])
        assert before <= end <= after, "the log end is the partition's high watermark as the tool read it"
        assert row == offsets_row(group, 0, committed, end, end - committed, member["member_id"],
                                  member["client_host"], client_id)
        assert head == header(group, member["member_id"], member["client_host"])

        members = plain.kraft("consumer-groups", "--describe", "--group", group, "--members", "--verbose")
        width = max(15, len(member["member_id"]))
        assert members.stdout.split("\n")[2] == (
            f"{group:<15} {member['member_id']:<{width}} {'/127.0.0.1':<15} {client_id:<15} {'1':<15} (0)")
        state = plain.kraft("consumer-groups", "--describe", "--group", group, "--state")
        coordinator = coordinator_of(plain, group)
        assert state.stdout.split("\n")[2] == (f"{group:<{max(25, len(coordinator))}} {coordinator:<25} "
                                                f"{described_group(plain, group)['protocol_data']:<20} {'Stable':<15} 1")

        refused = plain.kraft("consumer-groups", "--reset-offsets", "--group", group, "--to-earliest",
                              "--all-topics", "--execute")
        assert refused.returncode == 1
        assert refused.stdout.startswith(f"\nError: Assignments can only be reset if the group '{group}' is "
                                         "inactive, but the current state is Stable.\n")
    after_reset_refusal = plain.kraft("consumer-groups", "--describe", "--group", group, "--offsets")
    assert f" {committed} " in after_reset_refusal.stdout.split("\n")[2], "the refused reset changed nothing"


def epoch_of(tools, offset: int) -> int:
    """The leader epoch of the record at `offset`, as kafka-python reads it."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=tools.cluster.bootstrap_servers(), enable_auto_commit=False,
                             **tools.kafka_python)
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        found: list[Any] = []
        wait_for(lambda: found.extend(consumer.poll(timeout_ms=2000).get(tp, [])) or bool(found),
                 what=f"the record at {offset}")
        assert found[0].offset == offset
        return found[0].leader_epoch
    finally:
        consumer.close()


def committed_of(tools, group: str) -> Any:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=tools.cluster.bootstrap_servers(), group_id=group,
                             enable_auto_commit=False, **tools.kafka_python)
    try:
        return consumer.committed(TopicPartition(TOPIC, 0), metadata=True)
    finally:
        consumer.close()


def test_the_documented_examples_on_an_empty_group(tools):
    group = f"docs-{tools.name}"
    with kafka_python_member(tools, group, "docs-client") as committed:
        listed = tools.kraft("consumer-groups", "--list")
        assert group in listed.stdout.splitlines()
        states = tools.kraft("consumer-groups", "--list", "--state", "stable")
        assert f"{group:<25} {'Stable':<20}" in states.stdout.splitlines()
    empty = tools.kraft("consumer-groups", "--describe", "--group", group)
    assert empty.returncode == 0
    assert empty.stderr == f"\nConsumer group '{group}' has no active members.\n"
    end = int(empty.stdout.split("\n")[2].split()[4])
    assert empty.stdout.split("\n")[2] == offsets_row(group, 0, committed, end, end - committed, "-", "-", "-")

    # --dry-run prints the plan and changes nothing; --execute commits it, with the epoch of
    # the record before the offset (KIP-320), which Kafka's tool would leave out.
    target = committed + 3
    plan = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--topic", TOPIC, "--to-offset",
                       str(target), "--dry-run")
    assert plan.stdout == (f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"
                           f"\n{group:<30} {TOPIC:<30} {0:<10} {target:<15}\n")
    assert committed_of(tools, group).offset == committed
    done = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--topic", TOPIC, "--to-offset",
                       str(target), "--execute")
    assert done.returncode == 0 and done.stdout == plan.stdout
    after = committed_of(tools, group)
    assert (after.offset, after.leader_epoch) == (target, epoch_of(tools, target - 1))

    shifted = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-2",
                          "--export", "--dry-run")
    assert shifted.stdout == f"{TOPIC},0,{target - 2}\n\n"
    plan_file = Path(tools.cluster.directory) / f"plan-{group}.csv"
    plan_file.write_text(shifted.stdout)
    from_file = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--from-file", str(plan_file),
                            "--execute")
    assert from_file.returncode == 0, from_file
    assert committed_of(tools, group).offset == target - 2

    # By time: every record is after 2020, so the first at or after it is the log start;
    # none is after now plus a day, so Kafka's tool warns and falls back to the log end.
    earliest = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--to-earliest")
    by_date = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--to-datetime",
                          "2020-01-01T00:00:00.000", "--dry-run")
    assert by_date.returncode == 0 and by_date.stdout == earliest.stdout, by_date
    future = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
                         "--by-duration=-P1D", "--dry-run")
    assert future.stdout.startswith(f"\nWarn: Partition 0 from topic {TOPIC} is empty. Falling back to latest known "
                                    "offset.\n"), future
    bad_date = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--to-datetime",
                           "yesterday", "--dry-run")
    assert (bad_date.returncode, bad_date.stdout) == (
        1, "\nError: Executing consumer group command failed due to java.text.ParseException: Error parsing "
           "timestamp. It does not contain a 'T' according to ISO8601 format\n")

    latest = tools.kraft("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--to-latest",
                         "--execute")
    new = int(latest.stdout.split("\n")[2].split()[-1])
    after = committed_of(tools, group)
    assert after.offset == new and after.leader_epoch == epoch_of(tools, new - 1)

    offsets_gone = tools.kraft("consumer-groups", "--delete-offsets", "--group", group, "--topic", TOPIC)
    assert offsets_gone.stdout == (f"Request succeed for deleting offsets with topic {TOPIC} group {group}\n"
                                   f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"
                                   f"\n{TOPIC:<30} {0:<15} {'Successful':<15}\n")
    assert committed_of(tools, group) is None

    deleted = tools.kraft("consumer-groups", "--delete", "--group", group)
    assert deleted.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    gone = tools.kraft("consumer-groups", "--describe", "--group", group)
    assert (gone.returncode, gone.stdout) == (1, f"\nError: Consumer group '{group}' does not exist.\n")


def test_usage_errors_are_kafkas_lines(plain):
    no_group = plain.kraft("consumer-groups", "--describe")
    assert (no_group.returncode, no_group.stderr) == (
        1, "Option [describe] takes one of these options: [group], [all-groups]\n")
    two = plain.kraft("consumer-groups", "--reset-offsets", "--group", "g", "--to-earliest", "--to-latest",
                      "--dry-run", "--all-topics")
    assert two.stderr == 'Option "[to-earliest]" can\'t be used with option "[to-latest]"\n'
    bad_state = plain.kraft("consumer-groups", "--list", "--state", "sleepy")
    assert bad_state.stderr == ("Invalid state list 'sleepy'. Valid states are: PreparingRebalance, "
                                "CompletingRebalance, Stable, Dead, Empty, Assigning, Reconciling\n")
    assert all("Traceback" not in r.stderr for r in (no_group, two, bad_state))
