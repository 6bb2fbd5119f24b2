"""Storage fails stop: a node whose disk fails a write, sync or rename stops at once.

Each test runs a real single-voter node (it commits alone, so its own disk decides what is
acknowledged) with kraft/cli/failfs.c preloaded, a file layer that fails chosen calls
on demand and, when a sync fails, drops what the file gained since its last good sync, as
a kernel may drop dirty pages it could not write. A writer creates topics throughout. The
node must exit non-zero with one CRITICAL line naming the file and the error, acknowledge
nothing sent after the fault, and, restarted on a healthy disk, hold every write it did
acknowledge. The last test fills a real tmpfs.
"""

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kraft.cli.cluster_client import UNREACHABLE, create_topic, topic_names
from kraft.cli.failfs import build, environment
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.storage.meta_properties import format_storage

from .cluster_helpers import wait_for


@pytest.fixture(scope="session")
def failfs(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("failfs"))


class Writer:
    """Creates topics one after another and keeps what was acknowledged, and any
    acknowledgement of a request sent after `fault_seen()` turned true."""

    def __init__(self, cluster: LocalCluster, fault_seen, partitions: int = 1) -> None:
        self.port = cluster.nodes[1].client_port
        self.fault_seen = fault_seen
        self.partitions = partitions
        self.acked: list[str] = []
        self.acked_after_fault: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name, after_fault = f"t-{i}", self.fault_seen()
            i += 1
            try:
                result = create_topic(self.port, name, self.partitions, timeout_ms=2000, retry_s=0)
            except UNREACHABLE:
                if after_fault:
                    return
                time.sleep(0.05)
                continue
            if result.error_code == ErrorCode.none:
                self.acked.append(name)
                if after_fault:
                    self.acked_after_fault.append(name)

    def start(self) -> "Writer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def critical_lines(cluster: LocalCluster) -> list[str]:
    return [line for line in cluster.nodes[1].log_path.read_text().splitlines() if "CRITICAL" in line]


def restart_and_check(cluster: LocalCluster, acked: list[str]) -> None:
    """On a healthy disk again: the node starts and holds every acknowledged topic."""
    cluster.env = {}
    cluster.start()
    wait_for(lambda: set(acked) <= topic_names(cluster, 1), 30, "the acknowledged topics after the restart")


@pytest.mark.parametrize("rule, said", [
    ("fsync EIO 00000000000000000000.log 1", "fsync failed on .*/00000000000000000000.log: .*Input/output error"),
    ("fdatasync EIO recovery-point-offset-checkpoint 1",
     "fdatasync failed on .*/recovery-point-offset-checkpoint: .*Input/output error"),
    ("pwrite ENOSPC 00000000000000000000.log 1", "write failed on .*/00000000000000000000.log: .*No space left"),
    ("pwrite EIO .checkpoint.part 1", "write failed on .*-[0-9]{10}.checkpoint.part: .*Input/output error"),
], ids=["segment-fsync", "recovery-point-fdatasync", "segment-write-enospc", "snapshot-write"])
def test_a_failed_write_or_sync_stops_the_node_and_nothing_after_it_is_acknowledged(tmp_path, failfs, rule, said):
    rules, faults = tmp_path / "rules", tmp_path / "faults.log"
    rules.write_text("")
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "4000",  # snapshots keep coming
        "metadata.snapshot.min.changed_records.ratio": "0",
    }, env=environment(failfs, rules, faults))
    cluster.start()
    node = cluster.nodes[1]
    writer = Writer(cluster, faults.exists).start()
    try:
        wait_for(lambda: len(writer.acked) >= 20, 60, "acknowledged writes before the fault")
        rules.write_text(rule + "\n")
        node.process.wait(60)
        writer.stop()
        assert faults.read_text().split()[0] == rule.split()[0], "the fault fired"
        assert node.process.returncode == 2
        (line,) = critical_lines(cluster)
        assert re.search(f"node 1 stops: {said}", line), line
        assert "Traceback" not in node.log_path.read_text()
        assert writer.acked_after_fault == []
        restart_and_check(cluster, writer.acked)
    finally:
        writer.stop()
        cluster.stop()


def test_a_node_that_cannot_write_its_quorum_state_does_not_start(tmp_path, failfs):
    rules = tmp_path / "rules"
    rules.write_text("rename EIO quorum-state -1\n")
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0,
                           env=environment(failfs, rules))
    with pytest.raises(RuntimeError, match="exited"):
        cluster.start()
    node = cluster.nodes[1]
    assert node.process.returncode == 1
    text = node.log_path.read_text()
    assert "kraft server start: rename failed on" in text and "quorum-state: [Errno 5] Input/output error" in text
    assert "Traceback" not in text


def test_a_full_filesystem_stops_the_node_and_nothing_acknowledged_is_lost(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0)
    node = cluster.nodes[1]
    data = node.data_dir  # a 384 KiB tmpfs: a disk that really fills up
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=384k", "tmpfs", str(data)], check=True)
    try:
        format_storage(data, cluster.cluster_id, 1)
        cluster.start()
        writer = Writer(cluster, lambda: not node.running, partitions=50).start()
        node.process.wait(120)
        writer.stop()
        assert node.process.returncode == 2
        (line,) = critical_lines(cluster)
        assert "No space left on device" in line and str(data) in line, line
        assert len(writer.acked) >= 5, "the disk filled after some writes were acknowledged"
        subprocess.run(["mount", "-o", "remount,size=64m", str(data)], check=True)
        restart_and_check(cluster, writer.acked)
    finally:
        cluster.stop()
        subprocess.run(["umount", "-l", str(data)], check=False)


@pytest.mark.parametrize("damage", ["segment", "quorum-state", "snapshot"])
def test_a_damaged_file_at_start_is_one_line_naming_it_and_the_way_out(tmp_path, damage):
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "2000", "metadata.snapshot.min.changed_records.ratio": "0",
    })
    node = cluster.nodes[1]
    with cluster:
        cluster.start()
        writer = Writer(cluster, lambda: False).start()
        wait_for(lambda: list(node.partition_dir.glob("*.checkpoint")) and len(writer.acked) > 30, 60,
                 "a snapshot and writes after it")
        writer.stop()
    victim = {"segment": sorted(node.partition_dir.glob("*.log"))[-1], "quorum-state": node.partition_dir / "quorum-state",
              "snapshot": sorted(node.partition_dir.glob("*.checkpoint"))[-1]}[damage]
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    victim.write_bytes(bytes(raw))
    mark = node.log_path.stat().st_size
    with pytest.raises(RuntimeError, match="exited"):
        cluster.start()
    out = node.log_path.read_bytes()[mark:].decode()
    assert node.process.returncode == 1 and "Traceback" not in out
    (line,) = [x for x in out.splitlines() if x.startswith("kraft server start:")]
    assert victim.name in line and "format it again" in line, line
