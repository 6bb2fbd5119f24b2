"""A simulated node: a RaftCore on a MemoryLog and MemorySnapshotStore, driven by the
simulator's clock and network.

It does what the real server does, in virtual time: hands the core every request and
response, sends what the core's outbox holds, ticks it at its next deadline, flushes the
log when asked (with a disk that takes time), and lets its state machine snapshot when the
policy says so. What it replicates is the workload's (see workloads.py). A kill drops the core and everything not yet durable; a restart builds a
new core on what survived; losing the disk starts from nothing.
"""

from collections.abc import Callable
from random import Random
from typing import TYPE_CHECKING

from kraft.raft import InvariantViolation, RaftConfig, RaftCore, Reply, Send
from kraft.storage import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore

if TYPE_CHECKING:
    from kraft.sim.simulation import Simulation
    from kraft.sim.workloads import Machine, Workload

class SimNode:
    def __init__(self, sim: "Simulation", config: RaftConfig, workload: "Workload", start: bool = True) -> None:
        self.sim = sim
        self.config = config
        self.node_id = config.node_id
        self.workload = workload
        self.core: RaftCore | None = None
        self.incarnation = 0
        self.disks = 0
        self._tick_version = 0
        self._flushing = False
        self._new_disk()
        if start:
            self.start()

    def _new_disk(self) -> None:
        self.disks += 1
        self.log = MemoryLog()
        self.store = MemoryQuorumStateStore()
        self.snapshots = MemorySnapshotStore()
        self.machine: Machine = self.workload.machine(self)

    @property
    def alive(self) -> bool:
        return self.core is not None

    def start(self) -> None:
        if self.alive:
            return  # a restart scheduled by a crash fault, after healing already restarted it
        self.incarnation += 1
        self.machine = self.workload.machine(self)
        rng = Random(f"{self.sim.seed}/{self.node_id}/{self.incarnation}")
        self.core = RaftCore(self.config, self.log, self.store, rng, self.sim.clock.now, self.machine, self.snapshots)
        self.machine.core = self.core  # the metadata machine submits through it
        self.after_step()

    def kill(self) -> None:
        """kill -9 and a power cut: the core is gone, so is everything not yet durable."""
        self.core = None
        self._flushing = False
        self._tick_version += 1
        self.log.simulate_crash()
        self.snapshots.simulate_crash()

    def lose_disk(self) -> None:
        """The node comes back with nothing: it must catch up, by snapshot."""
        self.kill()
        self._new_disk()

    # ---------------------------------------------------------------- stepping

    def step(self, action: Callable[[RaftCore, int], None]) -> None:
        if self.core is None:
            return
        try:
            action(self.core, self.sim.clock.now)
        except InvariantViolation as e:
            self.sim.fail(f"node {self.node_id} stopped: {e}")
        self.after_step()

    def after_step(self) -> None:
        """Snapshots if due, sends the outbox, starts a flush if wanted, schedules the next tick."""
        core = self.core
        if core is None:
            return
        self.workload.after_step(self, core, self.sim.clock.now)
        for message in core.poll_outbox():
            if isinstance(message, Send):
                self.sim.deliver_request(self, message)
            else:
                self.sim.deliver_reply(self, message)
        if core.wants_flush and not self._flushing:
            self._flushing = True
            token = self.log.begin_flush()
            incarnation = self.incarnation
            self.sim.clock.at(self.sim.clock.now + self.sim.rng.randint(0, 4), lambda: self._flushed(token, incarnation))
        self._tick_version += 1
        version = self._tick_version
        self.sim.clock.at(core.next_deadline(), lambda: self._tick(version))

    def _flushed(self, token: tuple[int, int], incarnation: int) -> None:
        if incarnation != self.incarnation or self.core is None:
            return
        self._flushing = False
        self.log.complete_flush(token)
        self.step(lambda core, now: core.handle_flush(now))

    def _tick(self, version: int) -> None:
        if version == self._tick_version:
            self.step(lambda core, now: core.tick(now))

    def receive_reply(self, reply: Reply, request_id: int, incarnation: int) -> None:
        if incarnation == self.incarnation:
            self.step(lambda core, now: core.handle_response(request_id, reply.response, now))
