"""One seeded run: a cluster, a client, a fault schedule, and the checks.

Everything random comes from the seed, so a run replays exactly: the same seed and mix
give the same events in the same order. The checks run after every event:

* one leader per epoch;
* the epoch in quorum-state never goes back;
* a leader's high watermark never goes back;
* a majority of voters hold, on disk, the entry just below the high watermark, with the
  leader's epoch (so, by log matching, everything below it);
* log matching: two batches with the same base offset and epoch, on any nodes at any
  time, are the same batch and follow the same batch (checked incrementally, on the
  batches each event appended);
* no offset is ever committed with two different values, on any node, in any life;
* the log start offset is at or before the earliest snapshot, and equal to it above 0;
* snapshots with the same id hold the same state on every node; a leader never loads one.

At the end, after the faults heal: a leader is elected and commits a new append within a
bound, every node catches up to it, and every node's state (snapshot plus log) equals the
one computed from the committed records. A node that starts with nothing (it joins late,
or lost its disk) while the leader holds a snapshot must catch up by loading one.
"""

import hashlib
import logging
from collections import deque
from dataclasses import dataclass, field
from random import Random

from kraft.metadata import MetadataImage
from kraft.raft import RaftConfig, Reply, Role, Send
from kraft.records import iter_batches
from kraft.sim.network import Clock, Network
from kraft.sim.node import SimNode
from kraft.sim.workloads import CounterWorkload, MetadataWorkload, Workload

WORKLOADS = ("counter", "metadata")

MIXES = (
    "none",
    "drop",
    "delay",
    "duplicate",
    "partition",
    "oneway",
    "split",
    "isolate-leader",
    "crash",
    "late-join",
    "disk-loss",
    "resign",
    "all",
)


class SimulationFailure(AssertionError):
    pass


@dataclass
class SimParams:
    voters: int = 3
    observers: int = 1
    fault_ms: int = 8000  # faults happen in [0, fault_ms); then everything heals
    settle_ms: int = 6000  # time after healing to elect a leader, commit and catch up
    liveness_bound_ms: int = 4000  # a new append must commit this soon after healing
    append_every_ms: int = 25
    quiet_ms: int = 2000  # no appends in the last part of the run
    snapshot_every_bytes: int = 2000  # the counter snapshots after this many committed bytes


@dataclass
class _LogCursor:
    """How far the log-matching check has read one node's log."""

    log: object  # the log it read (a lost disk is a new one)
    generation: int  # the log's truncation count when last read
    end: int  # the log end when last read
    last: tuple[int, int, int] | None  # (base offset, epoch, crc) of the last batch read


@dataclass
class Stats:
    events: int = 0
    elections: int = 0
    appends: int = 0
    acknowledged: int = 0
    kills: int = 0
    disks_lost: int = 0
    resignations: int = 0
    snapshots: int = 0
    snapshots_fetched: int = 0  # snapshots a running node loaded on the leader's word
    empty_starts: int = 0  # nodes started with nothing while the leader held a snapshot
    dropped: int = 0
    delivered: int = 0
    leaders: set[tuple[int, int]] = field(default_factory=set)


class _Trace(logging.Handler):
    """Keeps the last log lines, stamped with virtual time, for the failure report."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.lines: deque[str] = deque(maxlen=60)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"t={self.clock.now:>6} {record.getMessage()}")


def replay_command(seed: int, mix: str, params: SimParams, workload: str = "counter") -> str:
    return (
        f".venv/bin/python -m kraft.sim --seed {seed} --mix {mix} --workload {workload} "
        f"--voters {params.voters} --observers {params.observers}"
    )


class Simulation:
    def __init__(self, seed: int, mix: str, params: SimParams | None = None, workload: str = "counter") -> None:
        if mix not in MIXES:
            raise ValueError(f"unknown fault mix {mix!r}; one of {', '.join(MIXES)}")
        if workload not in WORKLOADS:
            raise ValueError(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
        self.seed = seed
        self.mix = mix
        self.workload_name = workload
        self.params = params or SimParams()
        self.rng = Random(f"{seed}/sim")
        self.fault_rng = Random(f"{seed}/faults")
        self.clock = Clock()
        self.network = Network(self.clock, Random(f"{seed}/net"))
        self.stats = Stats()
        voters = tuple(range(1, self.params.voters + 1))
        ids = list(voters) + list(range(self.params.voters + 1, self.params.voters + self.params.observers + 1))
        self.voter_ids = voters
        self.committed: dict[int, bytes | None] = {}  # offset -> value, across every node and life
        self.appended: dict[int, tuple[int, int, bytes]] = {}  # value id -> (epoch, offset, value)
        self.acked: dict[int, tuple[int, bytes]] = {}  # value id -> (offset, value): seen committed
        self._leader_of_epoch: dict[int, int] = {}
        self._persisted_epoch: dict[tuple[int, int], int] = {}
        self._leader_hw: dict[tuple[int, int], int] = {}
        # Every batch any node held: (base offset, epoch) -> [crc, (base, epoch, crc) of the batch before it].
        self._batches_seen: dict[tuple[int, int], list] = {}
        self._cursors: dict[int, _LogCursor] = {}
        self._snapshot_states: dict[object, bytes] = {}  # snapshot id -> state, the first node's
        self._snapshots_checked: set[tuple[int, int, object]] = set()  # (node, disk, id)
        self._image_digests: dict[int, str] = {}  # offset -> digest of the metadata image there
        self.workload: Workload = (CounterWorkload if workload == "counter" else MetadataWorkload)(
            self.params.snapshot_every_bytes
        )
        self._next_value = 0
        self._append_time: dict[int, int] = {}
        self._ack_time: dict[int, int] = {}
        self._commit_times: list[int] = []  # when each offset was first seen committed
        self._healed_at = self.params.fault_ms
        self.nodes: dict[int, SimNode] = {}
        for node_id in ids:
            config = RaftConfig(
                node_id=node_id,
                voters=voters,
                cluster_id="sim",
                election_timeout_ms=300,
                election_backoff_max_ms=300,
                fetch_timeout_ms=600,
                request_timeout_ms=300,
                fetch_max_wait_ms=100,
                # Retention moves the log start (readers' offsets go only by it): kept small
                # here, so logs start past snapshots and replicas that fall behind fetch them.
                max_retention_bytes=2000,
            )
            late = mix == "late-join" and node_id in (voters[-1], ids[-1])
            self.nodes[node_id] = SimNode(self, config, self.workload, start=not late)
            if late:
                self.clock.at(self.fault_rng.randint(1000, self.params.fault_ms - 1000),
                              lambda node=self.nodes[node_id]: self._start_empty(node))
        self.trace = _Trace(self.clock)

    def _start_empty(self, node: SimNode) -> None:
        """Starts a node that has nothing (it joins late, or lost its disk). If the leader
        holds a snapshot by then, the node must catch up by fetching it (KIP-630: a fetch
        at offset 0 is answered with the latest snapshot), which check_end verifies."""
        if not node.alive and any(
            n.core is not None and n.core.is_leader and n.snapshots.latest() is not None for n in self.nodes.values()
        ):
            self.stats.empty_starts += 1
        node.start()

    # ---------------------------------------------------------------- messaging

    def deliver_request(self, sender: SimNode, send: Send) -> None:
        destination = self.nodes[send.destination]
        handle = (sender.node_id, sender.incarnation, send.request_id)

        def arrive() -> None:
            destination.step(lambda core, now: core.handle_request(handle, send.request, now))

        self.network.send(sender.node_id, send.destination, arrive)

    def deliver_reply(self, replier: SimNode, reply: Reply) -> None:
        source_id, incarnation, request_id = reply.handle
        source = self.nodes[source_id]
        self.network.send(replier.node_id, source_id, lambda: source.receive_reply(reply, request_id, incarnation))

    # ---------------------------------------------------------------- client

    @property
    def quiet(self) -> bool:
        """The end of the run is quiet (no client, no idle writes), so every node can catch up."""
        return self.clock.now >= self.params.fault_ms + self.params.settle_ms - self.params.quiet_ms

    def _client_append(self) -> None:
        if self.quiet:
            return
        self.workload.client_step(self)
        self.clock.at(self.clock.now + self.params.append_every_ms, self._client_append)

    def next_value(self) -> bytes:
        self._next_value += 1
        return b"%d" % self._next_value

    def record_append(self, value: bytes, epoch: int, offset: int) -> None:
        """A numbered record the client appended at (epoch, offset): acknowledged once seen committed there."""
        self.appended[int(value)] = (epoch, offset, value)
        self._append_time[int(value)] = self.clock.now
        self.stats.appends += 1

    def observe_image(self, node: SimNode, image: MetadataImage) -> None:
        """Every node's metadata image at one offset must be the same."""
        digest = image.digest()
        known = self._image_digests.setdefault(image.offset, digest)
        if known != digest:
            self.fail(f"node {node.node_id}: metadata image at offset {image.offset} differs from another node's")

    def observe_commit(self, node: SimNode, offset: int, value: bytes | None) -> None:
        if offset not in self.committed:
            self._commit_times.append(self.clock.now)
        known = self.committed.setdefault(offset, value)
        if known != value:
            self.fail(f"offset {offset} committed as {known!r} earlier but node {node.node_id} got {value!r}")
        if self.workload_name == "counter" and value is not None and value.isdigit():
            vid = int(value)
            appended = self.appended.get(vid)
            if appended is not None and appended[1] == offset and vid not in self.acked:
                self.acked[vid] = (offset, value)
                self._ack_time[vid] = self.clock.now
                self.stats.acknowledged += 1

    # ---------------------------------------------------------------- faults

    def _schedule_faults(self) -> None:
        rng, p, mix = self.fault_rng, self.params, self.mix
        net = self.network.faults
        episodic_kinds = {"partition", "oneway", "split", "isolate-leader", "crash", "disk-loss", "resign"}
        kinds = {"drop", "delay", "duplicate"} | episodic_kinds
        active = kinds if mix == "all" else ({mix} & kinds)
        if "drop" in active:
            net.drop = rng.uniform(0.05, 0.3)
        if "duplicate" in active:
            net.duplicate = rng.uniform(0.05, 0.3)
        if "delay" in active:
            net.min_delay, net.max_delay = 1, rng.randint(20, 250)
        episodic = active & episodic_kinds
        t = rng.randint(200, 800)
        while episodic and t < p.fault_ms:
            kind = rng.choice(sorted(episodic))
            length = rng.randint(100, 1500)
            self.clock.at(t, lambda kind=kind, length=length: self._fault(kind, length))
            t += rng.randint(300, 1500)
        self.clock.at(p.fault_ms, self._heal)

    def _fault(self, kind: str, length: int) -> None:
        rng, net, ids = self.fault_rng, self.network.faults, sorted(self.nodes)
        if kind == "partition":
            a, b = rng.sample(ids, 2)
            links = {(a, b), (b, a)}
        elif kind == "oneway":
            a, b = rng.sample(ids, 2)
            links = {(a, b)}
        elif kind == "split":
            shuffled = rng.sample(ids, len(ids))
            cut = rng.randint(1, len(ids) - 1)
            before = set(net.cut)
            net.split(shuffled[:cut], shuffled[cut:])
            links = net.cut - before
        elif kind == "isolate-leader":
            leaders = [n.node_id for n in self.nodes.values() if n.core is not None and n.core.is_leader]
            victim = leaders[0] if leaders else rng.choice(ids)
            before = set(net.cut)
            net.isolate(victim, ids)
            links = net.cut - before
        elif kind == "resign":
            # A graceful shutdown's first step: the leader hands over with EndQuorumEpoch.
            for node in self.nodes.values():
                if node.core is not None and node.core.is_leader:
                    node.step(lambda core, now: core.resign(now))
                    self.stats.resignations += 1
            return
        elif kind == "disk-loss":
            # Observers only: a voter that forgets its votes could vote twice in an epoch,
            # which Raft (and KRaft before KIP-853) cannot survive.
            observers = [n for n in self.nodes.values() if n.node_id not in self.voter_ids and n.alive]
            if observers:
                victim = rng.choice(observers)
                victim.lose_disk()
                self.stats.disks_lost += 1
                self.clock.at(self.clock.now + length, lambda: self._start_empty(victim))
            return
        else:  # crash
            alive = [n for n in self.nodes.values() if n.alive]
            if alive:
                leaders = [n for n in alive if n.core is not None and n.core.is_leader]
                victim = leaders[0] if leaders and rng.random() < 0.5 else rng.choice(alive)
                victim.kill()
                self.stats.kills += 1
                self.clock.at(self.clock.now + length, victim.start)
            return
        net.cut |= links
        self.clock.at(self.clock.now + length, lambda: net.cut.difference_update(links))

    def _heal(self) -> None:
        self.network.faults.heal()
        for node in self.nodes.values():
            node.start()
        self._healed_at = self.clock.now

    # ---------------------------------------------------------------- checks

    def fail(self, message: str) -> None:
        trace = "\n".join(self.trace.lines)
        raise SimulationFailure(
            f"seed {self.seed}, mix {self.mix}, t={self.clock.now}: {message}\n"
            f"replay: {replay_command(self.seed, self.mix, self.params, self.workload_name)}\n"
            f"--- last events ---\n{trace}"
        )

    def _check_step(self) -> None:
        self.stats.events += 1
        majority = len(self.voter_ids) // 2 + 1
        for node in self.nodes.values():
            self._check_snapshots(node)
            self._check_log_matching(node)
            state = node.store.read()
            if state is not None:
                disk = (node.node_id, node.disks)  # a wiped disk starts a new history
                last = self._persisted_epoch.get(disk, -1)
                if state.epoch < last:
                    self.fail(f"node {node.node_id}: persisted epoch went back from {last} to {state.epoch}")
                self._persisted_epoch[disk] = state.epoch
            core = node.core
            if core is None or core.role != Role.LEADER:
                continue
            owner = self._leader_of_epoch.setdefault(core.epoch, node.node_id)
            if owner != node.node_id:
                self.fail(f"two leaders in epoch {core.epoch}: nodes {owner} and {node.node_id}")
            if (core.epoch, node.node_id) not in self.stats.leaders:
                self.stats.leaders.add((core.epoch, node.node_id))
                self.stats.elections += 1
            hw = core.high_watermark
            if hw is None:
                continue
            key = (node.node_id, core.epoch)
            if hw < self._leader_hw.get(key, -1):
                self.fail(f"leader {node.node_id} high watermark went back from {self._leader_hw[key]} to {hw}")
            self._leader_hw[key] = hw
            if hw > node.log.start_offset:
                epoch_below = node.log.epoch_for_offset(hw - 1)
                holders = [
                    v
                    for v in self.voter_ids
                    if (
                        self.nodes[v].log.last_flushed_offset >= hw
                        and self.nodes[v].log.epoch_for_offset(hw - 1) == epoch_below
                    )
                    or self.nodes[v].log.start_offset >= hw  # the offset is inside its snapshot
                ]
                if len(holders) < majority:
                    self.fail(
                        f"leader {node.node_id} high watermark {hw}, but only voters {holders} hold offset "
                        f"{hw - 1} (epoch {epoch_below}) on disk"
                    )

    def _check_snapshots(self, node: SimNode) -> None:
        ids = node.snapshots.list()
        start = node.log.start_offset
        if ids and start > ids[0].end_offset:
            self.fail(f"node {node.node_id}: log starts at {start}, after its earliest snapshot {ids[0]}")
        if start > 0 and (not ids or ids[0].end_offset != start):
            self.fail(f"node {node.node_id}: log starts at {start} but its earliest snapshot is {ids[:1]}")
        for sid in ids:
            key = (node.node_id, node.disks, sid)
            if key in self._snapshots_checked:
                continue
            self._snapshots_checked.add(key)
            content = hashlib.sha256()
            for record in node.snapshots.open_reader(sid).records():
                content.update(len(record.value or b"").to_bytes(4, "big") + (record.value or b""))
            known = self._snapshot_states.setdefault(sid, content.digest())
            if known != content.digest():
                self.fail(f"snapshot {sid} holds different states on different nodes (node {node.node_id})")

    def _check_log_matching(self, node: SimNode) -> None:
        """Checks the batches appended to the node's log since the last event against every
        batch any node ever held with the same base offset and epoch: the same bytes (crc),
        after the same batch. By induction two logs holding one batch agree up to it."""
        log = node.log
        cursor = self._cursors.get(node.node_id)
        end = log.end_offset
        if cursor is None or cursor.log is not log:  # a new disk: all of it
            start, previous = log.start_offset, None
        elif cursor.generation != log.generation:  # truncated: what is left was checked; go on after it
            start, previous = end, None
            if end > log.start_offset:
                h = next(iter_batches(log.read(end - 1, 1).tobytes()))
                previous = (h.base_offset, h.partition_leader_epoch, h.crc)
        elif cursor.end == end:
            return
        else:
            start, previous = cursor.end, cursor.last
            if start < log.start_offset:  # appended and trimmed within one event: no predecessor left
                start, previous = log.start_offset, None
        if start < end:
            seen = self._batches_seen
            for h in iter_batches(log.read(start, 1 << 40).tobytes()):
                batch = (h.base_offset, h.partition_leader_epoch, h.crc)
                known = seen.get(batch[:2])
                if known is None:
                    seen[batch[:2]] = [h.crc, previous]
                elif known[0] != h.crc or (previous is not None and known[1] not in (None, previous)):
                    self.fail(
                        f"log matching: node {node.node_id} holds a batch at offset {h.base_offset} in epoch "
                        f"{h.partition_leader_epoch} (crc {h.crc}) after {previous}, but another node held it "
                        f"(crc {known[0]}) after {known[1]}"
                    )
                elif known[1] is None:
                    known[1] = previous
                previous = batch
        self._cursors[node.node_id] = _LogCursor(log, log.generation, end, previous)

    def _check_end(self) -> None:
        healed = self._healed_at
        commits_after_heal = [t for t in self._commit_times if t >= healed]
        if not commits_after_heal:
            self.fail(f"nothing was committed after the faults healed at t={healed}")
        if commits_after_heal[0] - healed > self.params.liveness_bound_ms:
            self.fail(
                f"the first commit after healing came {commits_after_heal[0] - healed} ms after it "
                f"(bound {self.params.liveness_bound_ms} ms)"
            )
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if len(leaders) != 1:
            self.fail(f"{len(leaders)} leaders at the end of a healed run")
        target = max(self.committed, default=-1) + 1
        for node in self.nodes.values():
            if node.machine.applied < target:
                self.fail(f"node {node.node_id} applied only up to {node.machine.applied}, not {target}, after healing")
        if self.stats.empty_starts and not self.stats.snapshots_fetched:
            self.fail(f"{self.stats.empty_starts} node(s) started with an empty disk while the leader held a "
                      "snapshot, but none caught up by loading one")
        self.workload.check_end(self)

    # ---------------------------------------------------------------- run

    def run(self) -> Stats:
        raft_log = logging.getLogger("kraft.raft")
        raft_log.addHandler(self.trace)
        level, propagate = raft_log.level, raft_log.propagate
        raft_log.setLevel(logging.INFO)
        raft_log.propagate = False
        try:
            self._schedule_faults()
            self.clock.at(0, self._client_append)
            end = self.params.fault_ms + self.params.settle_ms
            self.clock.run_until(end, self._check_step)
            self._check_end()
        finally:
            raft_log.removeHandler(self.trace)
            raft_log.setLevel(level)
            raft_log.propagate = propagate
        self.stats.dropped = self.network.dropped
        self.stats.delivered = self.network.delivered
        return self.stats
