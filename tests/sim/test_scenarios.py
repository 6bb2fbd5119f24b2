"""The scenarios pre-vote (KIP-996) is for: a leader lost for good, a follower cut off and
rejoining, every node restarting at once. The real core passes each; a core whose
survivors never elect (they kept following the dead leader every voter named) fails
leader-loss; and pre-vote burns fewer epochs than campaigning at once where a voter is cut
off. Seeds are fixed, so the figures are the same on every run."""

import pytest

from kraft.raft.quorum_state import QuorumState
from kraft.raft.roles import Role
from kraft.sim import SimParams, Simulation, SimulationFailure

SEEDS = range(4)


@pytest.mark.parametrize("mix", ["leader-loss", "rejoin", "restart-all"])
def test_the_real_core_passes_each_scenario(mix):
    for seed in SEEDS:
        Simulation(seed, mix).run()


def test_survivors_that_keep_following_a_dead_leader_fail_leader_loss(monkeypatch):
    real = QuorumState.learn_leader

    def follows_any_named_leader(self, leader_id, epoch, now):
        if epoch == self.epoch and 0 <= leader_id != self.node_id and self.role == Role.PROSPECTIVE:
            self.become_follower(epoch, leader_id, now)
            return True
        return real(self, leader_id, epoch, now)

    monkeypatch.setattr(QuorumState, "learn_leader", follows_any_named_leader)
    with pytest.raises(SimulationFailure, match="liveness-after-heal: nothing was committed after the faults healed"):
        Simulation(0, "leader-loss").run()


def epochs(mix: str, pre_vote: bool) -> int:
    return sum(Simulation(seed, mix, SimParams(pre_vote=pre_vote)).run().epochs for seed in SEEDS)


def test_a_voter_cut_off_and_rejoining_burns_fewer_epochs_with_pre_vote():
    with_pre_vote, without = epochs("rejoin", True), epochs("rejoin", False)
    assert with_pre_vote < without, (with_pre_vote, without)
