"""A real cluster of processes on loopback: election, replication, failover under load,
restart from disk, catch-up by snapshot, wrong cluster ids, bad frames."""

import socket
import struct
import threading
import time

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.records import read_batches
from kraft.storage import FileLog

from kraft.cli.cluster_client import create_topic, describe_quorum, leader, metric

from .cluster_helpers import wait_for


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=1)
    c.start()
    yield c
    c.stop()


def test_a_leader_is_elected_and_everyone_replicates(cluster):
    leader_id, epoch = leader(cluster)
    assert leader_id in cluster.voter_ids and epoch >= 1
    port = cluster.nodes[leader_id].client_port
    for i in range(5):
        assert create_topic(port, f"t{i}", 1, 1).error_code == ErrorCode.none

    def caught_up():
        p = describe_quorum(cluster, leader_id)
        states = list(p.current_voters) + list(p.observers)
        return len(states) == 4 and all(s.log_end_offset == p.high_watermark for s in states)

    wait_for(caught_up, what="every replica at the high watermark")
    p = describe_quorum(cluster, leader_id)
    assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
    assert [o.replica_id for o in p.observers] == [4]


def test_a_non_leader_says_who_leads(cluster):
    leader_id, epoch = leader(cluster)
    other = next(n for n in cluster.voter_ids if n != leader_id)
    p = describe_quorum(cluster, other)
    assert (p.error_code, p.leader_id, p.leader_epoch) == (ErrorCode.not_leader_or_follower, leader_id, epoch)


def test_sigkill_of_the_leader_under_write_load_loses_no_acknowledged_write(cluster):
    leader_id, _ = leader(cluster)
    acknowledged: list[str] = []
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                current, _ = leader(cluster, timeout=5)
                result = create_topic(cluster.nodes[current].client_port, f"load-{n}", timeout_ms=3000)
            except (OSError, ConnectionError, TimeoutError):
                continue
            if result.error_code == ErrorCode.none:
                acknowledged.append(f"load-{n}")

    writer = threading.Thread(target=write)
    writer.start()
    wait_for(lambda: len(acknowledged) >= 20, what="writes before the kill")
    cluster.kill(leader_id)
    killed_at = time.monotonic()
    new_leader, _ = leader(cluster, exclude=(leader_id,))
    failover = time.monotonic() - killed_at
    count = len(acknowledged)
    wait_for(lambda: len(acknowledged) >= count + 20, what="writes after the failover")
    stop.set()
    writer.join()
    cluster.start(leader_id)
    p = describe_quorum(cluster, new_leader)
    hw = p.high_watermark
    def caught_up() -> bool:
        # Every node, the observer included: an observer that still follows the dead leader
        # is not in the new leader's list, and must not pass for caught up by its absence.
        p = describe_quorum(cluster, new_leader)
        ends = {s.replica_id: s.log_end_offset for s in (*p.current_voters, *p.observers)}
        return all(ends.get(n, -1) >= hw for n in cluster.nodes)

    wait_for(caught_up, what="the old leader and the observer catching up")
    cluster.stop()
    for node in cluster.nodes.values():
        names = topics_in_log(node.partition_dir)
        missing = [t for t in acknowledged if t not in names]
        assert not missing, f"node {node.node_id} lacks acknowledged topics {missing[:5]}"
    assert failover < 10, f"failover took {failover:.1f} s"


def topics_in_log(partition_dir) -> set[str]:
    """Topic names in the TopicRecords of a node's log (and nothing else)."""
    from kraft.metadata import decode_record
    from kraft.metadata.records import TopicRecord

    log = FileLog(partition_dir)
    names = set()
    offset = log.start_offset
    while offset < log.end_offset:
        info = log.read(offset, 1 << 24)
        for batch in read_batches(info.tobytes()):
            if batch.header.is_control:
                continue
            for r in batch.records():
                record = decode_record(r.value)
                if isinstance(record, TopicRecord):
                    names.add(record.name)
        offset = info.next_offset
    log.close()
    return names


def test_graceful_stop_of_the_leader_hands_over_without_an_election_timeout(cluster):
    leader_id, epoch = leader(cluster)
    stopped_at = time.monotonic()
    cluster.stop(leader_id)
    new_leader, new_epoch = leader(cluster, exclude=(leader_id,))
    elapsed = time.monotonic() - stopped_at
    assert new_epoch > epoch
    # Without EndQuorumEpoch no follower could even begin an election before the fetch
    # timeout (2 s by default) had passed without hearing from the leader.
    assert elapsed < 2.0, f"{elapsed:.2f} s: EndQuorumEpoch should beat the fetch timeout"
    log_text = cluster.nodes[new_leader].log_path.read_text()
    assert "elected leader of epoch" in log_text


def test_restart_from_disk_keeps_everything(cluster):
    leader_id, _ = leader(cluster)
    for i in range(3):
        assert create_topic(cluster.nodes[leader_id].client_port, f"keep-{i}").error_code == ErrorCode.none
    cluster.stop()
    cluster.start()
    leader_id, _ = leader(cluster)
    assert create_topic(cluster.nodes[leader_id].client_port, "after-restart").error_code == ErrorCode.none
    assert describe_quorum(cluster, leader_id).high_watermark > 0
    cluster.stop()  # read the files only once no process has them open
    for node in cluster.nodes.values():
        assert {f"keep-{i}" for i in range(3)} <= topics_in_log(node.partition_dir)


def test_a_node_with_another_cluster_id_is_refused(tmp_path):
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=0)
    c.start(1)
    c.start(2)
    leader(c)
    # Node 3 is formatted for another cluster.
    meta = c.nodes[3].data_dir / "meta.properties"
    meta.write_text(meta.read_text().replace(c.cluster_id, "someOtherClusterId0000"))
    c.start(3)
    try:
        time.sleep(3)
        assert "refuses our requests with INCONSISTENT_CLUSTER_ID" in c.nodes[3].log_path.read_text()
        leader_id, epoch = leader(c)
        assert "(INCONSISTENT_CLUSTER_ID)" in c.nodes[leader_id].log_path.read_text()
        p = describe_quorum(c, leader_id)
        node3 = [v for v in p.current_voters if v.replica_id == 3][0]
        assert node3.log_end_offset == -1, "node 3 never fetched successfully"
    finally:
        c.stop()


def test_a_malformed_or_oversized_frame_is_refused_while_the_node_serves_others(cluster):
    leader_id, _ = leader(cluster)
    port = cluster.nodes[leader_id].client_port
    with socket.create_connection(("127.0.0.1", port)) as bad:
        bad.sendall(struct.pack(">i", 1 << 30))  # over socket.request.max.bytes
        assert bad.recv(1) == b""
    with socket.create_connection(("127.0.0.1", port)) as bad:
        bad.sendall(struct.pack(">ihhih", 20, 55, 1, 7, 3) + b"\xff" * 10)
        assert bad.recv(1) == b""
    assert describe_quorum(cluster, leader_id).error_code == ErrorCode.none
    assert create_topic(port, "still-serving").error_code == ErrorCode.none


def test_a_fresh_observer_catches_up_by_snapshot(tmp_path):
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=1, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "2000",
        "metadata.snapshot.min.changed_records.ratio": "0",
    })
    try:
        for voter in c.voter_ids:
            c.start(voter)
        leader_id, _ = leader(c)
        port = c.nodes[leader_id].client_port
        for i in range(40):
            assert create_topic(port, f"snap-{i}", 2, 1).error_code == ErrorCode.none
        wait_for(lambda: list(c.nodes[leader_id].partition_dir.glob("*.checkpoint")), what="a snapshot")
        wait_for(lambda: metric(c, leader_id, "kraft_log_start_offset") > 0, what="the leader's log start to move")
        assert metric(c, leader_id, "kraft_snapshot_size_bytes") > 0
        assert metric(c, leader_id, "kraft_gen_snapshot_latency_ms_count") >= 1
        c.start(4)
        hw = describe_quorum(c, leader_id).high_watermark

        def observer_caught_up():
            p = describe_quorum(c, leader_id)
            return any(o.replica_id == 4 and o.log_end_offset >= hw for o in p.observers)

        wait_for(observer_caught_up, what="the observer to catch up")
        text = c.nodes[4].log_path.read_text()
        assert "fetching snapshot" in text and "loaded snapshot" in text
        assert metric(c, 4, "kraft_log_start_offset") > 0
        assert metric(c, 4, "kraft_fetch_snapshot_bytes_fetched_total") > 0
        assert metric(c, 4, "kraft_load_snapshot_latency_ms_count") >= 1
        assert list(c.nodes[4].partition_dir.glob("*.checkpoint"))
    finally:
        c.stop()
