"""Each named invariant fails on a core broken for it, and the real core passes the same
run: a checker that never fails proves nothing.

Every breakage is one small override through a public surface of the core: the messages
it takes in and sends out, what it does after a step, or the log, quorum-state store and
state machine the simulator hands it. Nothing here names a private member of RaftCore, so
the core's insides can change freely; `with_partition` is the one place that knows how a
KRaft message nests its single partition. Each broken run checks only the invariant under
test, so a failure shows that this invariant, on its own, catches the breakage.
"""

import dataclasses
from collections.abc import Callable

import pytest

from kraft.raft import RaftCore, Reply
from kraft.raft import messages as m
from kraft.records import build_batch
from kraft.sim import INVARIANTS, SimParams, Simulation, SimulationFailure
from kraft.sim.__main__ import main
from kraft.sim.invariants import LogMatching
from kraft.sim.run_history import Violation
from kraft.storage import MemoryLog


def with_partition(message, **changes):
    """The same KRaft request or response with fields of its one partition changed."""
    field = "topics" if hasattr(message, "topics") else "responses"
    (topic,) = getattr(message, field)
    (partition,) = topic.partitions
    topic = dataclasses.replace(topic, partitions=(dataclasses.replace(partition, **changes),))
    return dataclasses.replace(message, **{field: (topic,)})


class HookedCore(RaftCore):
    """RaftCore with hooks on its public surface: what arrives (`incoming`), what leaves
    (`outgoing`), and what it does after every step (`after`). The hooks do nothing here."""

    def incoming(self, message):
        return message

    def outgoing(self, message: object) -> object:
        return message

    def after(self, now: int) -> None:
        pass

    def handle_request(self, handle, request, now):
        super().handle_request(handle, self.incoming(request), now)
        self.after(now)

    def handle_response(self, request_id, response, now):
        super().handle_response(request_id, self.incoming(response), now)
        self.after(now)

    def tick(self, now):
        super().tick(now)
        self.after(now)

    def handle_flush(self, now):
        super().handle_flush(now)
        self.after(now)

    def poll_outbox(self):
        return [self.outgoing(message) for message in super().poll_outbox()]


class Delegate:
    """Storage or state machine handed to the core in place of the simulator's own: every
    call goes through to it but the ones a breakage overrides."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


def broken(core_class=RaftCore, *, log=None, store=None, listener=None, nodes=None):
    """A core factory: `core_class` on the simulator's storage and state machine, each
    wrapped in the given Delegate subclass, on every node or only on `nodes`."""

    def factory(config, raft_log, quorum_store, rng, now, machine, snapshots):
        if nodes is not None and config.node_id not in nodes:
            return RaftCore(config, raft_log, quorum_store, rng, now, machine, snapshots)
        raft_log = log(raft_log) if log else raft_log
        quorum_store = store(quorum_store) if store else quorum_store
        machine = listener(machine) if listener else machine
        return core_class(config, raft_log, quorum_store, rng, now, machine, snapshots)

    return factory


# ---------------------------------------------------------------- the breakages


class GrantsEveryVote(HookedCore):
    """A voter whose every Vote answer grants, whoever it voted for in that epoch."""

    def outgoing(self, message):
        if isinstance(message, Reply) and isinstance(message.response, m.VoteResponse):
            p = m.partition_of(message.response)
            if p is not None and p.error_code == m.ErrorCode.none:
                return Reply(message.handle, with_partition(message.response, vote_granted=True))
        return message


class ReadsAnOlderEpoch(Delegate):
    """A quorum-state read back one epoch older than was written (a stale copy restored)."""

    def read(self):
        state = self.inner.read()
        return dataclasses.replace(state, epoch=state.epoch - 1) if state is not None and state.epoch > 0 else state


class LeaderRestartsItsHighWatermark(HookedCore):
    """A new leader that starts its high watermark at its log start, not where it stood."""

    led = False

    def after(self, now):
        if self.is_leader and not self.led and self.high_watermark is not None:
            self.high_watermark = self.log.start_offset
        self.led = self.is_leader


class FlushedAtOnce(Delegate):
    """A log the core takes for flushed as soon as it is written (no fsync awaited)."""

    @property
    def last_flushed_offset(self):
        return self.inner.end_offset


class TrustsEveryFetcher(HookedCore):
    """A leader that takes every fetcher's log to match its own where the fetch starts (it
    never answers DivergingEpoch), so a deposed leader's unreplicated tail is never cut."""

    def incoming(self, message):
        if isinstance(message, m.FetchRequest) and self.is_leader:
            p = m.partition_of(message)
            epoch = self.log.epoch_for_offset(p.fetch_offset - 1) if p is not None and p.fetch_offset > 0 else None
            if epoch is not None:
                return with_partition(message, last_fetched_epoch=epoch)
        return message


class AppliesTwice(Delegate):
    """A state machine handed every committed batch twice."""

    def handle_commit(self, batch):
        self.inner.handle_commit(batch)
        self.inner.handle_commit(batch)


class StartsAtTheEnd(Delegate):
    """Retention that moves the log start to the log end, past the snapshot it was given."""

    def advance_start_offset(self, offset):
        return self.inner.advance_start_offset(max(offset, self.inner.end_offset))


class VotesForAnyLog(HookedCore):
    """A voter that takes every candidate's log for up to date: ending far ahead, in the
    newest epoch its request may name (the one before a vote's, a pre-vote's own)."""

    def incoming(self, message):
        if isinstance(message, m.VoteRequest):
            p = m.partition_of(message)
            newest = None if p is None else p.replica_epoch if p.pre_vote else p.replica_epoch - 1
            if newest is not None and newest >= 0:
                return with_partition(message, last_offset_epoch=newest, last_offset=1 << 30)
        return message


class LeaderReloadsItsSnapshot(HookedCore):
    """A new leader that reloads its latest snapshot into the state machine."""

    led = False

    def after(self, now):
        latest = self.snapshots.latest()
        if self.is_leader and not self.led and latest is not None and self.listener is not None:
            self.listener.handle_load_snapshot(self.snapshots.open_reader(latest))
        self.led = self.is_leader


class GrantsNoVote(HookedCore):
    """A voter whose every Vote answer refuses: no leader is ever elected."""

    def outgoing(self, message):
        if isinstance(message, Reply) and isinstance(message.response, m.VoteResponse):
            return Reply(message.handle, with_partition(message.response, vote_granted=False))
        return message


class IgnoresSnapshotIds(HookedCore):
    """A follower that reads a Fetch answer naming a snapshot as an empty answer."""

    def incoming(self, message):
        if isinstance(message, m.FetchResponse):
            p = m.partition_of(message)
            if p is not None and p.snapshot_id.end_offset >= 0:
                return with_partition(message, snapshot_id=m.fetch_resp.SnapshotId())
        return message


class ReplaysNoVoters(Delegate):
    """A log whose control batches a restart does not replay: a node's voters come back as
    its controller.quorum.voters says, not as the log says (a snapshot's still count)."""

    def control_batches(self, start):
        return iter(())


def trusts_its_bytes(log: MemoryLog) -> int:
    """Opening a log without reading it back: damaged flushed data goes unnoticed."""
    return 0


@dataclasses.dataclass
class Breakage:
    factory: Callable | None  # None: the real core (the breakage is patched elsewhere)
    mixes: tuple[str, ...]
    sign: str  # words of the invariant's message that say what went wrong
    workload: str = "counter"
    patch: tuple | None = None  # (object, name, value) to monkeypatch during the broken runs
    params: SimParams | None = None  # the run's family: a static quorum by default


BREAKAGES = {
    "single-leader-per-epoch": Breakage(broken(GrantsEveryVote), ("partition", "split", "isolate-leader"),
                                        "two leaders in epoch"),
    "monotonic-epoch": Breakage(broken(store=ReadsAnOlderEpoch), ("crash",), "quorum-state"),
    "monotonic-high-watermark": Breakage(broken(LeaderRestartsItsHighWatermark), ("resign", "isolate-leader"),
                                         "high watermark went back"),
    "majority-holds-high-watermark": Breakage(broken(log=FlushedAtOnce), ("none",), "on disk"),
    "log-matching": Breakage(broken(TrustsEveryFetcher), ("partition", "isolate-leader", "crash"),
                             "but another node held it"),
    "snapshots-agree": Breakage(broken(listener=AppliesTwice, nodes={2}), ("none", "crash", "drop"),
                                "holds different states"),
    "log-start-at-snapshot": Breakage(broken(log=StartsAtTheEnd), ("none",), "log starts at"),
    "committed-never-lost": Breakage(broken(VotesForAnyLog), ("partition", "split", "isolate-leader", "crash"),
                                     "committed"),
    "leader-never-loads-snapshot": Breakage(broken(LeaderReloadsItsSnapshot), ("resign", "isolate-leader"),
                                            "loaded snapshot"),
    "dynamic-after-upgrade": Breakage(broken(log=ReplaysNoVoters), ("crash", "restart-all"), "its quorum is static",
                                      params=SimParams(upgrade=True)),
    "damaged-data-refused": Breakage(None, ("bit-flip",), "must refuse",
                                     patch=(MemoryLog, "recover", trusts_its_bytes)),
    "state-matches-commits": Breakage(broken(listener=AppliesTwice, nodes={2}), ("none",),
                                      "differs from the committed records"),
    "liveness-after-heal": Breakage(broken(GrantsNoVote), ("none",), "nothing was committed after the faults healed"),
    "catch-up-by-snapshot": Breakage(broken(IgnoresSnapshotIds), ("late-join", "disk-loss"),
                                     "none caught up by loading one"),
}


def first_failure(breakage: Breakage, invariant: str, seeds=range(20)):
    """The first (seed, mix, failure) whose run on the broken core fails `invariant`, the
    only one checked. Runs stopped by the core's own checks first do not count."""
    kwargs = {"core_factory": breakage.factory} if breakage.factory is not None else {}
    for seed in seeds:
        for mix in breakage.mixes:
            try:
                Simulation(seed, mix, breakage.params, breakage.workload, invariants=[invariant], **kwargs).run()
            except SimulationFailure as e:
                if f": {invariant}: " in str(e):
                    return seed, mix, str(e)
    return None


def test_every_invariant_has_a_breakage():
    assert set(BREAKAGES) == set(INVARIANTS)


@pytest.mark.parametrize("invariant", list(BREAKAGES))
def test_a_broken_core_fails_the_invariant(invariant, monkeypatch):
    breakage = BREAKAGES[invariant]
    with monkeypatch.context() as patched:
        if breakage.patch is not None:
            patched.setattr(*breakage.patch)
        found = first_failure(breakage, invariant)
    assert found is not None, f"no run on the broken core failed {invariant}"
    seed, mix, failure = found
    assert breakage.sign in failure.split(f": {invariant}: ", 1)[1].split("\n")[0], failure
    replay = failure.split("replay: ")[1].split("\n")[0]
    assert f"--seed {seed} --mix {mix}" in replay
    assert f"--skip {invariant}" not in replay and replay.count("--skip ") == len(INVARIANTS) - 1
    # The same run on the real core passes, every invariant checked.
    Simulation(seed, mix, breakage.params, breakage.workload).run()


def test_a_skipped_invariant_is_not_checked():
    """A leader that counts entries not yet flushed breaks nothing else in a run without
    crashes: with majority-holds-high-watermark skipped, the same broken run passes."""
    factory = BREAKAGES["majority-holds-high-watermark"].factory
    with pytest.raises(SimulationFailure, match=": majority-holds-high-watermark: leader "):
        Simulation(0, "none", core_factory=factory).run()
    Simulation(0, "none", invariants=[n for n in INVARIANTS if n != "majority-holds-high-watermark"],
               core_factory=factory).run()


def test_unknown_invariant_names_are_refused(capsys):
    with pytest.raises(ValueError, match="unknown invariant 'log-matchin'; one of single-leader-per-epoch, "):
        Simulation(0, "none", invariants=["log-matchin"])
    with pytest.raises(SystemExit) as exit_:
        main(["--seed", "0", "--skip", "log-matchin"])
    assert exit_.value.code == 2
    assert "invalid choice: 'log-matchin'" in capsys.readouterr().err


def test_the_command_line_skips_what_it_is_told(capsys):
    """A failing seed's replay command names the invariants it skipped; run as printed, it
    fails the same way."""
    factory = BREAKAGES["majority-holds-high-watermark"].factory
    with pytest.raises(SimulationFailure) as failure:
        Simulation(0, "none", invariants=["majority-holds-high-watermark"], core_factory=factory).run()
    replay = str(failure.value).split("replay: ")[1].split("\n")[0].split()
    assert replay[:3] == [".venv/bin/python", "-m", "kraft.sim"]
    assert main(replay[3:]) == 0  # the real core passes what the broken one failed
    out = capsys.readouterr().out
    assert out.startswith("1 seeds in") and ": 0 failed" in out


def test_log_matching_is_checked_as_logs_grow():
    """Two nodes holding the same batch (base offset and epoch) after different histories,
    or different batches under the same base offset and epoch, fail the run."""

    def append(node, base, epoch, value):  # a fixed timestamp: equal records make equal batches
        node.log.append_as_follower(
            build_batch([(None, value)], base_offset=base, partition_leader_epoch=epoch, timestamp=1))

    sim, check = Simulation(0, "none"), LogMatching()
    one, two, three = (sim.nodes[i] for i in (1, 2, 3))
    append(one, 0, 1, b"a")
    append(one, 1, 2, b"b")
    check.check_node(one)
    append(two, 0, 1, b"a")
    check.check_node(two)
    append(two, 1, 2, b"b")
    check.check_node(two)  # the same history: fine
    append(three, 0, 0, b"z")
    append(three, 1, 2, b"b")
    with pytest.raises(Violation, match="log-matching: node 3 holds a batch at offset 1 in epoch 2"):
        check.check_node(three)
    sim, check = Simulation(0, "none"), LogMatching()
    append(sim.nodes[1], 0, 1, b"a")
    check.check_node(sim.nodes[1])
    append(sim.nodes[2], 0, 1, b"x")
    with pytest.raises(Violation, match="log-matching: node 2 holds a batch at offset 0 in epoch 1"):
        check.check_node(sim.nodes[2])
