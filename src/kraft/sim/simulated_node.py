"""A simulated node: a RaftCore on a MemoryLog and MemorySnapshotStore, driven by the
simulator's clock and network.

It runs the step loop a real node runs (kraft.raft.driver), in virtual time: the node is
that loop's IO, as server/runtime/partition_driver.py is a real node's. Requests and
replies go through the cluster's faulty network, the timer is an event on the run's clock,
an fsync and a snapshot job each take a few virtual milliseconds (commits go on
meanwhile, as on a node's worker threads). What it replicates is the workload's (see
workloads.py).

A kill drops the core and what was not durable: by default every unflushed batch, or, as
a storage fault says, all but a prefix of them, with the next one torn; bit rot may then
flip a byte of what was flushed. A restart first recovers the log as opening a FileLog
does: a torn tail is cut, and damaged flushed data makes the node refuse to start (it
stays down; `refused` says why). Losing the disk starts from nothing.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from random import Random
from typing import Protocol, TypeVar

from kraft.raft import CommittedBatch, InvariantViolation, LeaderAndEpoch, RaftConfig, RaftCore, Reply, Send
from kraft.raft.driver import Driver, StateMachine
from kraft.raft.voters import VoterSet, write_bootstrap
from kraft.sim.network import Clock
from kraft.sim.run_history import History, Violation
from kraft.statemachine.snapshot_jobs import SnapshotJob
from kraft.storage import (
    CorruptLogError,
    MemoryLog,
    MemoryQuorumStateStore,
    MemorySnapshotStore,
    SnapshotReader,
)

T = TypeVar("T")


class Machine(StateMachine[SnapshotJob], Protocol):
    """A node's state machine: the core's listener and the loop's, rebuilt at every start."""

    core: RaftCore | None

    @property
    def applied(self) -> int:
        """Every offset below this is in the machine's state."""

    def handle_commit(self, batch: CommittedBatch) -> None: ...
    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...
    def handle_load_snapshot(self, reader: SnapshotReader) -> None: ...


class NodeWorkload(Protocol):
    """What a node needs of the workload: its state machine."""

    def machine(self, node: "SimNode") -> Machine: ...


class Transport(Protocol):
    """Where a node's outbox goes (the cluster, through the faulty network)."""

    def deliver_request(self, sender: "SimNode", send: Send) -> None: ...
    def deliver_reply(self, replier: "SimNode", reply: Reply) -> None: ...


CoreFactory = Callable[..., RaftCore]
"""Builds a node's core: RaftCore itself, or (in tests) a deliberately broken one. Called
as RaftCore is: (config, log, store, rng, now, listener, snapshots)."""


class SimNode:
    def __init__(
        self,
        config: RaftConfig,
        *,
        seed: int,
        clock: Clock,
        rng: Random,
        transport: Transport,
        workload: NodeWorkload,
        history: History,
        core_factory: CoreFactory = RaftCore,
        start: bool = True,
        bootstrap: VoterSet | None = None,
    ) -> None:
        self.config = config
        self.bootstrap = bootstrap  # KIP-853: every disk is formatted with these voters
        self.node_id = config.node_id
        self.seed = seed
        self.clock = clock
        self.rng = rng  # the run's: flush delays
        self.transport = transport
        self.workload = workload
        self.history = history
        self.core_factory = core_factory
        self.core: RaftCore | None = None
        self.loop: Driver[SnapshotJob] | None = None  # the core's step loop, while the node runs
        self.incarnation = 0
        self.disks = 0
        self.refused: str | None = None  # why the last start was refused (damaged flushed data)
        self.damaged_at: int | None = None  # the batch bit rot hit on this disk, if any
        self._tick_version = 0
        self._new_disk()
        if start:
            self.start()

    def _new_disk(self) -> None:
        self.disks += 1
        self.log = MemoryLog()
        self.store = MemoryQuorumStateStore()
        self.snapshots = MemorySnapshotStore()
        # Formatted with the first voters once; a lost disk comes back formatted without them
        # (Kafka's --no-initial-controllers): a node that believed the first voter set again
        # could form a majority of it with another such node and elect a second leader.
        if self.bootstrap is not None and self.disks == 1:
            write_bootstrap(self.snapshots, self.bootstrap)
        self.machine: Machine = self.workload.machine(self)
        self.refused = self.damaged_at = None

    @property
    def alive(self) -> bool:
        return self.core is not None

    def start(self) -> None:
        """Recovers the log as opening a FileLog does, then builds a core on what survived;
        a log whose flushed data is damaged is refused, and the node stays down."""
        if self.alive or self.refused:
            return  # already up (healing restarted it before a crash's own restart), or refused for good
        try:
            cut = self.log.recover()
        except CorruptLogError as e:
            self.refused = str(e)
            self.history.stats.refused_starts += 1
            return
        self.history.stats.torn_tails_cut += cut > 0
        self.incarnation += 1
        self.machine = self.workload.machine(self)
        rng = Random(f"{self.seed}/{self.node_id}/{self.incarnation}")
        self.core = self.core_factory(
            self.config, self.log, self.store, rng, self.clock.now, self.machine, self.snapshots
        )
        self.machine.core = self.core  # the metadata machine submits through it
        self.loop = Driver(self.core, self.machine, self)
        self.loop.start()

    def kill(self, kept_batches: int = 0, torn_bytes: int = 0) -> None:
        """kill -9 and a power cut: the core is gone, so is what was not yet durable (all
        of the unflushed batches but the first `kept_batches`, and `torn_bytes` of the next)."""
        self.core = self.loop = None
        self._tick_version += 1
        self.log.simulate_crash(kept_batches, torn_bytes)
        self.snapshots.simulate_crash()

    def rot(self, index: int, mask: int) -> None:
        """Flips a byte of flushed data on a stopped node's disk (see MemoryLog.flip_flushed_byte)."""
        assert not self.alive, "bit rot is applied to a stopped node's disk"
        self.damaged_at = self.log.flip_flushed_byte(index, mask)

    def lose_disk(self) -> None:
        """The node comes back with nothing: it must catch up, by snapshot."""
        if self.alive:
            self.kill()
        self._new_disk()

    # ---------------------------------------------------------------- stepping

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """The action's result, or None if the node is down."""
        return self.loop.step(action) if self.loop is not None else None

    def receive_reply(self, reply: Reply, request_id: int, incarnation: int) -> None:
        if incarnation == self.incarnation:
            self.step(lambda core, now: core.handle_response(request_id, reply.response, now))

    # ---------------------------------------------------------------- the loop's IO (DriverIO)

    @property
    def running(self) -> bool:
        return self.core is not None

    def now(self) -> int:
        return self.clock.now

    @contextmanager
    def stepping(self) -> Iterator[None]:
        try:
            yield
        except InvariantViolation as e:
            raise Violation("core", f"node {self.node_id} stopped: {e}") from None

    def send(self, send: Send) -> None:
        self.transport.deliver_request(self, send)

    def reply(self, reply: Reply) -> None:
        self.transport.deliver_reply(self, reply)

    def _later(self, delay: int, action: Callable[[], None]) -> None:
        """`action` after `delay` ms, unless the node was killed meanwhile."""
        incarnation = self.incarnation

        def run() -> None:
            if incarnation == self.incarnation and self.core is not None:
                action()

        self.clock.at(self.clock.now + delay, run)

    def flush(self, done: Callable[[], None]) -> None:
        """A disk whose fsync takes 0-4 ms and covers what was appended when it began."""
        token = self.log.begin_flush()

        def flushed() -> None:
            self.log.complete_flush(token)
            done()

        self._later(self.rng.randint(0, 4), flushed)

    def write_snapshot(self, job: SnapshotJob, done: Callable[[BaseException | None], None]) -> None:
        """Written 0-4 ms later, as a worker thread would, while the core steps on."""

        def write() -> None:
            job.run()
            self.history.stats.snapshots += 1
            done(None)

        self._later(self.rng.randint(0, 4), write)

    def call_at(self, deadline: int, callback: Callable[[], None]) -> int:
        self._tick_version += 1
        version = self._tick_version

        def fire() -> None:
            if version == self._tick_version:
                callback()

        self.clock.at(deadline, fire)
        return deadline
