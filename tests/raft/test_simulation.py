"""The simulator: 7 groups of seeds in `make test`, one seed of every fault mix in each
(126 seeds with 18 mixes), 8 seeds of a static quorum upgraded to a dynamic one under
faults, determinism, and the faults happening; `make simulate` runs thousands. That each
invariant catches a core broken for it: tests/sim/."""

import pytest

from kraft.sim import MIXES, SimParams, Simulation

CHUNK = len(MIXES)  # one seed of each fault mix per test
# 6 chunks of three voters and 1 of five, every mix in each chunk; chunks alternate
# between replicating a counter and the cluster metadata. A five-voter seed costs about
# twice a three-voter one. More seeds are make simulate's: here they were a sixth of the
# suite's CPU time.
CHUNKS = [(first, 3) for first in range(0, 6 * CHUNK, CHUNK)] + [(10_000, 5)]


@pytest.mark.parametrize("first,voters", CHUNKS, ids=lambda v: f"{v}" if isinstance(v, int) else v)
def test_seeds_across_every_fault_mix(first, voters):
    workload = "counter" if first // CHUNK % 2 == 0 else "metadata"
    for seed in range(first, first + CHUNK):
        Simulation(seed, MIXES[seed % len(MIXES)], SimParams(voters=voters), workload=workload).run()


# The upgrade family (make simulate's --upgrade) on the seeds it runs for the mixes that
# kill, cut and damage around the upgrade; make simulate runs every mix.
UPGRADE_MIXES = ("partition", "isolate-leader", "crash", "late-join", "disk-loss", "torn-write", "bit-flip",
                 "restart-all")


def test_static_quorums_upgraded_under_faults():
    """A static quorum's leader is asked to raise kraft.version to 1 while the faults run, and
    again while it refuses (a voter down or not yet heard from by this leader, no leader);
    every invariant holds across it, dynamic-after-upgrade among them, and once it commits
    the operator's AddRaftVoter and RemoveRaftVoter go through."""
    stats = [Simulation(MIXES.index(mix), mix, SimParams(upgrade=True),
                        workload=("counter", "metadata")[i % 2]).run() for i, mix in enumerate(UPGRADE_MIXES)]
    assert sum(s.upgrades for s in stats) >= len(UPGRADE_MIXES) - 2
    assert sum(s.upgrades_refused for s in stats) > 0, "refused while a voter was down or unheard"
    assert sum(s.voter_changes for s in stats) > 0 and all(s.acknowledged > 50 for s in stats)


def test_a_seed_replays_exactly():
    a = Simulation(42, "all").run()
    b = Simulation(42, "all").run()
    assert a.torn_writes + a.corruptions > 0
    assert a == b


def test_every_mix_makes_progress_and_faults_happen():
    stats = {mix: Simulation(7, mix).run() for mix in MIXES}
    assert all(s.acknowledged > 50 and s.snapshots > 5 for s in stats.values())
    assert stats["crash"].kills > 0 and stats["drop"].dropped > 0 and stats["disk-loss"].disks_lost > 0
    assert stats["partition"].elections >= 1
    assert stats["resign"].resignations > 0 and stats["resign"].elections > stats["none"].elections
    assert stats["late-join"].snapshots_fetched > 0, "the late nodes caught up by snapshot"
    assert stats["disk-loss"].snapshots_fetched > 0, "the wiped nodes caught up by snapshot"
    torn = stats["torn-write"]
    assert torn.torn_writes > 0 and torn.torn_batches > 0 and torn.torn_tails_cut == torn.torn_batches
    assert stats["bit-flip"].corruptions > 0 and stats["bit-flip"].refused_starts == stats["bit-flip"].corruptions
    others = [s for mix, s in stats.items() if mix not in ("torn-write", "bit-flip", "all")]
    assert all(s.torn_writes == s.corruptions == 0 for s in others)


def test_damaged_data_is_refused_and_the_node_replaced_or_kept_down():
    """Bit rot on a stopped node's flushed data: the node refuses to start on it. An
    observer's log is moved away and it catches up again from the quorum; a voter stays
    down (it cannot forget what it voted and acknowledged), and the rest carry on."""
    voters_down = observers_rebuilt = 0
    for seed in range(6):
        sim = Simulation(seed, "bit-flip")
        stats = sim.run()
        assert stats.corruptions > 0 and stats.refused_starts == stats.corruptions
        for node in sim.nodes.values():
            if node.node_id in sim.cluster.voter_ids:
                assert (node.refused is None) == node.alive
                voters_down += node.refused is not None
            else:
                assert node.alive and node.refused is None
                observers_rebuilt += node.disks - 1
        assert sum(n.refused is not None for n in sim.nodes.values()) <= (len(sim.cluster.voter_ids) - 1) // 2
    assert voters_down > 0 and observers_rebuilt > 0


def test_the_metadata_workload_commits_operations_and_refuses_bad_ones():
    sim = Simulation(3, "crash", workload="metadata")
    stats = sim.run()
    assert sim.workload.committed_ops > 50 and sim.workload.refused > 20 and stats.snapshots > 5
