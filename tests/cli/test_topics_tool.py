"""`kraft topics` against live clusters (plain and secured), its output compared line for
line with what Kafka's kafka-topics prints (TopicCommand's formats) for the state
kafka-python's admin client reads back."""

import base64
import uuid

from ..server.cluster_helpers import wait_for

ELR = "\tElr: N/A\tLastKnownElr: N/A"  # Kafka's tool over Metadata (no DescribeTopicPartitions)


def kafka_describe(tools, topic: str, partitions: int) -> list[str]:
    """What TopicCommand prints for `topic`, from kafka-python's view of it once that shows
    `partitions` partitions (the node it asks may not have applied the last change yet)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = tools.admin()
    found = []
    try:
        def seen() -> bool:
            found[:] = admin.describe_topics([topic])
            return found[0]["error_code"] == 0 and len(found[0]["partitions"]) == partitions
        wait_for(seen, what=f"kafka-python seeing {topic} with {partitions} partitions")
        described = found[0]
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    finally:
        admin.close()
    topic_id = base64.urlsafe_b64encode(uuid.UUID(described["topic_id"]).bytes).decode().rstrip("=")
    ordered = sorted(described["partitions"], key=lambda p: p["partition_index"])
    overridden = ",".join(f"{k}={v['value']}" for k, v in configs.items() if v["config_source"] != "DEFAULT_CONFIG")
    lines = [f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: {len(ordered)}\tReplicationFactor: "
             f"{len(ordered[0]['replica_nodes'])}\tConfigs: {overridden}"]
    for p in ordered:
        leader = p["leader_id"] if p["leader_id"] >= 0 else "none"
        lines.append(f"\tTopic: {topic}\tPartition: {p['partition_index']}\tLeader: {leader}\tReplicas: "
                     f"{','.join(map(str, p['replica_nodes']))}\tIsr: {','.join(map(str, p['isr_nodes']))}{ELR}")
    return lines


def test_the_documented_examples_print_what_kafkas_tool_prints(tools):
    topic = f"orders-{tools.name}"
    created = tools.kraft("topics", "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "2",
                          "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact")
    assert (created.returncode, created.stdout, created.stderr) == (0, f"Created topic {topic}.\n", "")

    listed = tools.kraft("topics", "--list")
    assert listed.returncode == 0
    names = listed.stdout.splitlines()
    assert topic in names and "__cluster_metadata" in names and names == sorted(names)
    assert tools.kraft("topics", "--list", "--topic", f"orders-{tools.name}.*").stdout == f"{topic}\n"
    assert "__cluster_metadata" not in tools.kraft("topics", "--list", "--exclude-internal").stdout

    described = tools.kraft("topics", "--describe", "--topic", topic)
    assert described.returncode == 0, described
    assert described.stdout.splitlines() == kafka_describe(tools, topic, 3)
    assert "retention.ms=86400000" in described.stdout and "cleanup.policy=compact" in described.stdout

    altered = tools.kraft("topics", "--alter", "--topic", topic, "--partitions", "4")
    assert (altered.returncode, altered.stdout) == (0, "")
    described = tools.kraft("topics", "--describe", "--topic", topic)
    assert described.stdout.splitlines() == kafka_describe(tools, topic, 4)
    assert "PartitionCount: 4" in described.stdout

    deleted = tools.kraft("topics", "--delete", "--topic", topic)
    assert (deleted.returncode, deleted.stdout) == (0, "")
    wait_for(lambda: topic not in tools.kraft("topics", "--list").stdout, what="the topic gone")


def test_a_manual_replica_assignment_and_the_partition_reports(tools):
    topic = f"assigned-{tools.name}"
    created = tools.kraft("topics", "--create", "--topic", topic, "--replica-assignment", "1:2,2:1",
                          "--config", "min.insync.replicas=2")
    assert created.returncode == 0, created
    lines = kafka_describe(tools, topic, 2)
    assert "\tReplicas: 1,2\t" in lines[1] and "\tReplicas: 2,1\t" in lines[2]
    # ISR 2 of min.insync.replicas 2: at the minimum, not under it; every leader live.
    at_min = tools.kraft("topics", "--describe", "--topic", topic, "--at-min-isr-partitions")
    assert at_min.stdout.splitlines() == lines[1:]
    for report in ("--under-min-isr-partitions", "--unavailable-partitions", "--under-replicated-partitions"):
        shown = tools.kraft("topics", "--describe", "--topic", topic, report)
        assert (shown.returncode, shown.stdout) == (0, ""), report
    overrides = tools.kraft("topics", "--describe", "--topic", topic, "--topics-with-overrides")
    assert overrides.stdout.splitlines() == lines[:1]
    refused = tools.kraft("topics", "--create", "--topic", f"{topic}-2", "--replica-assignment", "1:9")
    assert refused.returncode == 1
    assert refused.stdout == ("Error while executing topic command : The manual partition assignment includes broker "
                              "9, but no such broker is registered.\n")


def test_a_fenced_broker_makes_its_partitions_under_replicated(plain):
    topic = "on-every-broker"
    assert plain.kraft("topics", "--create", "--topic", topic, "--replica-assignment", "4:1,2:3").returncode == 0
    plain.cluster.stop(4)
    try:
        def reported() -> bool:
            return plain.kraft("topics", "--describe", "--topic", topic,
                               "--under-replicated-partitions").stdout.count("\n") == 1
        wait_for(reported, timeout=60, what="partition 0 under-replicated once broker 4 is fenced")
        shown = plain.kraft("topics", "--describe", "--topic", topic, "--under-replicated-partitions").stdout
        assert shown == f"\tTopic: {topic}\tPartition: 0\tLeader: 1\tReplicas: 4,1\tIsr: 1{ELR}\n"
    finally:
        plain.cluster.start(4)
    plain.brokers_unfenced(4)


def test_errors_are_kafkas_lines_and_exit_1(tools):
    missing = tools.kraft("topics", "--describe", "--topic", "no-such-topic")
    assert (missing.returncode, missing.stdout) == (
        1, "Error while executing topic command : Topic 'Optional[no-such-topic]' does not exist as expected\n")
    assert tools.kraft("topics", "--describe", "--topic", "no-such-topic", "--if-exists").returncode == 0
    topic = f"twice-{tools.name}"
    assert tools.kraft("topics", "--create", "--topic", topic).returncode == 0
    again = tools.kraft("topics", "--create", "--topic", topic)
    assert (again.returncode, again.stdout) == (1, f"Error while executing topic command : Topic '{topic}' already "
                                                   "exists.\n")
    assert tools.kraft("topics", "--create", "--topic", topic, "--if-not-exists").returncode == 0
    bad_config = tools.kraft("topics", "--create", "--topic", f"{topic}-x", "--config", "retention.msx=1")
    assert bad_config.stdout == "Error while executing topic command : Unknown topic config name: retention.msx\n"
    no_action = tools.kraft("topics")
    assert (no_action.returncode, no_action.stderr) == (
        1, "Command must include exactly one action: --list, --describe, --create, --alter or --delete\n")
    both = tools.kraft("topics", "--create", "--topic", "x", "--partitions", "1", "--replica-assignment", "1")
    assert both.stderr == 'Option "[replica-assignment]" can\'t be used with option "[partitions]"\n'
    assert "Traceback" not in missing.stderr + again.stderr + bad_config.stderr + no_action.stderr


def test_a_server_that_is_not_there_is_one_line(plain):
    down = plain.kraft("topics", "--bootstrap-server", "127.0.0.1:1", "--list", connect=False)
    assert down.returncode == 1 and "Traceback" not in down.stderr
    assert down.stdout.startswith("Error while executing topic command : no bootstrap server answered (127.0.0.1:1)")
    assert down.stdout.count("\n") == 1
