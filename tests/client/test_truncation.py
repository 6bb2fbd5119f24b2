"""KIP-320 against a log that really lost committed records: restore from a snapshot
backup, and unclean recovery from a lagging survivor. Our consumer, kafka-python's and
confluent-kafka's (librdkafka) must each detect it rather than read past it."""

import os
import shutil
import subprocess
import sys
import time

from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import LogTruncationError as KpLogTruncationError

from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, LogTruncationError, TopicPartition
from kraft.storage import FileLog
from kraft.cli.cluster_client import leader
from tests.server.cluster_helpers import create_topics, kraft_cli, wait_for

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
        wait_for(lambda: self.kp.poll(200) is not None and self.kp.position(tp) >= hw,
                 what="kafka-python at the high watermark")

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
        deadline = time.monotonic() + 30

        def ours() -> bool:
            try:
                self.ours.poll(300)
            except LogTruncationError as e:
                assert e.divergent_offsets == {TopicPartition(TOPIC, 0): expected}
                return True
            return False

        wait_for(ours, what="our consumer to detect the truncation")

        def kafka_python() -> bool:
            try:
                self.kp.poll(300)
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
        leader_id, _ = leader(cluster)
        wait_for(lambda: list(cluster.nodes[leader_id].partition_dir.glob("*.checkpoint")), what="a snapshot")
        backup = tmp_path / "backup"
        backup.mkdir()
        latest = sorted(cluster.nodes[leader_id].partition_dir.glob("*.checkpoint"))[-1]
        shutil.copy2(latest, backup / latest.name)
        snapshot_end = int(latest.name.split("-")[0])
        hw = create_topics(cluster, "late", 20)
        assert hw > snapshot_end
        readers = Readers(cluster, hw)
        cluster.stop()
        for node in cluster.nodes.values():
            kraft_cli("restore", "--snapshot", str(backup / latest.name), "--config", str(node.config_path), "--epoch", "100")
        cluster.start()
        assert leader(cluster)[1] >= 101
        create_topics(cluster, "restored", 3)
        readers.detect(snapshot_end, new_epoch=101)
    finally:
        if readers is not None:
            readers.close()
        cluster.stop()


def test_unclean_recovery_from_a_lagging_survivor_is_detected_by_every_consumer(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0)
    readers = None
    try:
        cluster.start()
        create_topics(cluster, "everyone", 5)
        cluster.stop(3)  # node 3 falls behind: it will be the only survivor
        survivor_log = FileLog(cluster.nodes[3].partition_dir)
        survivor_end = survivor_log.end_offset
        survivor_log.close()
        hw = create_topics(cluster, "majority-only", 10)
        assert hw > survivor_end
        readers = Readers(cluster, hw)
        old_epoch = leader(cluster, exclude=(3,))[1]
        cluster.stop()
        # Nodes 1 and 2 lost their disks: every node takes node 3's log.
        for node in cluster.nodes.values():
            kraft_cli("recover", "--from", str(cluster.nodes[3].data_dir), "--config", str(node.config_path))
        cluster.start()
        assert leader(cluster)[1] > old_epoch
        readers.detect(survivor_end, new_epoch=old_epoch + 1)
    finally:
        if readers is not None:
            readers.close()
        cluster.stop()


def test_restore_refuses_an_epoch_that_is_not_new(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides=SNAPSHOTS)
    try:
        cluster.start()
        create_topics(cluster, "t", 30)
        wait_for(lambda: list(cluster.nodes[1].partition_dir.glob("*.checkpoint")), what="a snapshot")
        snapshot = sorted(cluster.nodes[1].partition_dir.glob("*.checkpoint"))[-1]
        backup = tmp_path / snapshot.name
        shutil.copy2(snapshot, backup)
        cluster.stop()
        out = subprocess.run([sys.executable, "-m", "kraft.cli", "restore", "--snapshot", str(backup), "--config",
                              str(cluster.nodes[1].config_path), "--epoch", "1"], capture_output=True, text=True)
        assert out.returncode == 1 and "is not above epoch" in out.stderr
    finally:
        cluster.stop()
