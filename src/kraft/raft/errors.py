"""Errors the Raft core raises to its callers."""


class RaftError(Exception):
    pass


class NotLeaderError(RaftError):
    """append() on a replica that is not the leader; says who is, if known."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        who = f"node {leader_id}" if leader_id is not None else "not known"
        super().__init__(f"not the leader (epoch {epoch}; the leader is {who})")
        self.leader_id = leader_id
        self.epoch = epoch


class InvariantViolation(RaftError):
    """Something Raft's safety forbids was asked of this replica; it stops rather than comply."""
