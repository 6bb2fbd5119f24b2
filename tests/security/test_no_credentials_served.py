"""No SCRAM salt or key leaves a node but to a node (issue 25): on a cluster secured as the
attack found it (`Hardened`), alice, whose ACL lets her READ `__cluster_metadata`, reads the
whole log with kraft's consumer, kafka-python and librdkafka (both checking every batch's
CRC) and the snapshot by FetchSnapshot, and finds every UserScramCredentialRecord with its
name, mechanism and iterations but no byte of any salt, StoredKey or ServerKey that the
nodes' files hold; the offsets she reads are the log's, one by one. The nodes still log users
in after a restart, and an observer that starts empty catches up on the controller listener,
with the exact bytes, and logs them in too."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kraft.client import Consumer, TopicPartition
from kraft.metadata import decode_record
from kraft.metadata.records import UserScramCredentialRecord
from kraft.raft import messages as m
from kraft.records import read_batches
from kraft.storage.snapshot import SnapshotReader, parse_snapshot_file_name

from ..server.cluster_helpers import wait_for
from .secured import Hardened, ask

TOPIC = "__cluster_metadata"
TP = TopicPartition(TOPIC, 0)
SNAPSHOT_OFTEN = {"metadata.log.max.record.bytes.between.snapshots": "1000",
                  "metadata.snapshot.min.changed_records.ratio": "0", "metadata.log.max.snapshot.interval.ms": "1000"}


@pytest.fixture(scope="module")
def hardened(tmp_path_factory):
    secured = Hardened(tmp_path_factory.mktemp("credentials"), voters=3, observers=1, overrides=SNAPSHOT_OFTEN)
    for node_id in secured.cluster.voter_ids:
        secured.cluster.start(node_id)
    secured.wait_for_logins(secured.cluster.voter_ids)
    try:
        secured.grant_alice_log()
        secured.add_user("bob", "bob-Secret-7")  # a credential written by AlterUserScramCredentials too
        yield secured
    finally:
        secured.cluster.stop()


def credential_values(values: list[bytes | None]) -> list[UserScramCredentialRecord]:
    records = []
    for value in values:
        if value is not None and len(value) > 2 and value[1] == 11:
            record = decode_record(value)
            assert isinstance(record, UserScramCredentialRecord)
            records.append(record)
    return records


def secrets_on_disk(data_dir: Path) -> set[bytes]:
    """Every salt, StoredKey and ServerKey in a node's log segments and snapshots."""
    values: list[bytes | None] = []
    partition = data_dir / f"{TOPIC}-0"
    for segment in sorted(partition.glob("*.log")):
        for batch in read_batches(segment.read_bytes()):
            if not batch.header.is_control:
                values += [r.value for r in batch.records()]
    for snapshot in sorted(partition.glob("*.checkpoint")):
        values += [r.value for r in SnapshotReader.open(snapshot, parse_snapshot_file_name(snapshot.name)).records()]
    found = {bytes(s) for r in credential_values(values) for s in (r.salt, r.stored_key, r.server_key)}
    assert found and all(len(s) >= 16 for s in found), found
    return found


def assert_redacted(values: list[bytes | None], secrets: set[bytes], who: str) -> None:
    blob = b"".join(v for v in values if v is not None)
    assert not [s for s in secrets if s in blob], f"{who} read a salt or key"
    credentials = credential_values(values)
    assert {r.name for r in credentials} >= {"admin", "alice", "bob"}, who
    assert all((r.salt, r.stored_key, r.server_key) == (b"", b"", b"") and r.iterations >= 4096
               for r in credentials), who


def test_alice_reads_the_log_and_the_snapshot_without_a_salt_or_key(hardened):
    secured = hardened
    leader = secured.leader()
    secrets = secrets_on_disk(secured.cluster.nodes[leader].data_dir)

    with Consumer(secured.cluster.bootstrap_servers(), security=secured.kraft_consumer("alice"),
                  auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek_to_beginning(TP)
        end = consumer.end_offsets([TP])[TP].offset
        ours: list[Any] = []
        wait_for(lambda: bool(ours.extend(consumer.poll(200))) or consumer.position(TP) >= end, timeout=60,
                 what="kraft's consumer at the end")
    ours = [r for r in ours if r.offset < end]
    assert_redacted([r.value for r in ours], secrets, "kraft's consumer")
    offsets = [r.offset for r in ours]
    assert offsets == sorted(set(offsets))  # the log's own offsets, none twice

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    python = KafkaConsumer(**secured.kafka_python("alice"), enable_auto_commit=False, group_id=None,
                           check_crcs=True, fetch_max_wait_ms=200)
    try:
        python.assign([KTP(TOPIC, 0)])
        python.seek_to_beginning(KTP(TOPIC, 0))
        theirs: list[Any] = []
        wait_for(lambda: bool(theirs.extend(r for b in python.poll(timeout_ms=500).values() for r in b))
                 or python.position(KTP(TOPIC, 0)) >= end, timeout=60, what="kafka-python at the end")
    finally:
        python.close()
    theirs = [r for r in theirs if r.offset < end]
    assert_redacted([r.value for r in theirs], secrets, "kafka-python")
    assert [r.offset for r in theirs] == offsets

    from confluent_kafka import Consumer as RdKafka
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as RTP

    rdkafka = RdKafka({**secured.librdkafka("alice"), "group.id": "unused", "enable.auto.commit": False,
                       "check.crcs": True, "fetch.wait.max.ms": 100})
    try:
        rdkafka.assign([RTP(TOPIC, 0, 0)])
        messages: list[Any] = []

        def caught_up() -> bool:
            for message in rdkafka.consume(500, 0.5):
                if message.error() is not None:  # its group handle looks for a coordinator alice may not use
                    assert message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, message.error()
                    continue
                messages.append(message)
            return bool(messages) and messages[-1].offset() >= offsets[-1]

        wait_for(caught_up, timeout=60, what="librdkafka at the end")
    finally:
        rdkafka.close()
    read = [msg for msg in messages if msg.offset() < end]
    assert_redacted([msg.value() for msg in read], secrets, "librdkafka")
    assert [msg.offset() for msg in read] == offsets

    # FetchSnapshot of the latest snapshot, chunk by chunk, as a client may ask it.
    def snapshots() -> list[Any]:
        return [parse_snapshot_file_name(p.name) for p in secured.cluster.nodes[leader].partition_dir.glob(
            "*.checkpoint") if parse_snapshot_file_name(p.name).end_offset > 0]

    bob = max(r.offset for r in ours if r.value is not None and credential_values([r.value])
              and credential_values([r.value])[0].name == "bob")
    wait_for(lambda: any(sid.end_offset > bob for sid in snapshots()), timeout=60,
             what="a snapshot on the leader holding bob's credential")
    snapshot_id = max(snapshots())
    epoch = asyncio.run(ask(secured.cluster.nodes[leader].client_port, m.describe_quorum_request(), secured.tls(),
                            secured.login("admin"))).topics[0].partitions[0].leader_epoch
    chunks, position, size = [], 0, None
    while size is None or position < size:
        answer = asyncio.run(ask(secured.cluster.nodes[leader].client_port, m.fetch_snapshot_request(
            secured.cluster.cluster_id, -1, epoch, (snapshot_id.end_offset, snapshot_id.epoch), position, 3000),
            secured.tls(), secured.login("alice")))
        part = answer.topics[0].partitions[0]
        assert part.error_code == 0, part
        size = part.size
        chunks.append(bytes(part.unaligned_records))
        position += len(chunks[-1])
    served = b"".join(chunks)
    assert len(served) == size
    values = [r.value for b in read_batches(served) if not b.header.is_control for r in b.records()]  # CRCs checked
    assert_redacted(values, secrets, "FetchSnapshot")


def test_the_nodes_still_log_users_in_after_a_restart_and_a_fresh_observers_catch_up(hardened):
    secured = hardened
    restarted = secured.cluster.voter_ids[0]
    secured.cluster.stop(restarted)
    secured.cluster.start(restarted)
    observer = next(n for n in secured.cluster.nodes if n not in secured.cluster.voter_ids)
    secured.cluster.start(observer)
    for node_id in (restarted, observer):
        wait_for(lambda n=node_id: secured.logs_in(n, "bob", "bob-Secret-7"), timeout=90,
                 what=f"bob logging in to node {node_id}")
    assert secured.logs_in(observer, "alice")
    assert not secured.logs_in(observer, "bob", "wrong")
