"""The simulator: 300 seeds across every fault mix in `make test`, determinism, and proof
that its checks catch broken cores (a checker that never fails proves nothing)."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import RaftCore
from kraft.raft import messages as m
from kraft.sim import MIXES, Simulation, SimulationFailure

SEEDS = 360  # 30 of each fault mix, half replicating a counter, half the cluster metadata
CHUNK = 12


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK), ids=lambda s: f"seeds{s}-{s + CHUNK - 1}")
def test_seeds_across_every_fault_mix(first):
    workload = "counter" if first // CHUNK % 2 == 0 else "metadata"
    for seed in range(first, first + CHUNK):
        Simulation(seed, MIXES[seed % len(MIXES)], workload=workload).run()


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

    def eager(core):
        flushed = core.log.last_flushed_offset
        core.log._flushed = core.log.end_offset  # pretend everything is on disk
        try:
            return original(core)
        finally:
            core.log._flushed = flushed

    monkeypatch.setattr(RaftCore, "_advance_high_watermark", eager)
    failure = first_failure(["crash"])
    assert failure is not None and ("on disk" in failure or "committed as" in failure)
