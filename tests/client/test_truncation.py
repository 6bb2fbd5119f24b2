"""KIP-320 against a log that really lost committed records: restore from a snapshot
backup, and unclean recovery onto wiped disks from a survivor whose uncommitted records the
others replaced. Our consumer, kafka-python's and confluent-kafka's (librdkafka) must each
detect it rather than read past it."""

import os
import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaConnectionError as KpConnectionError
from kafka.errors import LogTruncationError as KpLogTruncationError

from kraft.cli.cluster_client import create_topic, leader
from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, LogTruncationError, OffsetOutOfRangeError, TopicPartition
from kraft.protocol import ErrorCode
from kraft.storage import FileLog, FileQuorumStateStore
from tests.server.cluster_helpers import back_up_a_snapshot, create_topics, kraft_cli, wait_for

TOPIC = "__cluster_metadata"
SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": "3000",
             "metadata.snapshot.min.changed_records.ratio": "0"}


class Readers:
    """Three consumers, each having read the log up to the high watermark."""

    def __init__(self, cluster: LocalCluster, hw: int) -> None:
        servers = cluster.bootstrap_servers()
        self.ours = Consumer(servers, auto_offset_reset="none", include_control=True, fetch_max_wait_ms=200)
        self.ours.assign([TopicPartition(TOPIC, 0)])
        self.ours.seek_to_beginning()
        self.kp = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="none", enable_auto_commit=False,
                                group_id=None, fetch_max_wait_ms=200, metadata_max_age_ms=500)
        self.kp.assign([KpTopicPartition(TOPIC, 0)])
        self.kp.seek_to_beginning()
        self.rd = RdConsumer({"bootstrap.servers": servers, "group.id": "truncation-test",
                              "enable.auto.commit": False, "auto.offset.reset": "error",
                              "topic.metadata.refresh.interval.ms": 500, "fetch.wait.max.ms": 200,
                              **({"debug": "topic,fetch,consumer"} if os.environ.get("RDDEBUG") else {})})
        self.rd.assign([RdTopicPartition(TOPIC, 0, -2)])  # OFFSET_BEGINNING
        self._read_to(hw)

    def _read_to(self, hw: int) -> None:
        wait_for(lambda: self.ours.poll(200) is not None and self.ours.position(TopicPartition(TOPIC, 0)) >= hw,
                 what="our consumer at the high watermark")
        tp = KpTopicPartition(TOPIC, 0)

        def kp_at_hw() -> bool:
            # A broker it knew was killed (the survivor): kafka-python 3.0.12 raises from poll()
            # or position() (its metadata refresh may pick that broker) and is asked again, as an
            # application does.
            try:
                self.kp.poll(200)
                return self.kp.position(tp) >= hw
            except KpConnectionError:
                return False

        wait_for(kp_at_hw, what="kafka-python at the high watermark")

        def rd_at_hw() -> bool:
            msg = self.rd.poll(0.2)
            assert msg is None or msg.error() is None, msg.error() if msg else None
            return msg is not None and msg.offset() >= hw - 1 or self.rd.position([RdTopicPartition(TOPIC, 0)])[0].offset >= hw

        wait_for(rd_at_hw, what="librdkafka at the high watermark")

    def detect(self, expected: int, new_epoch: int) -> None:
        """Each consumer reports the truncation, with the first diverging offset where it can.

        librdkafka may still hand out messages it prefetched before the cluster went down;
        those are the old, once-committed records. What it must never hand out is a record
        of the new history (epoch >= new_epoch) before reporting the truncation."""
        deadline = time.monotonic() + 90  # for the three of them, on a loaded machine

        def ours() -> bool:
            try:
                self.ours.poll(300)
            except LogTruncationError as e:
                assert {tp: at.offset for tp, at in e.divergent_offsets.items() if at} == {TopicPartition(TOPIC, 0): expected}
                return True
            return False

        wait_for(ours, what="our consumer to detect the truncation")

        def kafka_python() -> bool:
            try:
                self.kp.poll(300)
            except KpConnectionError:  # as in _read_to: a broker it knew is gone; asked again
                return False
            except KpLogTruncationError as e:
                offsets = {tp.partition: o.offset if hasattr(o, "offset") else o for tp, o in e.divergent_offsets.items()}
                assert offsets.get(0) == expected, e.divergent_offsets
                return True
            return False

        wait_for(kafka_python, timeout=max(1, deadline - time.monotonic()), what="kafka-python to detect it")

        def librdkafka() -> bool:
            msg = self.rd.poll(0.3)
            if msg is not None and msg.error() is not None:
                # With auto.offset.reset=error librdkafka reports the truncation as a failed reset.
                error = msg.error()
                assert error.code() in (KafkaError._LOG_TRUNCATION, KafkaError._AUTO_OFFSET_RESET), error
                assert "truncation detected" in error.str() and f"end offset is {expected} " in error.str(), error
                return True
            assert msg is None or msg.leader_epoch() < new_epoch, f"librdkafka read new-history offset {msg.offset()}"
            return False

        wait_for(librdkafka, timeout=max(1, deadline - time.monotonic() + 10), what="librdkafka to detect it")

    def close(self) -> None:
        self.ours.close()
        self.kp.close()
        self.rd.close()


def test_restore_from_a_snapshot_backup_is_detected_by_every_consumer(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=SNAPSHOTS)
    readers = None
    try:
        cluster.start()
        create_topics(cluster, "early", 30)
        backup, snapshot_end = back_up_a_snapshot(cluster, leader(cluster)[0], tmp_path)
        hw = create_topics(cluster, "late", 20)
        assert hw > snapshot_end
        readers = Readers(cluster, hw)
        cluster.stop()
        for node in cluster.nodes.values():
            kraft_cli("restore", "--snapshot", str(backup), "--config", str(node.config_path), "--epoch", "100")
        cluster.start()
        assert leader(cluster)[1] >= 101
        create_topics(cluster, "restored", 3)
        readers.detect(snapshot_end, new_epoch=101)
        with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none") as consumer:
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.seek(TopicPartition(TOPIC, 0), 0)  # below the restored log's start
            with pytest.raises(OffsetOutOfRangeError) as raised:
                consumer.poll(2000)
            assert raised.value.partitions == {TopicPartition(TOPIC, 0): 0}
    finally:
        if readers is not None:
            readers.close()
        cluster.stop()


def test_after_a_restore_the_log_start_moving_on_does_not_move_the_truncation_point(tmp_path):
    """KIP-320 exactly, however far the log start moved after the restore: readers away
    while the restored cluster snapshotted and retention moved its log start past their
    position are told that the history they read ends at the restore point. Kafka's cache
    forgets the epochs below its log start and would answer the log start instead (or, past
    the readers' position, no divergence at all). Readers still open (each client) and
    readers that come back with a saved position and epoch (ours, librdkafka) alike."""
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=SNAPSHOTS)
    readers = None
    tp = TopicPartition(TOPIC, 0)
    try:
        cluster.start()
        create_topics(cluster, "early", 30)
        backup, snapshot_end = back_up_a_snapshot(cluster, leader(cluster)[0], tmp_path)
        hw = create_topics(cluster, "late", 20)
        readers = Readers(cluster, hw)
        saved = readers.ours.next_offsets()[tp]  # a position and the epoch of the record before it
        assert saved.offset >= hw > snapshot_end
        cluster.stop()
        for node in cluster.nodes.values():
            kraft_cli("restore", "--snapshot", str(backup), "--config", str(node.config_path), "--epoch", "100")
            with node.config_path.open("a") as config:  # retention keeps only the latest snapshot from now on
                config.write("metadata.max.retention.bytes=1\n")
        cluster.start()
        rounds = iter(range(1000))
        with Consumer(cluster.bootstrap_servers()) as probe:
            def log_start_past_the_readers() -> bool:
                create_topics(cluster, f"restored{next(rounds)}", 5)
                return probe.beginning_offsets([tp])[tp].offset > saved.offset
            wait_for(log_start_past_the_readers, timeout=120, what=f"the log start past offset {saved.offset}")
        readers.detect(snapshot_end, new_epoch=101)
        with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none") as ours:
            ours.assign([tp])
            ours.seek(tp, saved.offset, leader_epoch=saved.leader_epoch)

            def ours_detects() -> bool:
                try:
                    records = ours.poll(300)
                except LogTruncationError as e:
                    assert e.divergent_offsets[tp].offset == snapshot_end
                    return True
                assert not records, f"our consumer read offset {records[0].offset} of the new history"
                return False

            wait_for(ours_detects, timeout=30, what="our consumer back with its saved position to detect the truncation")
        rd = RdConsumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "truncation-test-back",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
        try:
            rd.assign([RdTopicPartition(TOPIC, 0, saved.offset, leader_epoch=saved.leader_epoch)])

            def rd_detects() -> bool:
                msg = rd.poll(0.3)
                if msg is None:
                    return False
                error = msg.error()
                assert error is not None, f"librdkafka read offset {msg.offset()} of the new history"
                assert "truncation detected" in error.str() and f"end offset is {snapshot_end} " in error.str(), error
                return True

            wait_for(rd_detects, timeout=30, what="librdkafka back with its saved position to detect the truncation")
        finally:
            rd.close()
    finally:
        if readers is not None:
            readers.close()
        cluster.stop()


def test_unclean_recovery_onto_wiped_disks_from_a_diverged_survivor_is_detected_by_every_consumer(tmp_path):
    """The survivor is an old leader cut off from the others: it appended records it never
    committed, and the majority, in a newer epoch, committed others at those offsets.
    Then the majority's disks are lost (removed, reformatted) and every node takes the
    survivor's log. The consumers read the majority's records; the leader's epochs show
    them diverging at the survivor's log end at the latest (its epoch ends there)."""
    # A fetch timeout well above the 300 ms the survivor's write waits: it must still lead
    # (check quorum would make it resign) when its write times out, on a loaded machine too.
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0,
                           overrides={"controller.quorum.fetch.timeout.ms": "4000"})
    readers = None
    try:
        cluster.start()
        committed = create_topics(cluster, "everyone", 5)
        survivor, survivor_epoch = leader(cluster)
        majority = [n for n in cluster.voter_ids if n != survivor]
        for n in majority:
            cluster.pause(n)
        # Appended by the survivor, never committed: it times out waiting for a quorum.
        answer = create_topic(cluster.nodes[survivor].client_port, "survivor-only", timeout_ms=300, retry_s=0)
        assert answer.error_code == ErrorCode.request_timed_out
        cluster.kill(survivor)
        for n in majority:
            cluster.resume(n)
        survivor_log = FileLog(cluster.nodes[survivor].partition_dir)
        survivor_end, survivor_last_epoch = survivor_log.end_offset, survivor_log.latest_epoch
        survivor_log.close()
        assert survivor_end > committed and survivor_last_epoch == survivor_epoch
        hw = create_topics(cluster, "majority-only", 10)  # over the survivor's records, and past them
        assert hw > survivor_end
        readers = Readers(cluster, hw)
        old_epoch = leader(cluster, exclude=(survivor,))[1]
        assert old_epoch > survivor_epoch
        cluster.stop()
        for n in majority:  # their disks are gone: new, formatted ones
            shutil.rmtree(cluster.nodes[n].data_dir)
            kraft_cli("storage", "format", "--config", str(cluster.nodes[n].config_path),
                      "--cluster-id", cluster.cluster_id)
        new_epoch = old_epoch + 10  # the operator's: above every epoch the clients saw
        for node in cluster.nodes.values():
            kraft_cli("recover", "--from", str(cluster.nodes[survivor].data_dir), "--config", str(node.config_path),
                      "--epoch", str(new_epoch))
        cluster.start()
        assert leader(cluster)[1] > new_epoch
        readers.detect(survivor_end, new_epoch=new_epoch + 1)
    finally:
        if readers is not None:
            readers.close()
        cluster.stop()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True)


def test_restore_refuses_an_epoch_that_is_not_new(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides=SNAPSHOTS)
    try:
        cluster.start()
        create_topics(cluster, "t", 30)
        backup, _ = back_up_a_snapshot(cluster, 1, tmp_path)
        cluster.stop()
        config = str(cluster.nodes[1].config_path)
        out = run_cli("restore", "--snapshot", str(backup), "--config", config, "--epoch", "1")
        assert out.returncode == 1 and "is not above epoch" in out.stderr
        # A one-voter cluster's voter knows every epoch a client saw: it may choose.
        seen = FileQuorumStateStore(cluster.nodes[1].partition_dir).read().epoch
        out = run_cli("restore", "--snapshot", str(backup), "--config", config)
        assert out.returncode == 0 and f"epoch {seen + 1}." in out.stdout
        assert FileQuorumStateStore(cluster.nodes[1].partition_dir).read().epoch == seen + 1
    finally:
        cluster.stop()


def test_without_epoch_a_node_that_cannot_know_the_clients_epochs_refuses(tmp_path):
    """One voter of three, or any node on a new disk, cannot tell which epochs the
    clients saw nor what the other nodes will choose: --epoch is required, and the
    message says what to give."""
    first = LocalCluster(tmp_path / "one", voters=1, observers=0, overrides=SNAPSHOTS)
    try:
        first.start()
        create_topics(first, "t", 30)
        backup, _ = back_up_a_snapshot(first, 1, tmp_path)
    finally:
        first.stop()
    fresh = LocalCluster(tmp_path / "three", voters=3, observers=0)  # formatted, never started
    config = str(fresh.nodes[2].config_path)
    for args in (("restore", "--snapshot", str(backup)), ("recover", "--from", str(first.nodes[1].data_dir))):
        out = run_cli(*args, "--config", config)
        assert out.returncode == 1 and "--epoch is required" in out.stderr and "3 voters" in out.stderr
        assert "no quorum-state" in out.stderr and "Give every node the same --epoch" in out.stderr
        assert not fresh.nodes[2].partition_dir.exists()  # nothing was changed
    out = run_cli("recover", "--from", str(first.nodes[1].data_dir), "--config", config, "--epoch", "50")
    assert out.returncode == 0 and "epoch 50." in out.stdout and "checked against epoch" in out.stderr
    assert FileQuorumStateStore(fresh.nodes[2].partition_dir).read().epoch == 50
