"""The deterministic simulator: virtual time, a faulty network and disk, killable nodes,
named invariants, one seed."""

from kraft.sim.simulation import (
    INVARIANTS,
    MIXES,
    WORKLOADS,
    SimParams,
    Simulation,
    SimulationFailure,
    replay_command,
)

__all__ = ["INVARIANTS", "MIXES", "WORKLOADS", "SimParams", "Simulation", "SimulationFailure", "replay_command"]
