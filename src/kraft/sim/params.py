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
    # The kraft.version upgrade (Kafka 4.1): the quorum starts static (controller.quorum.voters,
    # which every node keeps saying across restarts), an operator raises kraft.version to 1
    # from `upgrade_from_ms` on, as often as it is refused, and once that commits adds and
    # removes voters as `membership` does.
    upgrade: bool = False
    upgrade_from_ms: tuple[int, int] = (300, 4000)  # when the operator first asks: drawn in this range
    upgrade_retry_ms: tuple[int, int] = (50, 500)  # and how long it waits before asking again

    def __post_init__(self) -> None:
        if self.membership and self.upgrade:
            raise ValueError("membership starts dynamic and upgrade starts static: choose one")

    @property
    def voters_move(self) -> bool:
        """Whether the voter set may change during the run (faults then spare any node some set names)."""
        return self.membership or self.upgrade

    @property
    def end_ms(self) -> int:
        return self.fault_ms + self.settle_ms

    @property
    def quiet_from_ms(self) -> int:
        """The end of the run is quiet (no client, no idle writes), so every node can catch up."""
        return self.end_ms - self.quiet_ms
