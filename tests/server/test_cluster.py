"""A real cluster of processes on loopback: election, replication, failover under load,
restart from disk, catch-up by snapshot, wrong cluster ids, bad frames, and the
`kraft cluster up` and `kraft metadata-quorum` commands."""

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft.cli.cluster_client import (
    create_topic,
    create_topic_at_leader,
    describe_quorum,
    leader,
    metric,
    request,
    run_async,
)
from kraft.cli.local_cluster import LocalCluster
from kraft.cli.quorum_cmd import replication_lines, status_lines
from kraft.protocol import ErrorCode
from kraft.raft import messages as m
from kraft.records import read_batches
from kraft.storage import FileLog
from kraft.storage.dirlock import DirectoryInUseError, check_free
from kraft.storage.meta_properties import format_storage

from .cluster_helpers import QUIET, wait_for


@pytest.fixture
def quiet_cluster(tmp_path):
    """A cluster whose controller writes nothing while idle (no NoOps), so its logs come to
    rest and figures can be compared between two reads."""
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=1, overrides=QUIET)
    c.start()
    yield c
    c.stop()


def test_a_leader_is_elected_and_everyone_replicates(cluster):
    leader_id, epoch = leader(cluster)
    assert leader_id in cluster.voter_ids and epoch >= 1
    for i in range(5):
        leader_id, result = create_topic_at_leader(cluster, f"t{i}")
        assert result.error_code == ErrorCode.none

    def caught_up():
        p = describe_quorum(cluster, leader_id)
        states = list(p.current_voters) + list(p.observers)
        return len(states) == 4 and all(s.log_end_offset == p.high_watermark for s in states)

    wait_for(caught_up, what="every replica at the high watermark")
    p = describe_quorum(cluster, leader_id)
    assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
    assert [o.replica_id for o in p.observers] == [4]


def test_a_non_leader_says_who_leads(cluster):
    """On the controller listener a voter answers for itself; on the client listener it
    asks the leader, as Kafka's brokers forward DescribeQuorum."""
    def answered_in_one_epoch() -> bool:
        """The checks, unless an election (a loaded machine's fetch timeout) came between
        the leader's answer and the others': then they are asked again."""
        leader_id, epoch = leader(cluster)
        other = next(n for n in cluster.voter_ids if n != leader_id)
        own = run_async(request(cluster.nodes[other].controller_port, m.describe_quorum_request())).topics[0].partitions[0]
        p = describe_quorum(cluster, other)
        if own.leader_epoch != epoch or p.leader_epoch != epoch:
            return False
        assert (own.error_code, own.leader_id) == (ErrorCode.not_leader_or_follower, leader_id)
        assert (p.error_code, p.leader_id) == (ErrorCode.none, leader_id)
        assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3], "the leader's view"
        return True

    wait_for(answered_in_one_epoch, what="the voters' answers within one epoch")


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
    new_leader, _ = leader(cluster, exclude=(leader_id,))
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


# Timers far longer than a handover: fetch.timeout.ms is how long a follower waits for its
# leader before it may campaign, so only EndQuorumEpoch can get a successor elected sooner.
# Whether it did is read from the followers' logs (a follower whose fetch timeout ran out
# logs "no answer from leader"), not from a clock: a loaded machine may take longer than
# any timer to stop a process and to answer the test's DescribeQuorum.
SLOW_TIMERS = {"controller.quorum.fetch.timeout.ms": "20000", "controller.quorum.election.timeout.ms": "5000"}


def test_graceful_stop_of_the_leader_hands_over_without_an_election_timeout(tmp_path):
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=SLOW_TIMERS)
    c.start()
    try:
        leader_id, epoch = leader(c, timeout=60)
        c.stop(leader_id)
        new_leader, new_epoch = leader(c, exclude=(leader_id,), timeout=60)
        assert new_epoch > epoch
        assert f"resigned as leader of epoch {epoch}" in c.nodes[leader_id].log_path.read_text()
        assert f"elected leader of epoch {new_epoch}" in c.nodes[new_leader].log_path.read_text()
        followers = [n for n in c.nodes.values() if n.node_id != leader_id]
        assert all("no answer from leader" not in n.log_path.read_text() for n in followers)
        assert any(f"leader {leader_id} resigned (EndQuorumEpoch)" in n.log_path.read_text() for n in followers)
    finally:
        c.stop()


def test_restart_from_disk_keeps_everything(cluster):
    leader_id, _ = leader(cluster)
    for i in range(3):
        assert create_topic(cluster.nodes[leader_id].client_port, f"keep-{i}").error_code == ErrorCode.none
    cluster.stop()
    cluster.start()
    # Every node restarts at once, so elections can overlap: whoever leads once it settles.
    leader_id, result = create_topic_at_leader(cluster, "after-restart")
    assert result.error_code == ErrorCode.none
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
    (c.nodes[3].data_dir / "meta.properties").unlink()
    format_storage(c.nodes[3].data_dir, "someOtherClusterId0000", 3)
    c.start(3)
    try:
        wait_for(lambda: "refuses our requests with INCONSISTENT_CLUSTER_ID" in c.nodes[3].log_path.read_text(),
                 what="node 3 told it is in another cluster")
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
        "metadata.max.retention.bytes": "1",  # retention moves the log start past snapshots
    })
    try:
        for voter in c.voter_ids:
            c.start(voter)
        for i in range(40):
            leader_id, result = create_topic_at_leader(c, f"snap-{i}", 2, 1)
            assert result.error_code == ErrorCode.none
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


def quorum_of(leader_id: int, voters: list[tuple], observers: list[tuple] = ()):
    """A DescribeQuorum partition as the leader sends it; replicas are
    (id, log end offset, last fetch ms, last caught-up ms)."""
    return m.describe_quorum_response(
        ErrorCode.none, leader_id=leader_id, epoch=7, high_watermark=100,
        voters=tuple(m.replica_state(*v) for v in voters), observers=tuple(m.replica_state(*o) for o in observers),
    ).topics[0].partitions[0]


@pytest.mark.parametrize("voters,lag,lag_ms", [
    # The voter with the lowest log end offset sets both figures, whoever caught up longest ago.
    pytest.param([(1, 100, 5000, 5000), (2, 90, 4900, 4000), (3, 95, 4950, 3000)], 10, 1000, id="lowest-offset"),
    # First of equals in the leader's order: here the leader itself, which lags by nothing.
    pytest.param([(1, 100, 5000, 5000), (2, 100, 4900, 4000), (3, 100, 4950, 3000)], 0, 0, id="leader-lowest"),
    pytest.param([(1, 100, 5000, 5000), (2, 100, 4900, 4000), (3, 100, 4950, 3000)][::-1], 0, 2000, id="voter-first"),
    pytest.param([(1, 100, 5000, 5000), (2, 50, -1, -1), (3, 100, 4950, 3000)], 50, -1, id="never-caught-up"),
])
def test_describe_status_computes_the_lag_as_kafkas_tool(voters, lag, lag_ms):
    lines = status_lines("abc", quorum_of(1, voters))
    assert lines[4:6] == [f"MaxFollowerLag:         {lag}", f"MaxFollowerLagTimeMs:   {lag_ms}"]


def test_describe_replication_is_laid_out_as_kafkas_tool():
    q = quorum_of(2, [(1, 105, 4000, 3000), (2, 100, 5000, 5000), (3, 99, 4990, 4990)], [(14, -1, -1, -1)])
    assert "\n".join(replication_lines(q)) == (
        "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n"
        "2     \t100         \t0  \t5000              \t5000                 \tLeader  \t\n"
        "1     \t105         \t-5 \t4000              \t3000                 \tFollower\t\n"
        "3     \t99          \t1  \t4990              \t4990                 \tFollower\t\n"
        "14    \t-1          \t101\t-1                \t-1                   \tObserver\t"
    )


def quorum_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "metadata-quorum", *args], capture_output=True, text=True,
                          timeout=60)


def metadata_quorum_cli(port: int, which: str, *more: str, flag: str = "--bootstrap-server") -> list[str]:
    out = quorum_tool(flag, f"127.0.0.1:{port}", "describe", f"--{which}", *more)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_metadata_quorum_describes_a_real_cluster_with_a_voter_down(quiet_cluster):
    cluster = quiet_cluster
    leader_id, epoch = leader(cluster)
    # Every broker registered and unfenced first: those are records too.
    wait_for(lambda: all(f"unfenced broker {n} (" in cluster.nodes[leader_id].log_path.read_text()
                         for n in cluster.nodes), what="every broker unfenced")
    down = next(n for n in cluster.voter_ids if n != leader_id)
    cluster.stop(down)
    for i in range(3):
        assert create_topic(cluster.nodes[leader_id].client_port, f"while-{down}-is-down-{i}").error_code == ErrorCode.none
    # The stopped broker fenced itself on its way out: nothing more is written, once the
    # running replicas have it all.
    def settled():
        p = describe_quorum(cluster, leader_id)
        return all(r.log_end_offset == p.high_watermark for r in (*p.current_voters, *p.observers)
                   if r.replica_id != down)

    wait_for(settled, what="the running replicas at the high watermark")
    before = describe_quorum(cluster, leader_id)
    stopped = next(v for v in before.current_voters if v.replica_id == down)
    asked_at = int(time.time() * 1000)
    other = next(n for n in cluster.voter_ids if n not in (leader_id, down))
    status = metadata_quorum_cli(cluster.nodes[other].client_port, "status")  # a non-leader points to the leader
    replication = metadata_quorum_cli(cluster.nodes[leader_id].client_port, "replication")
    answered_at = int(time.time() * 1000)
    after = describe_quorum(cluster, leader_id)
    assert (after.high_watermark, after.leader_epoch) == (before.high_watermark, before.leader_epoch)

    hw = before.high_watermark
    fields = dict(line.split(":", 1) for line in status)
    assert [line[:24].rstrip() for line in status] == [f"{name}:" for name in fields]
    assert list(fields) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                            "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
    values = {name: value.strip() for name, value in fields.items()}
    assert values["ClusterId"] == cluster.cluster_id
    assert (values["LeaderId"], values["LeaderEpoch"], values["HighWatermark"]) == (str(leader_id), str(epoch), str(hw))
    assert values["MaxFollowerLag"] == str(hw - stopped.log_end_offset) and hw > stopped.log_end_offset
    # The leader reports itself caught up as of the moment it answers.
    lag_ms = int(values["MaxFollowerLagTimeMs"])
    assert asked_at - stopped.last_caught_up_timestamp <= lag_ms <= answered_at - stopped.last_caught_up_timestamp
    assert (values["CurrentVoters"], values["CurrentObservers"]) == ("[1,2,3]", "[4]")

    rows = [line.split("\t") for line in replication]
    assert all(row[-1] == "" and len(row) == 7 for row in rows), "every cell ends with a tab"
    for column in zip(*rows):
        assert len({len(cell) for cell in column}) == 1, f"column {column[0]!r} is not padded to one width"
    table = [[cell.strip() for cell in row[:-1]] for row in rows]
    assert table[0] == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    followers = sorted(n for n in cluster.voter_ids if n != leader_id)
    assert [(r[0], r[5]) for r in table[1:]] == [(str(leader_id), "Leader")] + [
        (str(n), "Follower") for n in followers] + [("4", "Observer")]
    ends = {r.replica_id: r.log_end_offset for r in (*before.current_voters, *before.observers)}
    for row in table[1:]:
        node = int(row[0])
        assert (row[1], row[2]) == (str(ends[node]), str(hw - ends[node]))
    assert table[1 + 1 + followers.index(down)][3:5] == [str(stopped.last_fetch_timestamp),
                                                         str(stopped.last_caught_up_timestamp)]

    # Through a controller listener (KIP-919), as --bootstrap-controller asks: a follower's
    # controller endpoint leads to the leader's.
    through_controller = metadata_quorum_cli(cluster.nodes[other].controller_port, "status",
                                             flag="--bootstrap-controller")
    moving = "MaxFollowerLagTimeMs"  # the leader's own caught-up time is "now": it moves
    assert [x for x in through_controller if not x.startswith(moving)] == [x for x in status if not x.startswith(moving)]
    readable = [line.split("\t") for line in metadata_quorum_cli(cluster.nodes[leader_id].client_port, "replication",
                                                                 "--human-readable")]
    stopped_row = [cell.strip() for cell in readable[1 + 1 + followers.index(down)]]
    assert stopped_row[3].endswith(" ms ago") and int(stopped_row[3].split()[0]) >= answered_at - stopped.last_fetch_timestamp


def node_processes(directory) -> dict[str, int]:
    """Live `kraft server start` processes whose server.properties is under `directory`:
    the config's node directory name (node-N) -> pid."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        config = next((a for a in args if a.startswith(str(directory)) and a.endswith("server.properties")), None)
        if "server" in args and config is not None:
            found[Path(config).parent.name] = int(proc.name)
    return found


@contextlib.contextmanager
def cluster_up(directory) -> Iterator[subprocess.Popen]:
    """`kraft cluster up` with three voters and an observer; whatever the test does, no node
    it started outlives the block."""
    up = subprocess.Popen([sys.executable, "-m", "kraft.cli", "cluster", "up", "--voters", "3", "--observers", "1",
                           "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield up
    finally:
        for pid in node_processes(directory).values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if up.poll() is None:
            up.kill()


def test_ctrl_c_during_cluster_up_start_up_stops_every_node(tmp_path):
    directory = tmp_path / "cluster"
    with cluster_up(directory) as up:
        # Node 1 is held (SIGSTOP) before it can listen, so start-up cannot finish: the Ctrl-C
        # below lands while `cluster up` is still waiting for its nodes.
        deadline = time.monotonic() + 30
        while "node-1" not in node_processes(directory) and time.monotonic() < deadline:
            time.sleep(0.002)
        held = node_processes(directory)["node-1"]
        os.kill(held, signal.SIGSTOP)
        wait_for(lambda: len(node_processes(directory)) == 4, what="every node process")
        up.send_signal(signal.SIGINT)
        os.kill(held, signal.SIGCONT)  # lets it take the SIGTERM that `cluster up` sends
        out, err = up.communicate(timeout=60)
        left = node_processes(directory)  # before the block's clean-up kills whatever is left
    assert left == {}
    assert up.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "Ctrl-C stops the cluster" not in out, "start-up had finished: the test did not interrupt it"
    assert "stopped" in out


def test_cluster_up_stops_the_other_nodes_when_one_fails_to_start(tmp_path):
    directory = tmp_path / "cluster"
    broken = directory / "node-2" / "data" / "__cluster_metadata-0" / "quorum-state"
    broken.parent.mkdir(parents=True)
    broken.write_text("not a quorum-state file")
    with cluster_up(directory) as up:
        out, err = up.communicate(timeout=60)
        left = node_processes(directory)
    assert left == {}
    assert up.returncode == 1
    assert f"node 2 exited (1); see {directory / 'node-2' / 'server.log'}" in err and "Traceback" not in err, err
    assert "quorum-state" in (directory / "node-2" / "server.log").read_text()


def all_held(directories, count: int) -> bool:
    """Whether `count` directories are there and each is locked by a process."""
    held = 0
    for directory in directories:
        try:
            check_free(directory)
        except DirectoryInUseError:
            held += 1
    return held == count


def test_a_second_cluster_up_on_a_directory_in_use_refuses_before_writing_anything(tmp_path):
    directory = tmp_path / "cluster"
    with cluster_up(directory) as first:
        wait_for(lambda: (directory / "node-4" / "server.properties").exists()
                 and len(node_processes(directory)) == 4, what="the first cluster's nodes")
        before = {p: p.read_bytes() for p in directory.rglob("*.properties")}
        second = subprocess.run([sys.executable, "-m", "kraft.cli", "cluster", "up", "--dir", str(directory)],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"{directory} is in use: process {first.pid} holds {directory}/.lock" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert {p: p.read_bytes() for p in directory.rglob("*.properties")} == before


def test_nodes_left_running_by_a_killed_cluster_up_keep_their_directory(tmp_path):
    directory = tmp_path / "cluster"
    with cluster_up(directory) as first:
        wait_for(lambda: all_held(directory.glob("node-*/data"), 4), what="the first cluster's nodes")
        first.kill()  # its nodes run in sessions of their own and outlive it
        first.wait()
        before = {p: p.read_bytes() for p in directory.rglob("*.properties")}
        second = subprocess.run([sys.executable, "-m", "kraft.cli", "cluster", "up", "--dir", str(directory)],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "/data is in use: process" in second.stderr, second.stderr
        assert {p: p.read_bytes() for p in directory.rglob("*.properties")} == before


def test_a_second_server_on_one_data_directory_exits_naming_the_first(single):
    node = single.nodes[1]
    config = str(node.config_path)
    second = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", config],
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 1
    assert second.stderr.strip() == (f"kraft server start: {node.data_dir} is in use: process {node.process.pid} "
                                     f"holds {node.data_dir}/.lock; stop it first (one process per data directory)")
    formatted = subprocess.run([sys.executable, "-m", "kraft.cli", "storage", "format", "--config", config,
                                "--cluster-id", single.cluster_id], capture_output=True, text=True, timeout=60)
    assert formatted.returncode == 1 and "is in use" in formatted.stderr
    assert node.running
    _, result = create_topic_at_leader(single, "still-served")
    assert result.error_code == ErrorCode.none


@pytest.mark.parametrize("args, message", [
    (["--bootstrap-server", "localhost:99999"], "'localhost:99999' is not host:port with a port from 1 to 65535"),
    (["--bootstrap-server", "localhost"], "'localhost' is not host:port"),
    (["--bootstrap-server", "127.0.0.1:1"], "no bootstrap server answered"),
])
def test_metadata_quorum_says_what_is_wrong_with_its_arguments_in_one_line(args, message):
    out = quorum_tool(*args, "describe", "--status")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_metadata_quorum_refuses_what_it_cannot_do_in_one_line(tmp_path):
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    out = quorum_tool("--bootstrap-server", "127.0.0.1:1", "--command-config", str(config), "describe", "--status")
    assert out.returncode == 1 and "sasl.mechanism=GSSAPI is not one kraft speaks" in out.stderr
    out = quorum_tool("--bootstrap-server", "127.0.0.1:1", "describe", "--status", "--human-readable")
    assert out.returncode == 1 and "--human-readable is only supported along with --replication" in out.stderr


def test_an_idle_cluster_still_shows_how_far_behind_a_stopped_voter_is(cluster):
    """The controller writes a NoOp when idle (metadata.max.idle.interval.ms), so a voter
    that stopped fetching falls behind in offsets even while nothing else is written; an
    idle log used to show Lag 0 for a voter silent for 18 s."""
    leader_id, _ = leader(cluster)
    down = next(n for n in cluster.voter_ids if n != leader_id)
    cluster.stop(down)

    def lag_of_stopped() -> int:
        p = describe_quorum(cluster, leader_id)
        stopped = next(v for v in p.current_voters if v.replica_id == down)
        return p.high_watermark - stopped.log_end_offset

    wait_for(lambda: lag_of_stopped() >= 3, what="NoOps to move the log past the stopped voter")
    rows = [line.split("\t") for line in metadata_quorum_cli(cluster.nodes[leader_id].client_port, "replication")]
    (row,) = [[cell.strip() for cell in r] for r in rows[1:] if r[0].strip() == str(down)]
    assert int(row[2]) >= 3, row
