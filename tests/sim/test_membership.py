"""The simulator with a dynamic quorum (KIP-853): an operator adds and removes voters while
every fault mix runs, and every invariant holds; a leader that counted its high watermark
with the voter set it was elected with, not the latest one in its log, is caught."""

import pytest

from kraft.raft.leader import LeaderState
from kraft.sim import SimParams, Simulation, SimulationFailure
from kraft.sim.faults import MIXES

MEMBERSHIP = SimParams(membership=True)


@pytest.mark.parametrize("mix", MIXES)
def test_voters_change_under_every_fault_mix(mix):
    # Four seeds: under the harshest mix ("all") a seed may end with every change refused
    # (a new leader changes nothing before it commits in its own epoch, and there it often
    # cannot), and the point here is that changes go through, not that one seed has any.
    stats = [Simulation(seed, mix, MEMBERSHIP).run() for seed in range(4)]
    assert sum(s.voter_changes for s in stats) > 0  # the changes happened, not only were refused
    assert sum(s.acknowledged for s in stats) > 0


def test_a_leader_that_ignores_the_latest_voter_set_is_caught(monkeypatch):
    monkeypatch.setattr(LeaderState, "set_voters", lambda self, voters: None)
    with pytest.raises(SimulationFailure, match="majority-holds-high-watermark"):
        for seed in range(4):
            Simulation(seed, "none", MEMBERSHIP).run()
