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


class RecordBatchTooLargeError(RaftError):
    """append() of one call's records that do not fit in one batch.

    The records of one append() always go out in one batch, so that what one caller wrote
    together (a controller operation) commits whole or not at all; a call that cannot fit is
    refused before anything is queued. Kafka's RecordBatchTooLargeException.
    """

    def __init__(self, records: int, size: int, limit: int) -> None:
        super().__init__(
            f"{records} records take {size} bytes as one batch, more than the batch limit of {limit} bytes; "
            f"split them over several append() calls"
        )
        self.records = records
        self.size = size
        self.limit = limit


class InvariantViolation(RaftError):
    """Something Raft's safety forbids was asked of this replica; it stops rather than comply."""
