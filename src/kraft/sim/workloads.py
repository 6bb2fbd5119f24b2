"""What the simulated cluster replicates, and how its state is checked at the end.

* `counter`: a count of committed records and a hash chain over their values; the client
  appends a numbered record every few milliseconds; each node's state must equal the one
  computed from the committed records.
* `metadata`: the cluster-metadata state machine (QuorumController); the client sends
  random admin operations to the active controller, valid and invalid alike; every node's
  image at an offset must have the same digest, and equal a replay of every committed
  record from offset 0 (so snapshot plus replay equals full replay).

Both snapshot as the node's state machines do (a Snapshotter and its SnapshotPolicy,
started by the step loop), with small thresholds, so catching up by snapshot happens in
every run. The machines report what they see to the run's History; what they
alone can tell is wrong (a snapshot holding another offset's state, a refused operation
that appended records) goes there too, for the state-matches-commits invariant.
"""

import hashlib
import struct
from dataclasses import dataclass, field
from random import Random
from typing import Any, Protocol

from kraft.controller import NotControllerError, QuorumController
from kraft.metadata import ControllerError, MetadataImage, apply_records, decode_record
from kraft.metadata import operations as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.image import ConfigResource, ConfigResourceType
from kraft.raft import CommittedBatch, LeaderAndEpoch, RaftCore
from kraft.records import SimpleRecord
from kraft.records.control import decode_control_record
from kraft.sim.cluster import Cluster
from kraft.sim.params import SimParams
from kraft.sim.run_history import History
from kraft.sim.simulated_node import NodeWorkload, SimNode
from kraft.statemachine.snapshot_jobs import SnapshotJob, Snapshotter
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage import SnapshotReader

WORKLOADS = ("counter", "metadata")


class Workload(NodeWorkload, Protocol):
    def client_step(self, cluster: Cluster, history: History, rng: Random) -> None:
        """One client action: an append (or admin operation) at a leader, if there is one."""

    def check_end(self, cluster: Cluster, history: History) -> str | None:
        """After the run: how a running node's state differs from the committed records, if it does."""


def make_workload(name: str, params: SimParams) -> Workload:
    if name == "counter":
        return CounterWorkload(params.snapshot_every_bytes)
    if name == "metadata":
        return MetadataWorkload(params.snapshot_every_bytes, params.quiet_from_ms)
    raise ValueError(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")


def _snapshot_loaded(node: SimNode, reader: SnapshotReader) -> None:
    """A running follower or observer loads a snapshot when the leader sent it there (a
    core loading at boot is not yet the node's): the history notes it, and by whom."""
    core = node.core
    if core is not None:
        node.history.observe_snapshot_load(node.node_id, core.role, reader.snapshot_id)


def _observe_control(node: SimNode, batch: CommittedBatch) -> None:
    """A committed control batch's voter sets and kraft.version, for the history."""
    for record in batch.records:
        node.history.observe_control(record.offset, decode_control_record(record), node.clock.now)


def _running(cluster: Cluster) -> list[SimNode]:
    """Every node but those refused for damaged data: those are down for good."""
    return [n for n in cluster.nodes.values() if n.refused is None]


# ---------------------------------------------------------------- counter

_STATE = struct.Struct(">qq32s")  # count, applied offset, digest


@dataclass(frozen=True)
class CounterImage:
    """The counter's state at one offset, as a snapshot job writes it."""

    count: int
    applied: int
    digest: bytes

    @property
    def offset(self) -> int:
        return self.applied - 1

    @property
    def end_offset(self) -> int:
        return self.applied

    def records(self) -> list[tuple[bytes | None, bytes]]:
        return [(None, _STATE.pack(self.count, self.applied, self.digest))]


@dataclass
class CounterMachine:
    node: SimNode
    policy: SnapshotPolicy
    count: int = 0
    applied: int = 0
    digest: bytes = bytes(32)
    seen: dict[int, bytes | None] = field(default_factory=dict)
    core: RaftCore | None = None

    def __post_init__(self) -> None:
        self.snapshots = Snapshotter(self.policy, f"node {self.node.node_id}")

    def handle_commit(self, batch: CommittedBatch) -> None:
        self.applied = batch.last_offset + 1
        if batch.control:
            _observe_control(self.node, batch)
            return
        for record in batch.records:
            self.seen[record.offset] = record.value
            self.count += 1
            self.digest = hashlib.sha256(self.digest + (record.value or b"")).digest()
            self.node.history.observe_commit(self.node.node_id, record.offset, record.value, self.node.clock.now)
        self.policy.record_commit(batch)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        _snapshot_loaded(self.node, reader)
        records = list(reader.records())
        if not records and reader.snapshot_id.end_offset == 0:
            return  # the bootstrap snapshot (KIP-853): voters only, the state is the empty one
        (record,) = records
        assert record.value is not None, "a counter snapshot is one record holding the state"
        self.count, self.applied, self.digest = _STATE.unpack(record.value)
        if self.applied != reader.snapshot_id.end_offset:
            self.node.history.state_errors.append(
                f"node {self.node.node_id}: snapshot {reader.snapshot_id} holds the state at {self.applied}")
        self.policy.reset()

    def poll(self, now: int) -> None:
        pass  # the counter does nothing on its own

    def next_deadline(self, now: int) -> int | None:
        return None

    def start_snapshot(self, now: int) -> SnapshotJob | None:
        image = CounterImage(self.count, self.applied, self.digest)
        return self.snapshots.start(self.core, image, image.records, changed_ratio=1.0, last_commit_time=now, now=now)

    def finish_snapshot(self, job: SnapshotJob, error: BaseException | None = None) -> None:
        self.snapshots.finish(job, error)


class CounterWorkload:
    def __init__(self, snapshot_every_bytes: int) -> None:
        self.snapshot_every_bytes = snapshot_every_bytes

    def machine(self, node: SimNode) -> CounterMachine:
        return CounterMachine(node, SnapshotPolicy(self.snapshot_every_bytes, 0.0, 0))

    def client_step(self, cluster: Cluster, history: History, rng: Random) -> None:
        leaders = cluster.leaders()
        if leaders:
            node = rng.choice(leaders)
            value = history.next_value()
            node.step(lambda core, now: history.record_append(value, *core.append([SimpleRecord(None, value)], now)))

    def check_end(self, cluster: Cluster, history: History) -> str | None:
        for node in _running(cluster):
            machine = node.machine
            assert isinstance(machine, CounterMachine)
            count, digest = 0, bytes(32)
            for offset in sorted(o for o in history.committed if o < machine.applied):
                count += 1
                digest = hashlib.sha256(digest + (history.committed[offset] or b"")).digest()
            if (machine.count, machine.digest) != (count, digest):
                return f"node {node.node_id}: state at offset {machine.applied} differs from the committed records"
        return None


# ---------------------------------------------------------------- metadata


class MetadataMachine(QuorumController):
    """The real state machine, reporting what the simulation checks; quiet (no bootstrap
    records, no NoOps) from `quiet_from_ms`, so the run's end sees a log at rest."""

    def __init__(self, node: SimNode, policy: SnapshotPolicy, quiet_from_ms: int) -> None:
        super().__init__(policy)
        self.node = node
        self.quiet_from_ms = quiet_from_ms

    def poll(self, now: int) -> None:
        if now < self.quiet_from_ms:
            super().poll(now)

    def next_deadline(self, now: int) -> int | None:
        return super().next_deadline(now) if now < self.quiet_from_ms else None

    @property
    def applied(self) -> int:
        return self.cache.offset + 1

    def handle_commit(self, batch: CommittedBatch) -> None:
        super().handle_commit(batch)
        node = self.node
        if batch.control:
            _observe_control(node, batch)
        else:
            for record in batch.records:
                node.history.observe_commit(node.node_id, record.offset, record.value, node.clock.now)
            self._observe_image()

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        _snapshot_loaded(self.node, reader)
        super().handle_load_snapshot(reader)
        self._observe_image()

    def _observe_image(self) -> None:
        """Every node's metadata image at one offset must be the same."""
        image = self.cache.image
        self.node.history.observe_image(self.node.node_id, image.offset, image.digest())


TOPICS = ("orders", "payments", "clicks", "audit", "a.b_c", "bad name!", "")
BROKERS = range(1, 7)


class MetadataWorkload:
    """Random admin operations; about one in four is refused by validation."""

    def __init__(self, snapshot_every_bytes: int, quiet_from_ms: int) -> None:
        self.snapshot_every_bytes = snapshot_every_bytes
        self.quiet_from_ms = quiet_from_ms
        self.refused = 0
        self.committed_ops = 0

    def machine(self, node: SimNode) -> MetadataMachine:
        return MetadataMachine(node, SnapshotPolicy(self.snapshot_every_bytes, 0.0, 0), self.quiet_from_ms)

    def _operation(self, rng: Random, image: MetadataImage, broker_epoch: int) -> Any:
        kind = rng.choice(["register", "register", "unfence", "fence", "create", "create", "delete", "config", "pids"])
        broker = rng.choice(BROKERS)
        topic = rng.choice(TOPICS)
        if kind == "register":
            incarnation = rng.randbytes(16)
            return lambda im: ctl.register_broker(im, broker, incarnation_id=incarnation, broker_epoch=broker_epoch)
        if kind == "unfence":
            registered = image.brokers.get(broker)
            epoch = registered.epoch if registered is not None else broker_epoch
            return lambda im: ctl.unfence_broker(im, broker, epoch)
        if kind == "fence":
            return lambda im: ctl.fence_broker(im, broker)
        if kind == "create":
            new = ctl.NewTopic(topic, rng.randint(0, 4), rng.randint(1, 4))
            seed = rng.random()
            return lambda im: ctl.create_topic(im, new, Random(seed))
        if kind == "delete":
            return lambda im: ctl.delete_topic(im, topic)
        if kind == "config":
            value = rng.choice(["1000", "-5", "x", None])
            ops = [AlterConfigOp("retention.ms", OpType.DELETE if value is None else OpType.SET, value)]
            resource = ConfigResource(ConfigResourceType.TOPIC, topic)
            return lambda im: ctl.alter_configs(im, resource, ops)
        epoch = image.brokers[broker].epoch if broker in image.brokers else 0
        return lambda im: ctl.allocate_producer_ids(im, broker, epoch)

    def client_step(self, cluster: Cluster, history: History, rng: Random) -> None:
        leaders = cluster.leaders()
        if not leaders:
            return
        node = rng.choice(leaders)
        machine = node.machine
        assert isinstance(machine, MetadataMachine)

        def submit(core: RaftCore, now: int) -> None:
            end_before = core.next_offset
            operation = self._operation(rng, machine.working_image, end_before)
            try:
                pending = machine.submit(operation, now)
            except ControllerError:
                self.refused += 1
                if core.next_offset != end_before:
                    history.state_errors.append(f"node {node.node_id}: a refused operation appended records")
                return
            except NotControllerError:
                return
            pending.add_done_callback(lambda p: self._done(history, p))

        node.step(submit)

    def _done(self, history: History, pending: Any) -> None:
        if pending.error is None:
            self.committed_ops += 1
            history.stats.acknowledged += 1

    def check_end(self, cluster: Cluster, history: History) -> str | None:
        reference = MetadataImage()
        for offset in sorted(history.committed):
            value = history.committed[offset]
            reference = apply_records(reference, [decode_record(value)], offset=offset, epoch=0)
        top = max(history.committed, default=-1)
        for node in _running(cluster):
            machine = node.machine
            assert isinstance(machine, MetadataMachine)
            if machine.cache.offset >= top and machine.cache.image.digest() != reference.digest():
                return f"node {node.node_id}: image differs from a full replay of the committed records"
        if self.committed_ops == 0:
            return "no admin operation was committed"
        return None
