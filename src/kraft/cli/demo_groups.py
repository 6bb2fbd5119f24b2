"""The demo's consumer-group step: a group reads the metadata log and commits with the epoch.

kafka-python's KafkaConsumer (a client nobody here wrote) joins a group, is assigned
`__cluster_metadata-0`, reads it to the end and commits its position with the leader epoch of
the last record it read (KIP-320). Then the group's coordinator, the leader of the group's
`__consumer_offsets` partition (a Raft log of its own), is asked with kraft's own requests
what it holds: OffsetFetch (offset and leader epoch, which must be what was committed) and
DescribeGroups (state, members), while the consumer is still a member.
"""

import time
from typing import Any

from rich.console import Console

from kraft.cli import demo_security
from kraft.cli.cluster_client import find_coordinator, request, run_async
from kraft.cli.demo_security import DemoSecurity
from kraft.cli.local_cluster import LocalCluster
from kraft.groups import OFFSETS_TOPIC, partition_for
from kraft.groups.classic import consumer_subscription_topics
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.server.settings.server_config import read_config

GROUP = "kraft-demo"
CLIENT_ID = "kraft-demo-consumer"
TOPIC = "__cluster_metadata"


def show(console: Console, cluster: LocalCluster, security: DemoSecurity | None) -> None:
    """The step; RuntimeError if the consumer fails or the coordinator does not hold what
    was committed."""
    from kafka.errors import KafkaError

    try:
        _show(console, cluster, security)
    except KafkaError as e:  # not a RuntimeError in kafka-python 3: one line, as the demo's other failures
        raise RuntimeError(f"the group's consumer (kafka-python): {e}") from None


def _show(console: Console, cluster: LocalCluster, security: DemoSecurity | None) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    partition = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), group_id=GROUP, client_id=CLIENT_ID,
                             enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                             **(security.kafka_python(demo_security.READER) if security else {}))
    try:
        consumer.subscribe([TOPIC])
        first, last, count = read_to_the_end(consumer, partition)
        partitions = read_config(cluster.nodes[1].config_path).offsets_topic_num_partitions
        console.print(f"kafka-python's consumer joined group {GROUP}, whose coordinator is the leader of "
                      f"{OFFSETS_TOPIC}-{partition_for(GROUP, partitions)}, and read {TOPIC}-0 to its end: "
                      f"{count} records, offsets {first} to {last.offset}"
                      + (" (the log starts past its snapshots)" if first > 0 else ""))
        consumer.commit({partition: OffsetAndMetadata(last.offset + 1, "", last.leader_epoch)})
        console.print(f"committed offset {last.offset + 1} with leader epoch {last.leader_epoch}, the epoch of the "
                      "last record read (KIP-320: a consumer resuming there detects a truncation below it)")
        tls, login = security.connection() if security else (None, None)
        found = find_coordinator(cluster, GROUP, tls=tls, login=login)
        offset, epoch = fetch_offset(found.port, tls, login)
        console.print(f"OffsetFetch from the coordinator (node {found.node_id}): offset {offset}, leader epoch {epoch}")
        if (offset, epoch) != (last.offset + 1, last.leader_epoch):
            raise RuntimeError(f"the coordinator holds offset {offset} in epoch {epoch}, not what was committed")
        group = run_async(request(found.port, build_request(15, 5, {
            "groups": [GROUP], "include_authorized_operations": False}), 10.0, tls, login)).groups[0]
        members = [f"{m.client_id} from {m.client_host}, subscribed to "
                   f"{', '.join(consumer_subscription_topics(m.member_metadata) or ['?'])}" for m in group.members]
        console.print(f"DescribeGroups: {group.group_state}, {group.protocol_type} protocol {group.protocol_data}, "
                      f"{len(members)} member{'' if len(members) == 1 else 's'}: {'; '.join(members)}")
    finally:
        consumer.close()


def read_to_the_end(consumer: Any, partition: Any, timeout: float = 60.0) -> tuple[int, Any, int]:
    """Polls until the consumer's position has reached the end the log had once the group
    assigned it the partition: (first offset read, last record read, records read)."""
    deadline = time.monotonic() + timeout
    first, last, count, end = -1, None, 0, None
    while last is None or end is None or consumer.position(partition) < end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the group's consumer did not read {TOPIC} to its end within {timeout:.0f} s")
        # Long polls (they return once records come): kafka-python 3.0.12 loses a rebalance
        # whose SyncGroup is in flight when a poll times out, and then never gets the partition.
        wait_ms = int(max(0.1, min(30.0, deadline - time.monotonic())) * 1000)
        records = consumer.poll(timeout_ms=wait_ms).get(partition, [])
        if records:
            first = records[0].offset if last is None else first
            last, count = records[-1], count + len(records)
        if end is None and partition in consumer.assignment():
            end = consumer.end_offsets([partition])[partition]
    return first, last, count


def fetch_offset(port: int, tls: Any, login: Any) -> tuple[int, int]:
    """The group's committed offset of `__cluster_metadata-0` and its leader epoch, by OffsetFetch v8."""
    answer = run_async(request(port, build_request(9, 8, {
        "groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1,
                    "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        "require_stable": False}), 10.0, tls, login))
    [group] = answer.groups
    if group.error_code != ErrorCode.none:
        raise RuntimeError(f"OffsetFetch of group {GROUP}: {ErrorCode(group.error_code).name}")
    [p] = group.topics[0].partitions
    return p.committed_offset, p.committed_leader_epoch
