"""Kafka clients read the metadata log, `__cluster_metadata` partition 0, from a real cluster.

One cluster for the module (3 voters, 1 observer). Its log holds data records (topics
created through the admin API) written in two leader epochs: the first leader is stopped
halfway, so truncation detection (KIP-320) has an epoch boundary to find. What clients
read is checked against the leader's segment files, read straight from disk.
"""

import threading
import time
import uuid
from datetime import timedelta
from typing import Any, NamedTuple

import pytest

from kraft.cli.cluster_client import create_topic, describe_quorum, leader, request, run_async
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.raft.messages import METADATA_TOPIC, METADATA_TOPIC_ID
from kraft.records import BatchHeader, RecordBatch, iter_batches
from kraft.storage import parse_snapshot_file_name

from .cluster_helpers import QUIET, wait_for

TP = (METADATA_TOPIC, 0)
FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH = 1, 2, 3, 23
PRODUCE, DELETE_RECORDS, DESCRIBE_CONFIGS, API_VERSIONS = 0, 21, 32, 18


class Quorum(NamedTuple):
    cluster: LocalCluster
    leader: int
    epoch: int
    first_epoch: int  # the epoch of the stopped first leader

    def port(self, node_id: int | None = None) -> int:
        return self.cluster.nodes[self.leader if node_id is None else node_id].client_port

    def high_watermark(self) -> int:
        return describe_quorum(self.cluster, self.leader).high_watermark

    def follower(self) -> int:
        return next(n for n in self.cluster.voter_ids if n != self.leader)


@pytest.fixture(scope="module")
def quorum(tmp_path_factory) -> Any:
    # QUIET: no idle NoOps, so the high watermark moves only when a test writes
    c = LocalCluster(tmp_path_factory.mktemp("reads") / "cluster", voters=3, observers=1, overrides=QUIET)
    c.start()
    try:
        for i in range(4):
            assert create_topic(c.nodes[leader(c)[0]].client_port, f"before-{i}", 2).error_code == ErrorCode.none
        first, first_epoch = leader(c)  # after the writes: an election may come between them under load
        c.stop(first)  # gracefully: a successor is elected in a new epoch
        second, epoch = leader(c, exclude=(first,))
        for i in range(4):
            assert create_topic(c.nodes[second].client_port, f"after-{i}").error_code == ErrorCode.none
        configured = run_async(request(c.nodes[second].client_port, build_request(19, 7, {
            "topics": [{"name": "configured", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "retention.ms", "value": "1234"}]}],
            "timeout": timedelta(seconds=10), "validate_only": False,
        })))
        assert configured.topics[0].error_code == ErrorCode.none
        serving = f"node {first} is unfenced: serving"
        before = c.nodes[first].log_path.read_text().count(serving)
        c.start(first)
        q = Quorum(c, second, epoch, first_epoch)
        wait_for(lambda: c.nodes[first].log_path.read_text().count(serving) > before,
                 what="the restarted node to register again")
        wait_for(lambda: {b.node_id for b in metadata(q, 12, None).brokers} == {1, 2, 3, 4},
                 what="every node registered as a broker")
        yield q
    finally:
        c.stop()


# ---------------------------------------------------------------- the log on disk


class LogRecord(NamedTuple):
    offset: int
    timestamp: int
    value: bytes | None
    epoch: int
    control: bool


def segment_bytes(q: Quorum) -> bytes:
    files = sorted(q.cluster.nodes[q.leader].partition_dir.glob("*.log"))
    assert len(files) == 1, "the tests assume one segment"
    return files[0].read_bytes()


def batches_on_disk(q: Quorum, below: int) -> list[tuple[BatchHeader, RecordBatch]]:
    """The leader's batches below `below`, read from its segment file (not through kraft's log)."""
    data = segment_bytes(q)
    found = []
    for h in iter_batches(data, partial_tail="stop"):
        if h.next_offset > below:
            break
        found.append((h, RecordBatch(h, data[h.position : h.position + h.size])))
    return found


def records_on_disk(q: Quorum, below: int) -> list[LogRecord]:
    return [
        LogRecord(r.offset, r.timestamp, r.value, h.partition_leader_epoch, h.is_control)
        for h, batch in batches_on_disk(q, below)
        for r in batch.records()
    ]


# ---------------------------------------------------------------- raw requests


def ask(port: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return run_async(request(port, build_request(api_key, version, body)))


def metadata(q: Quorum, version: int, topics: list[str] | None, node: int | None = None) -> Any:
    body = {"topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    return ask(q.port(node), METADATA, version, body)


def fetch(q: Quorum, offset: int, *, node: int | None = None, version: int = 12, current_epoch: int = -1,
          last_epoch: int = -1, max_wait_ms: int = 0, max_bytes: int = 1 << 20, min_bytes: int = 1,
          topic: str = METADATA_TOPIC, partition: int = 0) -> Any:
    """Fetch of one partition; returns (response, partition data)."""
    p = {"partition": partition, "current_leader_epoch": current_epoch, "fetch_offset": offset,
         "last_fetched_epoch": last_epoch, "log_start_offset": -1, "partition_max_bytes": max_bytes}
    t = {"topic": topic, "topic_id": METADATA_TOPIC_ID if topic == METADATA_TOPIC else uuid.uuid4(),
         "partitions": [p]}
    response = ask(q.port(node), FETCH, version, {
        "replica_id": -1, "max_wait": timedelta(milliseconds=max_wait_ms), "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [t],
        "forgotten_topics_data": [], "rack_id": "",
    })
    return response, response.responses[0].partitions[0]


def list_offset(q: Quorum, timestamp: int, *, node: int | None = None, version: int = 8,
                current_epoch: int = -1, topic: str = METADATA_TOPIC) -> Any:
    response = ask(q.port(node), LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": current_epoch, "timestamp": timestamp}]}],
    })
    return response.topics[0].partitions[0]


def epoch_end(q: Quorum, epoch: int, *, node: int | None = None, current_epoch: int = -1,
              topic: str = METADATA_TOPIC) -> Any:
    response = ask(q.port(node), OFFSET_FOR_LEADER_EPOCH, 4, {
        "replica_id": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current_epoch, "leader_epoch": epoch}]}],
    })
    return response.topics[0].partitions[0]


# ---------------------------------------------------------------- real consumers


def check_consumed(q: Quorum, consumed: dict[int, bytes | None], hw: int) -> None:
    """Every data record below the high watermark, as on disk; control records are skipped
    by consumers, and with them the offsets cover 0 to the high watermark."""
    on_disk = records_on_disk(q, hw)
    data = {r.offset: r.value for r in on_disk if not r.control}
    control = {r.offset for r in on_disk if r.control}
    assert len(data) > 20 and control, "the log holds data records and LeaderChange records"
    assert {o: v for o, v in consumed.items() if o < hw} == data
    assert sorted(set(data) | control) == list(range(hw))


def test_kafka_python_consumer_reads_the_log_to_the_high_watermark(quorum):
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(*TP)
    consumer = KafkaConsumer(bootstrap_servers=quorum.cluster.bootstrap_servers(), enable_auto_commit=False,
                             group_id=None, fetch_max_wait_ms=200)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        hw = consumer.end_offsets([tp])[tp]
        assert hw == quorum.high_watermark()
        consumed: dict[int, bytes | None] = {}
        deadline = time.monotonic() + 20
        while consumer.position(tp) < hw and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    assert r.offset not in consumed
                    consumed[r.offset] = r.value
        assert consumer.position(tp) >= hw
    finally:
        consumer.close()
    check_consumed(quorum, consumed, hw)


def test_librdkafka_consumer_reads_the_log_to_the_high_watermark(quorum):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": quorum.cluster.bootstrap_servers(), "group.id": "reads",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    try:
        consumer.assign([TopicPartition(*TP, OFFSET_BEGINNING)])
        low, hw = consumer.get_watermark_offsets(TopicPartition(*TP), timeout=10)
        assert (low, hw) == (0, quorum.high_watermark())
        consumed: dict[int, bytes | None] = {}
        epochs = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                consumed[message.offset()] = message.value()
                epochs.add(message.leader_epoch())
            elif consumer.position([TopicPartition(*TP)])[0].offset >= hw:
                break
        assert consumer.position([TopicPartition(*TP)])[0].offset >= hw
    finally:
        consumer.close()
    check_consumed(quorum, consumed, hw)
    assert {quorum.first_epoch, quorum.epoch} <= epochs, "records carry the epochs they were written in"


# ---------------------------------------------------------------- Metadata


def test_metadata_names_the_raft_leader_with_its_epoch_and_the_image_topics(quorum):
    for version in (1, 7, 12):
        response = metadata(quorum, version, None)
        assert response.controller_id == quorum.leader
        assert {b.node_id: b.port for b in response.brokers} == {
            n: node.client_port for n, node in quorum.cluster.nodes.items()}
        topics = {t.name: t for t in response.topics}
        log = topics[METADATA_TOPIC]
        assert log.is_internal and log.error_code == ErrorCode.none
        (p,) = log.partitions
        assert (p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (quorum.leader, [1, 2, 3], [1, 2, 3])
        assert {f"before-{i}" for i in range(4)} | {f"after-{i}" for i in range(4)} <= set(topics)
        assert len(topics["before-0"].partitions) == 2
        if version >= 7:  # KIP-320
            assert p.leader_epoch == quorum.epoch
            assert all(q.leader_epoch >= 0 for q in topics["after-0"].partitions)
        if version >= 10:
            assert log.topic_id == METADATA_TOPIC_ID
            assert topics["after-0"].topic_id not in (METADATA_TOPIC_ID, uuid.UUID(int=0))
        if version >= 2:
            assert response.cluster_id == quorum.cluster.cluster_id
    # a follower says the same about who leads
    assert metadata(quorum, 12, [METADATA_TOPIC], node=4).topics[0].partitions[0].leader_id == quorum.leader


def test_metadata_of_an_unknown_topic_is_an_error_and_creates_nothing(quorum):
    response = metadata(quorum, 12, ["no-such-topic", "after-1"])
    errors = {t.name: t.error_code for t in response.topics}
    assert errors == {"no-such-topic": ErrorCode.unknown_topic_or_partition, "after-1": ErrorCode.none}
    assert "no-such-topic" not in {t.name for t in metadata(quorum, 12, None).topics}
    by_id = ask(quorum.port(), METADATA, 12, {"topics": [{"name": None, "topic_id": METADATA_TOPIC_ID},
                                                           {"name": None, "topic_id": uuid.uuid4()}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in by_id.topics] == [
        (METADATA_TOPIC, ErrorCode.none), (None, ErrorCode.unknown_topic_id)]


# ---------------------------------------------------------------- ListOffsets


def test_list_offsets_answers_with_the_epoch_of_the_offset(quorum):
    hw = quorum.high_watermark()
    on_disk = records_on_disk(quorum, hw)
    epoch_of = {r.offset: r.epoch for r in on_disk}
    earliest = list_offset(quorum, -2)
    assert (earliest.offset, earliest.leader_epoch) == (0, quorum.first_epoch)
    latest = list_offset(quorum, -1)
    assert (latest.offset, latest.leader_epoch) == (hw, epoch_of[hw - 1])
    assert latest.leader_epoch == quorum.epoch
    assert list_offset(quorum, -1, version=1).offset == hw

    # The first record at or after a timestamp: a record written in the second epoch.
    target = next(r for r in on_disk if r.epoch == quorum.epoch and not r.control)
    found = list_offset(quorum, target.timestamp)
    first = next(r for r in on_disk if r.timestamp >= target.timestamp)
    assert (found.offset, found.timestamp, found.leader_epoch) == (first.offset, first.timestamp, first.epoch)
    assert found.offset <= target.offset
    newest = max(on_disk, key=lambda r: r.timestamp)
    assert list_offset(quorum, newest.timestamp + 60_000).offset == -1  # nothing that late

    top = list_offset(quorum, -3)  # MAX_TIMESTAMP
    first_max = next(r for r in on_disk if r.timestamp == newest.timestamp)
    assert (top.offset, top.timestamp, top.leader_epoch) == (first_max.offset, newest.timestamp, first_max.epoch)

    assert list_offset(quorum, -7).error_code == ErrorCode.invalid_request
    assert list_offset(quorum, -1, topic="after-0").error_code == ErrorCode.unknown_topic_or_partition


# ---------------------------------------------------------------- KIP-320 fencing


def test_reads_are_fenced_by_the_current_leader_epoch(quorum):
    e = quorum.epoch
    hw = quorum.high_watermark()
    cases = [
        (e - 1, ErrorCode.fenced_leader_epoch),
        (e + 1, ErrorCode.unknown_leader_epoch),
        (e, ErrorCode.none),
        (-1, ErrorCode.none),
    ]
    for current, expected in cases:
        _, p = fetch(quorum, 0, current_epoch=current)
        assert p.error_code == expected, f"Fetch with epoch {current}"
        assert list_offset(quorum, -1, current_epoch=current).error_code == expected
        assert epoch_end(quorum, e, current_epoch=current).error_code == expected
        if expected != ErrorCode.none:
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (quorum.leader, e)
            assert p.records == b"" and p.high_watermark == -1
        else:
            assert p.high_watermark == hw and p.records


def test_followers_and_observers_send_readers_to_the_leader(quorum):
    for node in (quorum.follower(), 4):
        for version in (12, 16):
            response, p = fetch(quorum, 0, node=node, version=version, current_epoch=quorum.epoch)
            assert p.error_code == ErrorCode.not_leader_or_follower
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (quorum.leader, quorum.epoch)
            if version >= 16:  # KIP-951: where to find it
                assert [(n.node_id, n.port) for n in response.node_endpoints] == [(quorum.leader, quorum.port())]
        assert list_offset(quorum, -1, node=node).error_code == ErrorCode.not_leader_or_follower
        assert epoch_end(quorum, quorum.epoch, node=node).error_code == ErrorCode.not_leader_or_follower


# ---------------------------------------------------------------- OffsetForLeaderEpoch and DivergingEpoch


def first_offset_of_epoch(q: Quorum, epoch: int) -> int:
    return next(h.base_offset for h, _ in batches_on_disk(q, q.high_watermark()) if h.partition_leader_epoch >= epoch)


def test_offset_for_leader_epoch_says_where_each_epoch_ends(quorum):
    boundary = first_offset_of_epoch(quorum, quorum.first_epoch + 1)
    assert 0 < boundary < quorum.high_watermark()
    end = epoch_end(quorum, quorum.first_epoch)
    assert (end.error_code, end.leader_epoch, end.end_offset) == (ErrorCode.none, quorum.first_epoch, boundary)
    latest = epoch_end(quorum, quorum.epoch + 10)  # newer than any: the latest and the log end
    assert latest.leader_epoch == quorum.epoch and latest.end_offset >= quorum.high_watermark()
    missing = epoch_end(quorum, 5, topic="after-0")
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


def test_fetch_with_a_last_epoch_the_log_diverges_from_gets_diverging_epoch(quorum):
    hw = quorum.high_watermark()
    boundary = first_offset_of_epoch(quorum, quorum.first_epoch + 1)
    # It claims to have read up to hw in the first epoch; that epoch ended at the boundary.
    _, p = fetch(quorum, hw, last_epoch=quorum.first_epoch)
    assert p.error_code == ErrorCode.none and p.records == b""
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (quorum.first_epoch, boundary)
    # An epoch the leader never had: the latest one it has, up to its log end.
    _, p = fetch(quorum, hw, last_epoch=quorum.epoch + 3, version=13)
    assert p.diverging_epoch.epoch == quorum.epoch and p.diverging_epoch.end_offset >= hw
    # A log that agrees: records, and no divergence.
    _, p = fetch(quorum, boundary, last_epoch=quorum.first_epoch)
    assert p.diverging_epoch.epoch == -1 and p.records


# ---------------------------------------------------------------- Fetch


def test_fetch_sends_the_segment_bytes_up_to_the_high_watermark(quorum):
    hw = quorum.high_watermark()
    for version in (4, 12, 13, 17):
        _, p = fetch(quorum, 0, version=version)
        assert p.error_code == ErrorCode.none and p.high_watermark == hw
        batches = list(iter_batches(p.records))
        assert batches[0].base_offset == 0 and batches[-1].next_offset <= hw
        assert p.records == segment_bytes(quorum)[: len(p.records)]
    # a byte limit still returns a whole first batch (KIP-74), and no more
    _, p = fetch(quorum, 1, max_bytes=1)
    (only,) = list(iter_batches(p.records))
    assert only.base_offset <= 1 < only.next_offset
    _, p = fetch(quorum, hw)
    assert p.records == b"" and p.error_code == ErrorCode.none


def test_fetch_out_of_range_and_of_other_topics_is_refused(quorum):
    _, p = fetch(quorum, quorum.high_watermark() + 1000)
    assert p.error_code == ErrorCode.offset_out_of_range
    _, p = fetch(quorum, -5)
    assert p.error_code == ErrorCode.offset_out_of_range
    _, p = fetch(quorum, 0, topic="after-0")
    assert p.error_code == ErrorCode.unknown_topic_or_partition
    _, p = fetch(quorum, 0, partition=1)
    assert p.error_code == ErrorCode.unknown_topic_or_partition
    _, p = fetch(quorum, 0, topic="after-0", version=13)  # an id no topic has
    assert p.error_code == ErrorCode.unknown_topic_id


def test_fetch_at_the_high_watermark_waits_for_new_records(quorum):
    for _ in range(5):  # (a broker's heartbeat may commit a record meanwhile: look again)
        hw = quorum.high_watermark()
        started = time.monotonic()
        _, p = fetch(quorum, hw, max_wait_ms=300)
        waited = time.monotonic() - started
        if p.records == b"":
            break
    assert p.records == b"" and 0.25 <= waited < 3, f"answered after {waited:.2f} s"

    answer: dict[str, Any] = {}

    def long_poll() -> None:
        began = time.monotonic()
        answer["p"] = fetch(quorum, hw, max_wait_ms=8000)[1]
        answer["after"] = time.monotonic() - began

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.3)
    assert create_topic(quorum.port(), "woken").error_code == ErrorCode.none
    poller.join()
    assert answer["after"] < 4, f"the fetch waited {answer['after']:.1f} s for records already committed"
    batches = list(iter_batches(answer["p"].records))
    assert batches and batches[0].base_offset == hw


# ---------------------------------------------------------------- writes, refused; ApiVersions; configs


def test_the_log_cannot_be_written_or_trimmed_by_clients(quorum):
    def delete(topic: str) -> Any:
        return ask(quorum.port(), DELETE_RECORDS, 2, {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 1}]}],
            "timeout": timedelta(seconds=1),
        }).topics[0].partitions[0].error_code

    assert delete(METADATA_TOPIC) == ErrorCode.policy_violation
    assert delete("no-such-topic") == ErrorCode.unknown_topic_or_partition
    assert list_offset(quorum, -2).offset == 0

    def produce(topic: str) -> Any:
        return ask(quorum.port(), PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout": timedelta(seconds=1),
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": b""}]}],
        }).responses[0].partition_responses[0]

    refused = produce(METADATA_TOPIC)
    assert refused.error_code == ErrorCode.policy_violation and "controller" in refused.error_message
    assert produce("after-0").error_code == ErrorCode.invalid_request
    assert produce("no-such-topic").error_code == ErrorCode.unknown_topic_or_partition


def test_api_versions_advertise_produce_v3_for_message_format_v2(quorum):
    response = ask(quorum.port(), API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert served[PRODUCE][0] >= 3  # librdkafka fetches message format v2 only then
    for key in (FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS, DESCRIBE_CONFIGS, 55):
        assert key in served


def test_describe_configs_shows_dynamic_configs_and_that_snapshots_clean_the_log(quorum):
    response = ask(quorum.port(), DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 2, "resource_name": n, "configuration_keys": None}
                      for n in (METADATA_TOPIC, "configured", "no-such-topic")],
        "include_synonyms": False, "include_documentation": False,
    })
    log, configured, unknown = response.results
    assert [(c.name, c.value, c.read_only) for c in log.configs] == [("cleanup.policy", "snapshot", True)]
    retention = {c.name: c for c in configured.configs}["retention.ms"]
    assert (retention.value, retention.read_only, retention.config_type, retention.config_source) == (
        "1234", False, 5, 1)  # LONG, DYNAMIC_TOPIC_CONFIG
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition

    altered = ask(quorum.port(), 44, 1, {"validate_only": False, "resources": [{
        "resource_type": 4, "resource_name": "2",
        "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "60000"}]}]})
    assert altered.responses[0].error_code == ErrorCode.none

    def brokers() -> tuple[Any, Any]:  # a broker describes itself only, as in Kafka
        return ask(quorum.port(2), DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 4, "resource_name": n, "configuration_keys": ["log.retention.ms"]}
                          for n in ("2", "")],
            "include_synonyms": False, "include_documentation": False,
        }).results

    wait_for(lambda: brokers()[0].configs[0].value == "60000", what="node 2 to apply its broker config")
    broker, default = brokers()
    assert [(c.name, c.value, c.config_source, c.config_type) for c in broker.configs] == [
        ("log.retention.ms", "60000", 2, 5)]  # DYNAMIC_BROKER_CONFIG, LONG
    assert (default.error_code, default.configs) == (ErrorCode.none, ())


def test_a_consumer_can_seek_by_time_and_to_the_end(quorum):
    """kafka-python's offsets_for_times and end_offsets go through ListOffsets too."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(*TP)
    hw = quorum.high_watermark()
    on_disk = records_on_disk(quorum, hw)
    target = on_disk[len(on_disk) // 2]
    consumer = KafkaConsumer(bootstrap_servers=quorum.cluster.bootstrap_servers(), enable_auto_commit=False)
    try:
        found = consumer.offsets_for_times({tp: target.timestamp})[tp]
        first = next(r for r in on_disk if r.timestamp >= target.timestamp)
        assert (found.offset, found.timestamp) == (first.offset, first.timestamp)
        assert consumer.beginning_offsets([tp])[tp] == 0
    finally:
        consumer.close()


def test_bad_requests_get_errors_not_a_crash(quorum):
    response = ask(quorum.port(), FETCH, 12, {
        "replica_id": -1, "max_wait": timedelta(0), "min_bytes": 1, "session_id": 77, "session_epoch": 3,
        "topics": [], "forgotten_topics_data": [],
    })
    assert response.error_code == ErrorCode.fetch_session_id_not_found
    response = ask(quorum.port(), DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": 99, "resource_name": "x", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False,
    })
    assert response.results[0].error_code == ErrorCode.invalid_request
    assert metadata(quorum, 12, [METADATA_TOPIC]).topics[0].error_code == ErrorCode.none  # still serving



def test_nothing_above_the_high_watermark_is_served(tmp_path):
    """A leader whose followers are gone appends records it cannot commit: readers see none."""
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=0,
                     overrides={"controller.quorum.fetch.timeout.ms": "20000"})  # it stays leader meanwhile
    c.start()
    try:
        leader_id, epoch = leader(c)
        assert create_topic(c.nodes[leader_id].client_port, "committed").error_code == ErrorCode.none
        for n in c.voter_ids:
            if n != leader_id:
                c.kill(n)
        lost = create_topic(c.nodes[leader_id].client_port, "uncommitted", timeout_ms=300, retry_s=0)
        assert lost.error_code == ErrorCode.request_timed_out
        q = Quorum(c, leader_id, epoch, epoch)
        state = describe_quorum(c, leader_id)
        hw = state.high_watermark
        end = next(v.log_end_offset for v in state.current_voters if v.replica_id == leader_id)
        assert end > hw, "the leader holds records it could not commit"

        _, p = fetch(q, 0, current_epoch=epoch)
        assert p.high_watermark == hw and p.last_stable_offset == hw
        assert list(iter_batches(p.records))[-1].next_offset == hw
        for offset in (hw, end):
            _, p = fetch(q, offset)
            assert (p.error_code, p.records) == (ErrorCode.none, b"")
        # Far past the end: the controller appends NoOps it cannot commit meanwhile.
        assert fetch(q, end + 100_000)[1].error_code == ErrorCode.offset_out_of_range
        assert list_offset(q, -1).offset == hw
        assert list_offset(q, -3).offset < hw  # MAX_TIMESTAMP looks below it only
    finally:
        c.stop()


def test_consumers_start_at_the_log_start_once_snapshots_trimmed_the_log(tmp_path):
    from kafka import KafkaConsumer, TopicPartition

    c = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "1500",
        "metadata.snapshot.min.changed_records.ratio": "0",
        "metadata.max.retention.bytes": "1",  # retention moves the log start to the latest snapshot
        **QUIET,  # the log must come to rest for a snapshot at its end
    })
    c.start()
    try:
        leader_id, epoch = leader(c)
        q = Quorum(c, leader_id, epoch, epoch)
        created = 0

        def create() -> None:
            nonlocal created
            created += 1
            assert create_topic(q.port(), f"t-{created}").error_code == ErrorCode.none

        while list_offset(q, -2).offset == 0:
            assert created < 200, "the log start never moved"
            create()
        create()
        start, hw = list_offset(q, -2).offset, q.high_watermark()
        assert 0 < start < hw
        assert fetch(q, start - 1)[1].error_code == ErrorCode.offset_out_of_range

        tp = TopicPartition(*TP)
        consumer = KafkaConsumer(bootstrap_servers=c.bootstrap_servers(), enable_auto_commit=False,
                                 auto_offset_reset="earliest", fetch_max_wait_ms=200)
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)  # out of range now: the consumer resets to the log start
            offsets = []
            deadline = time.monotonic() + 20
            while consumer.position(tp) < hw and time.monotonic() < deadline:
                offsets += [r.offset for records in consumer.poll(timeout_ms=500).values() for r in records]
            assert offsets and min(offsets) >= start and consumer.position(tp) >= hw
        finally:
            consumer.close()

        # Idle after a snapshot at the high watermark, the log empties: what it held is in
        # the snapshot.
        def snapshot_at(offset: int) -> bool:
            names = q.cluster.nodes[leader_id].partition_dir.glob("*.checkpoint")
            return any(parse_snapshot_file_name(n.name).end_offset == offset for n in names)

        # A snapshot job starts in the step that commits the records it is due for, before
        # CreateTopics answers: its `.part` (or the finished file) is there when create()
        # returns, however slow the machine. Waiting is needed only for those.
        partition = q.cluster.nodes[leader_id].partition_dir
        while True:
            assert created < 200, "no snapshot at the high watermark"
            known = set(partition.glob("*.checkpoint"))
            create()
            if not list(partition.glob("*.checkpoint.part")) and not set(partition.glob("*.checkpoint")) - known:
                continue
            try:
                wait_for(lambda hw=q.high_watermark(): snapshot_at(hw), timeout=30)
                break
            except TimeoutError:
                continue  # something else committed meanwhile: the snapshot is below the high watermark
        wait_for(lambda: list_offset(q, -2).offset == list_offset(q, -1).offset, what="the log to empty")
        end = list_offset(q, -1)
        assert end.leader_epoch == epoch  # the snapshot's, for the last record it holds
        assert list_offset(q, -2).leader_epoch == -1  # no record at the start yet
        answer = epoch_end(q, epoch)
        assert (answer.leader_epoch, answer.end_offset) == (epoch, end.offset)
        _, p = fetch(q, end.offset, last_epoch=epoch)
        assert (p.error_code, p.diverging_epoch.epoch, p.records) == (ErrorCode.none, -1, b"")
    finally:
        c.stop()
