"""The deterministic simulator: virtual time, a faulty network, killable nodes, one seed."""

from kraft.sim.simulation import MIXES, SimParams, Simulation, SimulationFailure, replay_command

__all__ = ["MIXES", "SimParams", "Simulation", "SimulationFailure", "replay_command"]
