"""The group coordinator's settings: Kafka's names and defaults."""

from dataclasses import dataclass, fields

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (not a setting)


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes (Kafka counts characters)
    commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms: an answer's records must commit within it
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"{f.name} must not be negative, got {getattr(self, f.name)}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
