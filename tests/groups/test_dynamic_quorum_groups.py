"""Consumer groups on a dynamic quorum (KIP-853), built as Kafka 4.x's quickstart builds one:
`kraft storage format --standalone`, controller.quorum.bootstrap.servers and no
controller.quorum.voters; then nodes formatted --no-initial-controllers and added with
`metadata-quorum add-controller`, and one removed with `remove-controller`. Each
`__consumer_offsets` partition is a dynamic Raft log of its own whose voters follow the
metadata partition's (server/runtime/offsets_voters.py); real node processes, real TCP, and
kafka-python's consumer."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kraft.cli.local_cluster import LOCAL_DEFAULTS, free_port
from kraft.storage.meta_properties import kafka_text, random_cluster_id, read_directory_id

from ..server.cluster_helpers import offsets_quorum, wait_for

TOPIC = "__cluster_metadata"
PARTITIONS = 3
T = TypeVar("T")
GROUPS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": PARTITIONS}


def kraft(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=120)


class DynamicCluster:
    """Node processes of one dynamic quorum, each formatted as the operator would."""

    def __init__(self, root: Path, ids: tuple[int, ...]) -> None:
        self.root = root
        self.cluster_id = random_cluster_id()
        self.ports = {n: (free_port(), free_port()) for n in ids}  # controller, client
        self.configs: dict[int, Path] = {}
        self.processes: dict[int, subprocess.Popen] = {}
        # Every controller, as Kafka's documentation asks: a node removed from the voters finds
        # the leader through them again (the first node may be gone by then).
        bootstrap = ",".join(f"127.0.0.1:{controller}" for controller, _ in self.ports.values())
        for n, (controller, client) in self.ports.items():
            props = {"node.id": n, "process.roles": "broker,controller",
                     "controller.quorum.bootstrap.servers": bootstrap,
                     "listeners": f"CONTROLLER://127.0.0.1:{controller},PLAINTEXT://127.0.0.1:{client}",
                     "controller.listener.names": "CONTROLLER", "metadata.log.dir": root / f"data-{n}",
                     "kraft.metrics.port": -1, **LOCAL_DEFAULTS, **GROUPS}
            self.configs[n] = root / f"node-{n}.properties"
            self.configs[n].write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def format(self, n: int, flag: str) -> None:
        out = kraft("storage", "format", "-t", self.cluster_id, "-c", str(self.configs[n]), flag)
        assert out.returncode == 0, out.stderr

    def directory(self, n: int) -> str:
        return kafka_text(read_directory_id(self.root / f"data-{n}"))

    def start(self, n: int) -> None:
        log = open(self.root / f"node-{n}.log", "ab")
        self.processes[n] = subprocess.Popen([sys.executable, "-m", "kraft.cli", "server", "start",
                                              str(self.configs[n])], stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
        # Clients are made only once the node listens: kafka-python gives up bootstrapping after
        # about 30 s, and a node's start (imports, files) took 40 s on a loaded machine.
        wait_for(lambda: self._listening(n), timeout=120, what=f"node {n} listening on its client port")

    def _listening(self, n: int) -> bool:
        assert self.processes[n].poll() is None, f"node {n} exited; see {self.root}/node-{n}.log"
        try:
            with socket.create_connection(("127.0.0.1", self.ports[n][1]), timeout=1):
                return True
        except OSError:
            return False

    def kill(self, n: int) -> None:
        process = self.processes.pop(n)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for n in list(self.processes):
            self.kill(n)

    def client(self, *ids: int) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n][1]}" for n in ids)

    def quorum_command(self, via: int, *args: str) -> subprocess.CompletedProcess:
        return kraft("metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{self.ports[via][0]}", *args)

    def offsets_quorum(self, partition: int) -> Any:
        return offsets_quorum([self.ports[n][0] for n in self.processes], partition)

    def offsets_voters(self) -> list[list[int]]:
        """Each offsets partition's voters as its leader reports them ([] if it has none)."""
        quorums = [self.offsets_quorum(p) for p in range(PARTITIONS)]
        return [sorted(v.replica_id for v in q.current_voters) if q is not None else [] for q in quorums]


def reconnecting(call: Callable[[], T]) -> T:
    """kafka-python raises when a broker the Metadata answer lists refuses its connection: a
    killed node is listed until its broker session times out (broker.session.timeout.ms),
    as in Kafka. Called again until that has passed."""
    from kafka.errors import KafkaConnectionError

    deadline = time.monotonic() + 90
    while True:
        try:
            return call()
        except KafkaConnectionError:
            if time.monotonic() > deadline:
                raise


def commit(bootstrap: str, group: str, offset: int, metadata: str, epoch: int) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    def once() -> None:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, metadata, epoch)})
        finally:
            consumer.close()

    reconnecting(once)


def committed(bootstrap: str, group: str) -> tuple[int, str, int]:
    """(offset, metadata, leader epoch) the group committed, by OffsetFetch."""
    from kafka import KafkaConsumer, TopicPartition

    def once() -> Any:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            found = None
            deadline = time.monotonic() + 90
            while found is None and time.monotonic() < deadline:
                found = consumer.committed(TopicPartition(TOPIC, 0), metadata=True)
            return found
        finally:
            consumer.close()

    found = reconnecting(once)
    assert found is not None, f"group {group}: no committed offset read back"
    return found.offset, found.metadata, found.leader_epoch


def remove(cluster: DynamicCluster, n: int, via: int = 2) -> None:
    """`metadata-quorum remove-controller` of node `n`, asked of node `via`'s controller
    listener until the metadata partition's leader has made the change."""
    directory = cluster.directory(n)

    def removed() -> bool:
        out = cluster.quorum_command(via, "remove-controller", "-i", str(n), "-d", directory)
        assert out.returncode == 0 or any(e in out.stderr for e in (
            "REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "VOTER_NOT_FOUND")), out.stderr
        return out.returncode == 0 or "VOTER_NOT_FOUND" in out.stderr  # a timed-out removal may have committed

    wait_for(removed, timeout=90, what=f"node {n} removed from the metadata partition's voters")


def test_a_standalone_node_serves_a_consumer_group(tmp_path: Path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    cluster = DynamicCluster(tmp_path, (1,))
    cluster.format(1, "--standalone")
    cluster.start(1)
    try:
        consumer = KafkaConsumer(bootstrap_servers=cluster.client(1), group_id="quickstart", enable_auto_commit=False,
                                 auto_offset_reset="earliest", fetch_max_wait_ms=200)
        try:
            consumer.subscribe([TOPIC])
            records: list[Any] = []
            deadline = time.monotonic() + 90
            while not records and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    records += batch
            assert records, "no records consumed through the group"
            tp = TopicPartition(TOPIC, 0)
            assert consumer.assignment() == {tp}
            last = records[-1]
            assert last.leader_epoch >= 1
            consumer.commit({tp: OffsetAndMetadata(last.offset + 1, "quick", last.leader_epoch)})
        finally:
            consumer.close()
        assert committed(cluster.client(1), "quickstart") == (last.offset + 1, "quick", last.leader_epoch)
        # Every partition led by the one voter: waited for, as the other partitions may still be
        # electing (or slow to answer DescribeQuorum) on a loaded machine when this group's is done.
        wait_for(lambda: cluster.offsets_voters() == [[1]] * PARTITIONS, timeout=90,
                 what="node 1 the only voter and the leader of every offsets partition")
    finally:
        cluster.stop()


def test_added_and_removed_controllers_join_and_leave_every_offsets_partition(tmp_path: Path):
    cluster = DynamicCluster(tmp_path, (1, 2, 3))
    cluster.format(1, "--standalone")
    for n in (2, 3):
        cluster.format(n, "--no-initial-controllers")
    try:
        cluster.start(1)
        commit(cluster.client(1), "early", 5, "before", 1)  # on the one voter, before anyone joins
        for n in (2, 3):
            cluster.start(n)
        for n in (2, 3):
            def added(n: int = n) -> bool:
                out = cluster.quorum_command(1, "--command-config", str(cluster.configs[n]), "add-controller")
                assert out.returncode == 0 or "REQUEST_TIMED_OUT" in out.stderr, out.stderr  # not caught up yet
                return out.returncode == 0

            wait_for(added, timeout=90, what=f"node {n} added to the metadata partition's voters")
        wait_for(lambda: cluster.offsets_voters() == [[1, 2, 3]] * PARTITIONS, timeout=90,
                 what="nodes 2 and 3 voters of every offsets partition")

        # The first node stops: what it committed alone is on the voters it added.
        cluster.kill(1)
        assert committed(cluster.client(2, 3), "early") == (5, "before", 1)

        # It leaves the quorum: the metadata partition's new leader takes it out, then each
        # offsets partition's leader does.
        remove(cluster, 1)
        wait_for(lambda: cluster.offsets_voters() == [[2, 3]] * PARTITIONS, timeout=90,
                 what="node 1 out of every offsets partition's voters")
        commit(cluster.client(2, 3), "late", 7, "after", 2)
        assert committed(cluster.client(2, 3), "late") == (7, "after", 2)

        # A running voter leaves too, the leader of partition 0: it takes itself out of each
        # partition it leads, and resigns there once that commits.
        leaving = wait_for(lambda: cluster.offsets_quorum(0), timeout=60, what="a leader of offsets partition 0").leader_id
        staying = 5 - leaving
        logs_before = {n: len((tmp_path / f"node-{n}.log").read_text()) for n in (2, 3)}
        remove(cluster, leaving, via=staying)
        wait_for(lambda: all((q := cluster.offsets_quorum(p)) is not None and q.leader_id == staying
                             and [v.replica_id for v in q.current_voters] == [staying] for p in range(PARTITIONS)),
                 timeout=90, what=f"node {staying} the only voter and the leader of every offsets partition")
        assert committed(cluster.client(2, 3), "early") == (5, "before", 1)
        assert committed(cluster.client(2, 3), "late") == (7, "after", 2)
        # A follower holding its leader's own removal had no endpoint for it until the node
        # kept each peer's last one: it fetched nothing more, and the leader resigned only
        # once check quorum ran out. (Read from the removal on: a node formatted
        # --no-initial-controllers may log it once at start, before its first Fetch answer
        # names the leader's endpoint.)
        logs = "".join((tmp_path / f"node-{n}.log").read_text()[logs_before[n]:] for n in (2, 3))
        assert "no endpoint for node" not in logs
    finally:
        cluster.stop()
