"""The simulator: 351 seeds across every fault mix in `make test`, determinism, and proof
that its checks catch broken cores (a checker that never fails proves nothing)."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import RaftCore
from kraft.raft import messages as m
from kraft.records import build_batch
from kraft.sim import MIXES, SimParams, Simulation, SimulationFailure

CHUNK = len(MIXES)  # one seed of each fault mix per test
# 325 seeds of three voters and 26 of five, every mix in each chunk; chunks alternate
# between replicating a counter and the cluster metadata. A five-voter seed costs about
# twice a three-voter one.
CHUNKS = [(first, 3) for first in range(0, 25 * CHUNK, CHUNK)] + [(10_000 + first, 5) for first in (0, CHUNK)]


@pytest.mark.parametrize("first,voters", CHUNKS, ids=lambda v: f"{v}" if isinstance(v, int) else v)
def test_seeds_across_every_fault_mix(first, voters):
    workload = "counter" if first // CHUNK % 2 == 0 else "metadata"
    for seed in range(first, first + CHUNK):
        Simulation(seed, MIXES[seed % len(MIXES)], SimParams(voters=voters), workload=workload).run()


def test_a_seed_replays_exactly():
    a = Simulation(42, "all").run()
    b = Simulation(42, "all").run()
    assert (a.events, a.elections, a.appends, a.acknowledged, a.dropped) == (
        b.events, b.elections, b.appends, b.acknowledged, b.dropped,
    )


def test_every_mix_makes_progress_and_faults_happen():
    stats = {mix: Simulation(7, mix).run() for mix in MIXES}
    assert all(s.acknowledged > 50 and s.snapshots > 5 for s in stats.values())
    assert stats["crash"].kills > 0 and stats["drop"].dropped > 0 and stats["disk-loss"].disks_lost > 0
    assert stats["partition"].elections >= 1
    assert stats["resign"].resignations > 0 and stats["resign"].elections > stats["none"].elections
    assert stats["late-join"].snapshots_fetched > 0, "the late nodes caught up by snapshot"
    assert stats["disk-loss"].snapshots_fetched > 0, "the wiped nodes caught up by snapshot"


def test_log_matching_is_checked_as_logs_grow():
    """Two nodes holding the same batch (base offset and epoch) after different histories,
    or different batches under the same base offset and epoch, fail the run."""

    def append(node, base, epoch, value):  # a fixed timestamp: equal records make equal batches
        node.log.append_as_follower(
            build_batch([(None, value)], base_offset=base, partition_leader_epoch=epoch, timestamp=1))

    def check(sim, node):
        sim._check_log_matching(node)

    sim = Simulation(0, "none")
    one, two, three = (sim.nodes[i] for i in (1, 2, 3))
    append(one, 0, 1, b"a")
    append(one, 1, 2, b"b")
    check(sim, one)
    append(two, 0, 1, b"a")
    check(sim, two)
    append(two, 1, 2, b"b")
    check(sim, two)  # the same history: fine
    append(three, 0, 0, b"z")
    append(three, 1, 2, b"b")
    with pytest.raises(SimulationFailure, match="log matching: node 3 holds a batch at offset 1 in epoch 2"):
        check(sim, three)
    sim = Simulation(0, "none")
    append(sim.nodes[1], 0, 1, b"a")
    check(sim, sim.nodes[1])
    append(sim.nodes[2], 0, 1, b"x")
    with pytest.raises(SimulationFailure, match="log matching: node 2 holds a batch at offset 0 in epoch 1"):
        check(sim, sim.nodes[2])


def test_the_metadata_workload_commits_operations_and_refuses_bad_ones():
    sim = Simulation(3, "crash", workload="metadata")
    stats = sim.run()
    assert sim.workload.committed_ops > 50 and sim.workload.refused > 20 and stats.snapshots > 5


def first_failure(mixes, seeds=60):
    for seed in range(seeds):
        for mix in mixes:
            try:
                Simulation(seed, mix).run()
            except SimulationFailure as e:
                return str(e)
    return None


def test_a_voter_that_grants_every_vote_is_caught(monkeypatch):
    """Voting twice in an epoch, or for a stale log: caught as two leaders in one epoch, or
    as a new leader that lacks committed entries (a follower refusing to truncate them)."""
    def promiscuous(core, handle, request, now):
        p = m.partition_of(request)
        if p.replica_epoch > core.epoch:
            core._become_unattached(p.replica_epoch, now)
        core._reply(handle, m.vote_response(ErrorCode.none, -1, core.epoch, True))

    monkeypatch.setitem(RaftCore._request_handlers, m.VoteRequest, promiscuous)
    failure = first_failure(["partition", "split", "isolate-leader"])
    assert failure is not None
    assert any(sign in failure for sign in ("two leaders in epoch", "claims it too", "below the high watermark"))
    assert "replay: .venv/bin/python -m kraft.sim --seed" in failure


def test_a_leader_that_counts_unflushed_entries_is_caught(monkeypatch):
    original = RaftCore._advance_high_watermark

    def eager(core, leader):
        flushed = core.log.last_flushed_offset
        core.log._flushed = core.log.end_offset  # pretend everything is on disk
        try:
            return original(core, leader)
        finally:
            core.log._flushed = flushed

    monkeypatch.setattr(RaftCore, "_advance_high_watermark", eager)
    failure = first_failure(["crash"])
    assert failure is not None and ("on disk" in failure or "committed as" in failure)
