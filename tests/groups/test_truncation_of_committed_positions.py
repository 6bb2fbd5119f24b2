"""KIP-320 for positions committed to a consumer group, across a log that lost them.

Consumers of `__cluster_metadata` commit, each to its own group, a position past the point
that a `kraft restore` (and, in the second test, a `kraft recover` from a diverged survivor)
will cut, with the leader epoch of the record before it. The cluster is stopped, restored or
recovered, started again in a newer epoch, and written to until the new log reaches past
every committed offset: the same offsets now hold other records. The groups live on
`__consumer_offsets`, which neither operation touches, so every commit is still there.
Then each client starts again from its group's commit. What each does, exactly:

* kraft's consumer (`group_id`, `committed()`, `seek(tp, offset, epoch)`) asks
  OffsetForLeaderEpoch before reading: LogTruncationError naming the partition and the
  first diverging offset with the leader's epoch there, its position left at the commit;
  with auto_offset_reset="earliest" it goes on from that offset instead.
* librdkafka (confluent-kafka 2.16) takes the committed epoch from OffsetFetch but starts
  its fetcher at the committed offset without validating it (OffsetForLeaderEpoch runs on
  seek() or when Metadata shows a newer leader epoch while it fetches): it reads the new
  records from the committed offset on, no error. An application that pauses the partition
  in on_assign and seek()s to the committed (offset, epoch) gets the check:
  auto.offset.reset=error reports _AUTO_OFFSET_RESET ("Partition log truncation detected
  at offset O (leader epoch E): broker end offset is D (offset leader epoch F). Reset to
  INVALID.") and the position becomes INVALID; auto.offset.reset=earliest seeks to D and
  reads on from there, silently.
* kafka-python (3.0.x) validates positions it fetched itself (tests/client/test_truncation.py),
  but a committed position it restores by offset alone (`refresh_committed_offsets_if_needed`
  seeks to `offset.offset`: the epoch becomes -1, nothing to validate, and its Fetch's
  LastFetchedEpoch is -1 too), and its public seek() takes no epoch: it reads the new records
  from the committed offset on, even with auto_offset_reset="none". The test asserts that,
  so a kafka-python that starts validating committed positions fails it on purpose.

What every client reads after the cut is the new log's records (epochs from the restart on,
the new topics' names), never the ones the cut replaced.
"""

import time
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaConnectionError

from kraft.cli.cluster_client import create_topic, describe_quorum, leader
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, LogTruncationError, OffsetAndEpoch, TopicPartition
from kraft.protocol import ErrorCode
from kraft.storage import FileLog
from kraft.storage.snapshot import parse_snapshot_file_name

from ..server.cluster_helpers import back_up_a_snapshot, create_topics, kraft_cli, wait_for

TOPIC = "__cluster_metadata"
TP = TopicPartition(TOPIC, 0)
GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": "3000",
             "metadata.snapshot.min.changed_records.ratio": "0"}
OURS, KAFKA_PYTHON, LIBRDKAFKA = "kraft-consumer", "kafka-python", "librdkafka"


@dataclass(frozen=True)
class Cut:
    """Where the new log parts from what the groups committed: the first offset whose record
    is not the one they read, with the leader's epoch there (its OffsetForLeaderEpoch answer
    for the committed epoch); the first epoch of the new log's records; a name in the
    replaced records and one in the records written since."""

    divergence: OffsetAndEpoch
    new_epoch: int
    replaced_name: bytes
    new_name: bytes


# ---------------------------------------------------------------- before the cut


def commit_in_every_group(cluster: LocalCluster, hw: int) -> dict[str, OffsetAndEpoch]:
    """Each client reads the log through its group up to `hw` and commits where it stopped,
    with the epoch of the last record read; every commit read back with kraft's OffsetFetch."""
    servers = cluster.bootstrap_servers()
    with Consumer(servers, group_id=OURS, auto_offset_reset="earliest", fetch_max_wait_ms=200) as ours:
        ours.assign([TP])

        def ours_at_hw() -> bool:
            ours.poll(200)
            return ours.position(TP) >= hw

        wait_for(ours_at_hw, timeout=60, what="kraft's consumer at hw")
        ours.commit()
        expected = {OURS: ours.next_offsets()[TP]}

    kp = KafkaConsumer(bootstrap_servers=servers, group_id=KAFKA_PYTHON, enable_auto_commit=False,
                       auto_offset_reset="earliest", fetch_max_wait_ms=200)
    try:
        kp.subscribe([TOPIC])
        last: list[Any] = []
        wait_for(lambda: last.extend(kp_poll(kp)) or bool(last) and last[-1].offset >= hw - 1, timeout=60,
                 what="kafka-python at hw")
        kp.commit()  # its consumed positions, each with the epoch of the last record (KIP-320)
        expected[KAFKA_PYTHON] = OffsetAndEpoch(last[-1].offset + 1, last[-1].leader_epoch)
    finally:
        kp.close()

    rd = rd_consumer(servers, LIBRDKAFKA, "earliest")
    try:
        rd.subscribe([TOPIC])
        message: list[Any] = []

        def rd_at_hw() -> bool:
            m = rd.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                message[:] = [m]
            return bool(message) and message[0].offset() >= hw - 1

        wait_for(rd_at_hw, timeout=60, what="librdkafka at hw")
        rd.commit(message=message[0], asynchronous=False)
        expected[LIBRDKAFKA] = OffsetAndEpoch(message[0].offset() + 1, message[0].leader_epoch())
    finally:
        rd.close()
    assert committed_positions(cluster) == expected
    return expected


def kp_poll(kp: KafkaConsumer) -> list[Any]:
    """The records of one kafka-python poll. A broker it knew that is down (the survivor,
    killed) fails the poll; it is asked again, as an application would. The timeout is long
    (poll returns as soon as records come): kafka-python 3.0.12 loses a rebalance whose
    SyncGroup is still in flight when poll() times out (the leader's need_rejoin() is false
    from the moment it computed the assignment, so the finished join is never applied and
    the member never heartbeats: no partitions, for good)."""
    try:
        return [r for batch in kp.poll(timeout_ms=30_000).values() for r in batch]
    except KafkaConnectionError:
        return []


def committed_positions(cluster: LocalCluster) -> dict[str, OffsetAndEpoch | None]:
    out = {}
    for group in (OURS, KAFKA_PYTHON, LIBRDKAFKA):
        with Consumer(cluster.bootstrap_servers(), group_id=group) as consumer:
            out[group] = consumer.committed([TP])[TP]
    return out


def rd_consumer(servers: str, group: str, reset: str) -> RdConsumer:
    return RdConsumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": reset, "fetch.wait.max.ms": 200})


# ---------------------------------------------------------------- after the cut


def write_past(cluster: LocalCluster, committed: dict[str, OffsetAndEpoch], prefix: str) -> None:
    """New records until the new log reaches past every committed offset."""
    target = max(at.offset for at in committed.values()) + 5
    rounds = iter(range(1000))
    wait_for(lambda: create_topics(cluster, f"{prefix}{next(rounds)}", 5) > target, timeout=120,
             what=f"the new log past offset {target}")


def first_record_from(cluster: LocalCluster, offset: int) -> Any:
    """The first record at or after `offset` that a client hands out (control records are not)."""
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", fetch_max_wait_ms=200) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, offset)
        records: list[Any] = []
        wait_for(lambda: records.extend(consumer.poll(200)) or bool(records), what=f"a record from offset {offset}")
        return records[0]


def assert_new_history(cut: Cut, records: list[tuple[int, int, bytes]], who: str) -> None:
    """(offset, leader epoch, value) of records read after the cut: all the new log's."""
    assert records, f"{who} read nothing"
    replaced = [(o, e) for o, e, value in records if o >= cut.divergence.offset and (
        e < cut.new_epoch or cut.replaced_name in value)]
    assert not replaced, f"{who} read records the cut replaced: {replaced}"


def check_every_client(cluster: LocalCluster, committed: dict[str, OffsetAndEpoch], cut: Cut) -> None:
    assert committed_positions(cluster) == committed, "the commits outlived the cut"
    ours_detect_the_truncation(cluster, committed[OURS], cut)
    kafka_python_reads_on_from_the_committed_offset(cluster, committed[KAFKA_PYTHON], cut)
    librdkafka_reads_on_from_the_committed_offset(cluster, committed[LIBRDKAFKA], cut)
    librdkafka_seeking_with_the_committed_epoch_detects_it(cluster, committed[LIBRDKAFKA], cut)


def ours_detect_the_truncation(cluster: LocalCluster, at: OffsetAndEpoch, cut: Cut) -> None:
    with Consumer(cluster.bootstrap_servers(), group_id=OURS, auto_offset_reset="none",
                  fetch_max_wait_ms=200) as consumer:
        consumer.assign([TP])
        assert consumer.committed([TP]) == {TP: at}
        consumer.seek(TP, at.offset, at.leader_epoch)
        with pytest.raises(LogTruncationError) as raised:
            consumer.poll(5000)
        assert raised.value.divergent_offsets == {TP: cut.divergence}
        assert (f"{TOPIC}-0: first diverging offset {cut.divergence.offset} "
                f"(leader epoch {cut.divergence.leader_epoch})") in str(raised.value)
        assert consumer.position(TP) == at.offset, "nothing was read past the commit"
        consumer.seek(TP, cut.divergence.offset, cut.divergence.leader_epoch)  # what the error says to do
        after = read_some(consumer)
    assert after[0].offset == first_record_from(cluster, cut.divergence.offset).offset
    assert_new_history(cut, [(r.offset, r.leader_epoch, r.value) for r in after], "ours")
    assert any(cut.new_name in r.value for r in after)

    with Consumer(cluster.bootstrap_servers(), group_id=OURS, auto_offset_reset="earliest",
                  fetch_max_wait_ms=200) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, at.offset, at.leader_epoch)
        reset = read_some(consumer)  # the policy moves it back to the divergence, not to the log start
    assert [r.offset for r in reset[:10]] == [r.offset for r in after[:10]]


def read_some(consumer: Consumer) -> list[Any]:
    records: list[Any] = []
    wait_for(lambda: records.extend(consumer.poll(200)) or len(records) >= 10, what="records")
    return records


def kafka_python_reads_on_from_the_committed_offset(cluster: LocalCluster, at: OffsetAndEpoch, cut: Cut) -> None:
    tp = KpTopicPartition(TOPIC, 0)
    kp = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), group_id=KAFKA_PYTHON,
                       enable_auto_commit=False, auto_offset_reset="none", fetch_max_wait_ms=200)
    try:
        kp.subscribe([TOPIC])
        records: list[Any] = []
        # A LogTruncationError here would be kafka-python validating its committed position.
        wait_for(lambda: records.extend(kp_poll(kp)) or bool(records), timeout=60, what="kafka-python to resume")
        committed = kp.committed(tp, metadata=True)
        assert (committed.offset, committed.leader_epoch) == (at.offset, at.leader_epoch), "it was told the epoch"
    finally:
        kp.close()
    assert records[0].offset == first_record_from(cluster, at.offset).offset, "it starts at the committed offset"
    assert records[0].leader_epoch >= cut.new_epoch
    assert_new_history(cut, [(r.offset, r.leader_epoch, r.value) for r in records], "kafka-python")


def librdkafka_reads_on_from_the_committed_offset(cluster: LocalCluster, at: OffsetAndEpoch, cut: Cut) -> None:
    rd = rd_consumer(cluster.bootstrap_servers(), LIBRDKAFKA, "error")
    try:
        rd.subscribe([TOPIC])
        first = first_message(rd)
        assert first.error() is None, f"librdkafka validated its committed position: {first.error()}"
    finally:
        rd.close()
    assert first.offset() == first_record_from(cluster, at.offset).offset, "it starts at the committed offset"
    assert first.leader_epoch() >= cut.new_epoch
    assert_new_history(cut, [(first.offset(), first.leader_epoch(), first.value())], "librdkafka")


def librdkafka_seeking_with_the_committed_epoch_detects_it(cluster: LocalCluster, at: OffsetAndEpoch,
                                                          cut: Cut) -> None:
    failed = resumed_by_seeking(cluster, "error")
    error = failed.error()
    assert error is not None, f"librdkafka read offset {failed.offset()} after a seek with the committed epoch"
    assert error.code() == KafkaError._AUTO_OFFSET_RESET, error
    assert (f"Partition log truncation detected at offset {at.offset} (leader epoch {at.leader_epoch}): "
            f"broker end offset is {cut.divergence.offset} (offset leader epoch {cut.divergence.leader_epoch}). "
            f"Reset to INVALID.") in error.str(), error.str()

    first = resumed_by_seeking(cluster, "earliest")
    assert first.error() is None, first.error()
    assert first.offset() == first_record_from(cluster, cut.divergence.offset).offset, "it goes on from the divergence"
    assert_new_history(cut, [(first.offset(), first.leader_epoch(), first.value())], "librdkafka")


def resumed_by_seeking(cluster: LocalCluster, reset: str) -> Any:
    """The first message or error of a librdkafka member that, given its partition, pauses it
    (in on_assign: nothing is fetched from the committed offset) and seeks to the committed
    position with its epoch, which librdkafka validates before it fetches."""
    rd = rd_consumer(cluster.bootstrap_servers(), LIBRDKAFKA, reset)
    assigned: list[RdTopicPartition] = []

    def on_assign(consumer: RdConsumer, partitions: list[RdTopicPartition]) -> None:
        consumer.assign(partitions)  # at the committed offsets
        consumer.pause(partitions)
        assigned.extend(partitions)

    def seek(position: RdTopicPartition) -> bool:
        try:
            rd.seek(position)
        except KafkaException as e:
            if e.args[0].code() == KafkaError._STATE:  # its fetcher is not started yet
                return False
            raise
        return True

    try:
        rd.subscribe([TOPIC], on_assign=on_assign)

        def assignment() -> bool:
            message = rd.poll(0)
            assert message is None, "a message came before the position was checked"
            return bool(assigned)

        wait_for(assignment, timeout=60, what="librdkafka's assignment")
        for position in rd.committed(assigned, timeout=10):
            wait_for(lambda p=position: seek(p), what="librdkafka's fetcher to start")
        rd.resume(assigned)
        first = first_message(rd)
        if first.error() is not None:
            assert rd.position(assigned)[0].offset == OFFSET_INVALID
        return first
    finally:
        rd.close()


def first_message(rd: RdConsumer) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = rd.poll(0.5)
        if message is not None:
            return message
    raise AssertionError("librdkafka returned nothing")


# ---------------------------------------------------------------- the two cuts


def test_a_restore_is_detected_from_the_committed_epoch(tmp_path):
    """The backup is a snapshot taken before the commits: the restored log starts at its end
    offset, in epoch 100 (the operator's), and the commits, past that offset, diverge there."""
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=GROUPS | SNAPSHOTS)
    try:
        cluster.start()
        create_topics(cluster, "early", 30)
        backup, snapshot_end = back_up_a_snapshot(cluster, leader(cluster)[0], tmp_path)
        hw = create_topics(cluster, "late", 20)
        committed = commit_in_every_group(cluster, hw)
        assert all(at.offset > snapshot_end for at in committed.values())
        cluster.stop()
        for node in cluster.nodes.values():
            kraft_cli("restore", "--snapshot", str(backup), "--config", str(node.config_path), "--epoch", "100")
        cluster.start()
        assert leader(cluster)[1] >= 101
        write_past(cluster, committed, "restored")
        snapshot_epoch = parse_snapshot_file_name(backup.name).epoch
        check_every_client(cluster, committed, Cut(OffsetAndEpoch(snapshot_end, snapshot_epoch), 101,
                                                   b"late-", b"restored"))
    finally:
        cluster.stop()


def test_an_unclean_recovery_is_detected_from_the_committed_epoch(tmp_path):
    """The survivor is an old leader cut off from the others: it appended records it never
    committed, and the majority, in a newer epoch, committed others at those offsets and
    past them, which the groups read and committed. Then the operator recovers every node's
    metadata log from the survivor's (`kraft recover`; the disks themselves stay, so the
    groups' commits on `__consumer_offsets` do too). The survivor's last epoch ends at its
    log end: the commits diverge there."""
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0,
                           overrides=GROUPS | {"controller.quorum.fetch.timeout.ms": "4000"})
    try:
        cluster.start()
        create_topics(cluster, "everyone", 5)
        survivor, _ = leader(cluster)
        majority = [n for n in cluster.voter_ids if n != survivor]
        for n in majority:
            cluster.pause(n)
        answer = create_topic(cluster.nodes[survivor].client_port, "survivor-only", timeout_ms=300, retry_s=0)
        assert answer.error_code == ErrorCode.request_timed_out  # appended, never committed
        cluster.kill(survivor)
        for n in majority:
            cluster.resume(n)
        survivor_log = FileLog(cluster.nodes[survivor].partition_dir)
        survivor_end, survivor_epoch = survivor_log.end_offset, survivor_log.latest_epoch
        survivor_log.close()
        hw = create_topics(cluster, "majority-only", 10)
        committed = commit_in_every_group(cluster, hw)
        assert all(at.offset > survivor_end for at in committed.values())
        old_epoch = describe_quorum(cluster, majority[0]).leader_epoch
        cluster.stop()
        new_epoch = old_epoch + 10  # the operator's: above every epoch the clients saw
        survivor_dir = cluster.nodes[survivor].data_dir
        for node in cluster.nodes.values():
            kraft_cli("recover", "--from", str(survivor_dir), "--config", str(node.config_path),
                      "--epoch", str(new_epoch))
        cluster.start()
        assert leader(cluster)[1] > new_epoch
        write_past(cluster, committed, "recovered")
        check_every_client(cluster, committed, Cut(OffsetAndEpoch(survivor_end, survivor_epoch), new_epoch + 1,
                                                   b"majority-only", b"recovered"))
    finally:
        cluster.stop()
