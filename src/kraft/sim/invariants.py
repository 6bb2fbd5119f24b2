"""The simulator's invariants: each a small object with a name, switched on or off per run.

An invariant reads the run (the nodes as they are now, and the History) after every event
(`step`), and once at the end of a healed run (`end`), keeping whatever memory it needs
of its own; it raises Violation naming itself. A run checks all of them unless told
otherwise (`Simulation(..., invariants=[names])`, `python -m kraft.sim --skip NAME`), and
tests/sim/test_invariants.py shows each one failing on a core broken for it.

Safety, after every event:

* single-leader-per-epoch: no two nodes lead the same epoch.
* monotonic-epoch: the epoch a node's quorum-state holds never goes back, across restarts
  (a wiped disk starts a new history), and a running core is never behind it.
* monotonic-high-watermark: a node's high watermark never goes back while it runs, and
  never passes the highest any leader reached. A restart forgets it (KRaft does not keep
  it on disk): a new life starts without one, or at its latest snapshot's end, and learns
  it again from the leader, so it may come back lower than before the crash.
* majority-holds-high-watermark: a majority of voters hold, flushed, the entry just below
  a leader's high watermark, with the leader's epoch for it (by log matching, everything
  below it too), or hold it inside a snapshot.
* log-matching: two batches with the same base offset and epoch, on any nodes at any time,
  are the same batch and follow the same batch.
* snapshots-agree: snapshots with the same id hold the same state on every node.
* log-start-at-snapshot: the log starts at or before its earliest snapshot, and exactly
  at one above offset 0.
* committed-never-lost: no offset is committed with two values, on any node in any life,
  and every leader holds everything leaders of earlier epochs committed.
* leader-never-loads-snapshot: a snapshot is loaded only by a follower or observer.
* damaged-data-refused: no node runs on a log whose flushed data bit rot changed.
* dynamic-after-upgrade: once a KRaftVersionRecord raising kraft.version to 1 is committed,
  the quorum never goes back to static: every running node that has applied past it is
  dynamic (whatever its controller.quorum.voters still says), and its voter set where it
  applied is the one committed VotersRecords name there; a leader elected after the commit
  is dynamic too.
* state-matches-commits: every node's metadata image at an offset is the same, what a
  state machine alone can tell is wrong (a snapshot holding another offset's state, a
  refused operation that appended records) never happens, and at the end every running
  node's state equals the one computed from the committed records.

Liveness, at the end, after the faults healed:

* liveness-after-heal: a new append commits within the bound, one leader remains, and
  every running node has applied everything committed (a voter lost for good, as in the
  leader-loss scenario, is not running: the others must have elected a leader without it).
* catch-up-by-snapshot: a node that started with nothing while the leader held a snapshot
  (it joined late, or lost its disk) caught up by loading one.
"""

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar, NoReturn, Protocol

from kraft.raft import Role
from kraft.raft.voters import VoterSet
from kraft.records import iter_batches
from kraft.sim.cluster import Cluster
from kraft.sim.params import SimParams
from kraft.sim.run_history import History, Violation
from kraft.sim.simulated_node import SimNode
from kraft.sim.workloads import Workload
from kraft.storage import MemoryLog, SnapshotId


class RunView(Protocol):
    """What an invariant may read of a run."""

    @property
    def cluster(self) -> Cluster: ...
    @property
    def history(self) -> History: ...
    @property
    def workload(self) -> Workload: ...
    @property
    def params(self) -> SimParams: ...


class Invariant:
    name: ClassVar[str]

    def step(self, run: RunView) -> None:
        """After every event."""

    def end(self, run: RunView) -> None:
        """Once, after the faults healed and the cluster had time to settle."""

    def fail(self, message: str) -> NoReturn:
        raise Violation(self.name, message)


# ---------------------------------------------------------------- elections and epochs


class SingleLeaderPerEpoch(Invariant):
    name = "single-leader-per-epoch"

    def step(self, run: RunView) -> None:
        for epoch, _ in run.history.new_leaders:
            leaders = run.history.leaders_of_epoch[epoch]
            if len(leaders) > 1:
                self.fail(f"two leaders in epoch {epoch}: nodes {leaders[0]} and {leaders[1]}")


class MonotonicEpoch(Invariant):
    name = "monotonic-epoch"

    def __init__(self) -> None:
        self._durable: dict[tuple[int, int], int] = {}  # (node, disk) -> epoch last seen in its quorum-state

    def step(self, run: RunView) -> None:
        for node in run.cluster.nodes.values():
            state = node.store.read()
            if state is None:
                continue
            disk = (node.node_id, node.disks)  # a wiped disk starts a new history
            last = self._durable.get(disk, -1)
            if state.epoch < last:
                self.fail(f"node {node.node_id}: the epoch in its quorum-state went back from {last} to {state.epoch}")
            self._durable[disk] = state.epoch
            if node.core is not None and node.core.epoch < state.epoch:
                self.fail(f"node {node.node_id} runs in epoch {node.core.epoch}, behind the epoch {state.epoch} "
                          "its quorum-state holds")


# ---------------------------------------------------------------- the high watermark


class MonotonicHighWatermark(Invariant):
    name = "monotonic-high-watermark"

    def __init__(self) -> None:
        self._last: dict[int, tuple[int, int]] = {}  # node -> (incarnation, high watermark)
        self._leaders_highest = -1

    def step(self, run: RunView) -> None:
        nodes = run.cluster.nodes.values()
        for node in nodes:
            core = node.core
            # A resigned leader's too: the step that committed its own removal (KIP-853) resigned it.
            if core is not None and core.role in (Role.LEADER, Role.RESIGNED) and core.high_watermark is not None:
                self._leaders_highest = max(self._leaders_highest, core.high_watermark)
        for node in nodes:
            core = node.core
            if core is None or core.high_watermark is None:
                continue
            hw = core.high_watermark
            life, last = self._last.get(node.node_id, (node.incarnation, -1))
            if life == node.incarnation and hw < last:
                self.fail(f"node {node.node_id} ({core.role.name.lower()}): high watermark went back "
                          f"from {last} to {hw}")
            if hw > self._leaders_highest:
                self.fail(f"node {node.node_id}: high watermark {hw} passes the highest any leader reached, "
                          f"{self._leaders_highest}")
            self._last[node.node_id] = (node.incarnation, hw)


class MajorityHoldsHighWatermark(Invariant):
    """Checked when a leader moves its high watermark, against the voter set it moved it with:
    an offset committed by a majority of one set stays committed when a voter is added (KIP-853:
    any majority of the new set overlaps any of the old) before a majority of the new set holds
    it. A high watermark a node already had (from its leader, or as the leader of an earlier
    epoch) was checked where it was reached."""

    name = "majority-holds-high-watermark"

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], int] = {}  # (node, incarnation) -> its high watermark last step

    def step(self, run: RunView) -> None:
        cluster = run.cluster
        for node in cluster.nodes.values():
            core = node.core
            if core is None or core.high_watermark is None:
                continue
            hw, key = core.high_watermark, (node.node_id, node.incarnation)
            moved = hw > self._seen.get(key, -1)
            self._seen[key] = hw
            if moved and core.is_leader and hw > node.log.start_offset:
                self._check(cluster, node, core.voters.latest, hw)

    def _check(self, cluster: Cluster, node: SimNode, voters: VoterSet, hw: int) -> None:
        epoch_below = node.log.epoch_for_offset(hw - 1)
        holders = [
            v
            for v in voters.ids
            if (log := cluster.nodes[v].log).start_offset >= hw  # the offset is inside its snapshot
            or (log.last_flushed_offset >= hw and log.epoch_for_offset(hw - 1) == epoch_below)
        ]
        if len(holders) < voters.majority:
            self.fail(
                f"leader {node.node_id} high watermark {hw}, but only voters {holders} hold offset "
                f"{hw - 1} (epoch {epoch_below}) on disk"
            )


# ---------------------------------------------------------------- logs and snapshots


@dataclass
class _LogCursor:
    """How far the log-matching check has read one node's log."""

    log: MemoryLog  # the log it read (a lost disk is a new one)
    generation: int  # the log's truncation count when last read
    end: int  # the log end when last read
    last: tuple[int, int, int] | None  # (base offset, epoch, crc) of the last batch read


class LogMatching(Invariant):
    """Checks the batches appended to each running node's log since the last event
    against every batch any node ever held with the same base offset and epoch: the same
    bytes (crc), after the same batch. By induction two logs holding one batch agree up
    to it. A stopped node's log only loses batches (a crash), so it waits for the restart."""

    name = "log-matching"

    def __init__(self) -> None:
        # Every batch any node held: (base offset, epoch) -> [crc, (base, epoch, crc) of the batch before it].
        self._seen: dict[tuple[int, int], list] = {}
        self._cursors: dict[int, _LogCursor] = {}

    def step(self, run: RunView) -> None:
        for node in run.cluster.nodes.values():
            if node.alive:
                self.check_node(node)

    def check_node(self, node: SimNode) -> None:
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
            seen = self._seen
            for h in iter_batches(log.read(start, 1 << 40).tobytes()):
                batch = (h.base_offset, h.partition_leader_epoch, h.crc)
                known = seen.get(batch[:2])
                if known is None:
                    seen[batch[:2]] = [h.crc, previous]
                elif known[0] != h.crc or (previous is not None and known[1] not in (None, previous)):
                    self.fail(
                        f"node {node.node_id} holds a batch at offset {h.base_offset} in epoch "
                        f"{h.partition_leader_epoch} (crc {h.crc}) after {previous}, but another node held it "
                        f"(crc {known[0]}) after {known[1]}"
                    )
                elif known[1] is None:
                    known[1] = previous
                previous = batch
        self._cursors[node.node_id] = _LogCursor(log, log.generation, end, previous)


class SnapshotsAgree(Invariant):
    name = "snapshots-agree"

    def __init__(self) -> None:
        self._states: dict[SnapshotId, bytes] = {}  # snapshot id -> digest of its state, the first node's
        self._checked: set[tuple[int, int, SnapshotId]] = set()  # (node, disk, id)

    def step(self, run: RunView) -> None:
        for node in run.cluster.nodes.values():
            for sid in node.snapshots.list():
                key = (node.node_id, node.disks, sid)
                if key in self._checked:
                    continue
                self._checked.add(key)
                content = hashlib.sha256()
                for record in node.snapshots.open_reader(sid).records():
                    content.update(len(record.value or b"").to_bytes(4, "big") + (record.value or b""))
                known = self._states.setdefault(sid, content.digest())
                if known != content.digest():
                    self.fail(f"snapshot {sid} holds different states on different nodes (node {node.node_id})")


class LogStartAtSnapshot(Invariant):
    name = "log-start-at-snapshot"

    def step(self, run: RunView) -> None:
        for node in run.cluster.nodes.values():
            ids = node.snapshots.list()
            start = node.log.start_offset
            if ids and start > ids[0].end_offset:
                self.fail(f"node {node.node_id}: log starts at {start}, after its earliest snapshot {ids[0]}")
            if start > 0 and (not ids or ids[0].end_offset != start):
                self.fail(f"node {node.node_id}: log starts at {start} but its earliest snapshot is {ids[:1]}")


class LeaderNeverLoadsSnapshot(Invariant):
    name = "leader-never-loads-snapshot"

    def __init__(self) -> None:
        self._read = 0

    def step(self, run: RunView) -> None:
        loads = run.history.snapshot_loads
        for load in loads[self._read :]:
            if load.role == Role.LEADER:
                self.fail(f"leader {load.node_id} loaded snapshot {load.snapshot_id}")
        self._read = len(loads)


# ---------------------------------------------------------------- committed data and state


class CommittedNeverLost(Invariant):
    name = "committed-never-lost"

    def __init__(self) -> None:
        # epoch -> (high watermark its leader reached, epoch of the entry just below it or
        # None when that entry was already inside the leader's snapshot)
        self._committed: dict[int, tuple[int, int | None]] = {}

    def step(self, run: RunView) -> None:
        history = run.history
        if history.commit_conflicts:
            self.fail(history.commit_conflicts[0])
        leaders = run.cluster.leaders()
        grew = False
        for node in leaders:
            core = node.core
            assert core is not None
            hw = core.high_watermark
            if hw is not None and hw > self._committed.get(core.epoch, (0, None))[0]:
                self._committed[core.epoch] = (hw, node.log.epoch_for_offset(hw - 1))
                grew = True
        if grew or history.new_leaders:
            for node in leaders:
                self._check_holds(node)

    def _check_holds(self, node: SimNode) -> None:
        """The leader's log holds the highest entry committed in any earlier epoch (so, by
        log matching, all of them), or its snapshot covers it."""
        core = node.core
        assert core is not None
        earlier = [c for epoch, c in self._committed.items() if epoch < core.epoch]
        if not earlier:
            return
        hw, epoch = max(earlier, key=lambda c: c[0])
        log = node.log
        if log.start_offset >= hw:
            return
        if log.end_offset < hw or (epoch is not None and log.epoch_for_offset(hw - 1) != epoch):
            self.fail(
                f"leader {node.node_id} of epoch {core.epoch} lacks offset {hw - 1} (epoch {epoch}), committed "
                f"before: its log ends at {log.end_offset}, with epoch {log.epoch_for_offset(hw - 1)} there"
            )


class DynamicAfterUpgrade(Invariant):
    """Judged against the history's committed control records, not against any node's
    reading of them, so a node whose configuration won over its log (a restart that replays
    no voter set, a snapshot without one) is caught wherever it has applied."""

    name = "dynamic-after-upgrade"

    def __init__(self) -> None:
        self._epoch: int | None = None  # the highest epoch any node had when the upgrade was seen committed
        self._checked: dict[int, tuple[int, int, int]] = {}  # node -> (incarnation, applied, voters' generation)

    def step(self, run: RunView) -> None:
        history, nodes = run.history, run.cluster.nodes.values()
        upgraded = history.upgraded_at
        if upgraded is None:
            return
        if self._epoch is None:
            self._epoch = max(n.core.epoch for n in nodes if n.core is not None)
        for node in nodes:
            core = node.core
            if core is None:
                continue
            applied, voters = node.machine.applied, core.voters
            if core.is_leader and core.epoch > self._epoch and not voters.is_dynamic:
                self.fail(f"leader {node.node_id} of epoch {core.epoch}, elected after kraft.version 1 committed at "
                          f"offset {upgraded}, leads a static quorum")
            seen = (node.incarnation, applied, voters.generation)
            if applied <= upgraded or self._checked.get(node.node_id) == seen:
                continue
            self._checked[node.node_id] = seen
            if not voters.is_dynamic or voters.kraft_version < 1:
                self.fail(f"node {node.node_id} applied up to {applied}, past kraft.version 1 committed at offset "
                          f"{upgraded}, but its quorum is static (kraft.version {voters.kraft_version})")
            expected, actual = history.voters_at(applied - 1), voters.at(applied - 1)
            if actual != expected:
                self.fail(f"node {node.node_id}: voters at offset {applied - 1} are {_described(actual)}, but the "
                          f"committed records name {_described(expected)}")


def _described(voters: VoterSet | None) -> str:
    if voters is None:
        return "none"
    return "[" + ", ".join(f"{v.voter_id} (directory {v.directory_id.hex()[-4:]})" for v in voters.voters) + "]"


class DamagedDataRefused(Invariant):
    name = "damaged-data-refused"

    def step(self, run: RunView) -> None:
        for node in run.cluster.nodes.values():
            if node.alive and node.damaged_at is not None:
                self.fail(f"node {node.node_id} started on a log whose flushed batch at offset {node.damaged_at} "
                          "was damaged: opening it must refuse")


class StateMatchesCommits(Invariant):
    name = "state-matches-commits"

    def step(self, run: RunView) -> None:
        history = run.history
        for problems in (history.image_conflicts, history.state_errors):
            if problems:
                self.fail(problems[0])

    def end(self, run: RunView) -> None:
        difference = run.workload.check_end(run.cluster, run.history)
        if difference is not None:
            self.fail(difference)


# ---------------------------------------------------------------- liveness


class LivenessAfterHeal(Invariant):
    name = "liveness-after-heal"

    def end(self, run: RunView) -> None:
        history, cluster = run.history, run.cluster
        healed = history.healed_at if history.healed_at is not None else run.params.fault_ms
        commits_after_heal = [t for t in history.commit_times if t >= healed]
        if not commits_after_heal:
            self.fail(f"nothing was committed after the faults healed at t={healed}")
        if commits_after_heal[0] - healed > run.params.liveness_bound_ms:
            self.fail(f"the first commit after healing came {commits_after_heal[0] - healed} ms after it "
                      f"(bound {run.params.liveness_bound_ms} ms)")
        leaders = cluster.leaders()
        if len(leaders) != 1:
            self.fail(f"{len(leaders)} leaders at the end of a healed run")
        target = max(history.committed, default=-1) + 1
        for node in cluster.nodes.values():
            if node.alive and node.refused is None and node.machine.applied < target:
                self.fail(f"node {node.node_id} applied only up to {node.machine.applied}, not {target}, after healing")


class CatchUpBySnapshot(Invariant):
    name = "catch-up-by-snapshot"

    def end(self, run: RunView) -> None:
        stats = run.history.stats
        if stats.empty_starts and not stats.snapshots_fetched:
            self.fail(f"{stats.empty_starts} node(s) started with an empty disk while the leader held a "
                      "snapshot, but none caught up by loading one")


INVARIANTS: dict[str, type[Invariant]] = {
    cls.name: cls
    for cls in (
        SingleLeaderPerEpoch,
        MonotonicEpoch,
        MonotonicHighWatermark,
        MajorityHoldsHighWatermark,
        LogMatching,
        SnapshotsAgree,
        LogStartAtSnapshot,
        CommittedNeverLost,
        LeaderNeverLoadsSnapshot,
        DamagedDataRefused,
        DynamicAfterUpgrade,
        StateMatchesCommits,
        LivenessAfterHeal,
        CatchUpBySnapshot,
    )
}


def build(names: Collection[str] | None = None) -> list[Invariant]:
    """Fresh checkers for one run: the named ones, or every one."""
    chosen = list(INVARIANTS) if names is None else list(names)
    unknown = [n for n in chosen if n not in INVARIANTS]
    if unknown:
        raise ValueError(f"unknown invariant {unknown[0]!r}; one of {', '.join(INVARIANTS)}")
    return [INVARIANTS[n]() for n in chosen]
