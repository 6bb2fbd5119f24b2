"""A simulated node: a RaftCore on a MemoryLog and MemorySnapshotStore, driven by the
simulator's clock and network.

It does what the real server does, in virtual time: hands the core every request and
response, sends what the core's outbox holds, ticks it at its next deadline, flushes the
log when asked (with a disk that takes time), and lets its state machine snapshot when the
policy says so. A kill drops the core and everything not yet durable; a restart builds a
new core on what survived; losing the disk starts from nothing.
"""

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import TYPE_CHECKING

from kraft.raft import CommittedBatch, InvariantViolation, LeaderAndEpoch, RaftConfig, RaftCore, Reply, Role, Send
from kraft.raft.snapshot_policy import SnapshotPolicy
from kraft.storage import MemoryLog, MemoryQuorumStateStore, MemorySnapshotStore, SnapshotReader

if TYPE_CHECKING:
    from kraft.sim.simulation import Simulation

_STATE = struct.Struct(">qq32s")  # count, applied offset, digest


@dataclass
class CounterMachine:
    """The replicated state machine: a count of committed records and a hash chain over them.

    The chain makes the state depend on every value in order, so two nodes agree on the
    state only if they applied the same records. `seen` maps each offset this incarnation
    was handed to its value, for the simulation's checks.
    """

    node: "SimNode"
    policy: SnapshotPolicy
    count: int = 0
    applied: int = 0
    digest: bytes = bytes(32)
    seen: dict[int, bytes | None] = field(default_factory=dict)
    leaders: list[LeaderAndEpoch] = field(default_factory=list)

    def handle_commit(self, batch: CommittedBatch) -> None:
        self.applied = batch.last_offset + 1
        if batch.control:
            return
        for record in batch.records:
            self.seen[record.offset] = record.value
            self.count += 1
            self.digest = hashlib.sha256(self.digest + (record.value or b"")).digest()
            self.node.sim.observe_commit(self.node, record.offset, record.value)
        self.policy.record_commit(batch)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leaders.append(leader)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        core = self.node.core
        if core is not None and core.role == Role.LEADER:
            self.node.sim.fail(f"leader {self.node.node_id} loaded snapshot {reader.snapshot_id}")
        (record,) = list(reader.records())
        self.count, self.applied, self.digest = _STATE.unpack(record.value)
        if self.applied != reader.snapshot_id.end_offset:
            self.node.sim.fail(f"snapshot {reader.snapshot_id} holds state at {self.applied}")
        self.policy.reset()

    def state(self) -> bytes:
        return _STATE.pack(self.count, self.applied, self.digest)


class SimNode:
    def __init__(self, sim: "Simulation", config: RaftConfig, snapshot_every_bytes: int, start: bool = True) -> None:
        self.sim = sim
        self.config = config
        self.node_id = config.node_id
        self.snapshot_every_bytes = snapshot_every_bytes
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
        self.machine = self._machine()

    def _machine(self) -> CounterMachine:
        return CounterMachine(self, SnapshotPolicy(self.snapshot_every_bytes, 0.0, 0))

    @property
    def alive(self) -> bool:
        return self.core is not None

    def start(self) -> None:
        if self.alive:
            return  # a restart scheduled by a crash fault, after healing already restarted it
        self.incarnation += 1
        self.machine = self._machine()
        rng = Random(f"{self.sim.seed}/{self.node_id}/{self.incarnation}")
        self.core = RaftCore(self.config, self.log, self.store, rng, self.sim.clock.now, self.machine, self.snapshots)
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
        self._maybe_snapshot(core)
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

    def _maybe_snapshot(self, core: RaftCore) -> None:
        machine = self.machine
        end = machine.applied
        latest = self.snapshots.latest()
        if machine.policy.due(self.sim.clock.now, 1.0) is None or end == 0 or (latest and latest.end_offset >= end):
            return
        if end < self.log.start_offset or core.high_watermark is None or end > core.high_watermark:
            return
        writer = core.create_snapshot(core.snapshot_id_at(end), self.sim.clock.now)
        writer.append([(None, machine.state())])
        writer.freeze()
        machine.policy.reset()
        self.sim.stats.snapshots += 1

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
