"""Flipped bits in a stopped node's files: refused naming the file, or repaired, never lost.

A real single-voter node writes topics (each one acknowledged), snapshots, moves its log
start past a snapshot and stops. Then every file of its data directory gets bits flipped,
one file at a time and two at a time, and the directory is opened the way a starting node
opens it (meta.properties, the log, the snapshots, quorum-state, the Raft core and the
metadata state machine over them, all in this process). Each case must either be refused
with an error that names a damaged file, and open whole once the damage is undone (so
nothing was deleted before the refusal), or open and hold every acknowledged topic.
"""

import itertools
import random
import shutil
from pathlib import Path
from random import Random

import pytest

from kraft.cli.cluster_client import create_topic
from kraft.cli.local_cluster import LocalCluster
from kraft.controller import QuorumController
from kraft.protocol import ErrorCode
from kraft.raft import RaftConfig, RaftCore, Role
from kraft.server.runtime.node import PARTITION_DIR
from kraft.storage import FileLog, FileQuorumStateStore, FileSnapshotStore, StorageError
from kraft.storage.meta_properties import StorageNotFormattedError, read_meta_properties

from .cluster_helpers import wait_for

FLIPS_PER_FILE = 8


@pytest.fixture(scope="module")
def stopped_node(tmp_path_factory) -> tuple[Path, str, set[str]]:
    """(a stopped node's data directory, its cluster id, the topics it acknowledged)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("bits") / "cluster", voters=1, observers=0, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "3000",
        "metadata.snapshot.min.changed_records.ratio": "0",
        "metadata.log.segment.bytes": "1024",
        "metadata.max.retention.bytes": "1",  # so the log start moves past a snapshot
    })
    cluster.start()
    node = cluster.nodes[1]
    acked: set[str] = set()

    def create(n: int) -> None:
        for _ in range(n):
            name = f"topic-{len(acked)}"
            assert create_topic(node.client_port, name).error_code == ErrorCode.none
            acked.add(name)

    try:
        create(40)
        start = node.data_dir / "log-start-offset-checkpoint"
        wait_for(lambda: " 0 0000" in start.read_text() and int(start.read_text().split()[4]) > 0, 30,
                 "the log start to move past a snapshot")
        create(20)  # and records after it, over several segments
    finally:
        cluster.stop()
    return node.data_dir, cluster.cluster_id, acked


def open_like_a_node(data: Path, cluster_id: str) -> set[str]:
    """Opens the directory as KraftNode.start does and lets the single voter elect itself
    and apply its log; returns the topics in its metadata image."""
    assert read_meta_properties(data) == (cluster_id, 1)
    partition = data / PARTITION_DIR
    log = FileLog(partition)
    try:
        controller = QuorumController()
        config = RaftConfig(node_id=1, voters=(1,), cluster_id=cluster_id)
        core = RaftCore(config, log, FileQuorumStateStore(partition), Random(0), 0, controller,
                        FileSnapshotStore(partition))
        controller.core = core
        now = 0
        while core.role != Role.LEADER:
            now += 1000
            core.tick(now)
        log.flush()
        core.handle_flush(now)
        assert core.high_watermark == log.end_offset
        return set(controller.cache.image.topics_by_name.keys())
    finally:
        log.close()


def data_files(data: Path) -> list[Path]:
    return sorted(p.relative_to(data) for p in data.rglob("*") if p.is_file() and p.name != ".lock")


def flip(path: Path, rng: random.Random) -> None:
    raw = bytearray(path.read_bytes())
    if raw:
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(raw))


def cases(data: Path) -> list[tuple[Path, ...]]:
    files = data_files(data)
    singles = [(f,) for f in files for _ in range(FLIPS_PER_FILE)]
    return singles + list(itertools.combinations(files, 2))


def test_every_file_of_the_stopped_node_is_covered(stopped_node):
    data, _, _ = stopped_node
    names = {p.name for p in data_files(data)}
    for expected in ("meta.properties", "quorum-state", "leader-epoch-checkpoint", "log-start-offset-checkpoint",
                     "recovery-point-offset-checkpoint"):
        assert expected in names
    suffixes = {p.suffix for p in data_files(data)}
    assert {".log", ".index", ".checkpoint"} <= suffixes
    assert len([p for p in data_files(data) if p.suffix == ".log"]) > 1


def test_flipped_bits_are_refused_naming_the_file_or_lose_nothing(stopped_node, tmp_path):
    data, cluster_id, acked = stopped_node
    assert open_like_a_node(shutil.copytree(data, tmp_path / "intact"), cluster_id) >= acked
    rng = random.Random(20261125)
    outcomes = {"refused": 0, "opened": 0}
    for n, damaged in enumerate(cases(data)):
        copy = shutil.copytree(data, tmp_path / f"case-{n}")
        for relative in damaged:
            flip(copy / relative, rng)
        try:
            topics = open_like_a_node(copy, cluster_id)
        except (StorageError, StorageNotFormattedError) as e:
            outcomes["refused"] += 1
            assert any(relative.name in str(e) for relative in damaged), f"{damaged}: {e}"
            for relative in damaged:  # undo the damage: nothing may have been deleted meanwhile
                shutil.copy2(data / relative, copy / relative)
            topics = open_like_a_node(copy, cluster_id)
        else:
            outcomes["opened"] += 1
        assert topics >= acked, f"{damaged}: lost {sorted(acked - topics)[:5]}"
        shutil.rmtree(copy)
    assert outcomes["refused"] > 0 and outcomes["opened"] > 0, outcomes
