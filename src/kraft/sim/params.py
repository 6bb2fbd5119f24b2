"""The shape of one simulated run: its size, its schedule and its bounds."""

from dataclasses import dataclass


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
    pre_vote: bool = True  # KIP-996; off only to measure what it saves
    # KIP-853: the voters come from a bootstrap snapshot, and an operator adds and removes
    # voters while the faults happen (the set moves between `voters` and `voters` + 1).
    membership: bool = False
    change_every_ms: int = 600

    @property
    def end_ms(self) -> int:
        return self.fault_ms + self.settle_ms

    @property
    def quiet_from_ms(self) -> int:
        """The end of the run is quiet (no client, no idle writes), so every node can catch up."""
        return self.end_ms - self.quiet_ms
