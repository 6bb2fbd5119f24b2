"""Where a consumer is in a log, and KIP-320's rule for whether the leader's log still holds it.

A position is the next offset to read and the leader epoch of the record before it. Both of
the leader's answers that can say a log diverged, OffsetForLeaderEpoch (after a leader change
or a seek with an epoch) and a Fetch's DivergingEpoch, go through the one rule here:

* the log holds the position iff the leader's largest epoch <= ours is ours and ends at
  or after the position (the test Kafka's leader applies to LastFetchedEpoch);
* otherwise the first offset known to diverge is min(where that epoch ends, position),
  with the leader's epoch there. The consumer never moves forward on such an answer: an
  older epoch ending past the position still means the record before it is not the one
  we read (Kafka's consumer, which looks at the end offset only, would read on there).
"""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class OffsetAndEpoch:
    """A position to store externally: the next offset, and the epoch of the record before it."""

    offset: int
    leader_epoch: int | None


def holds(position: int, epoch: int, end_offset: int, end_epoch: int) -> bool:
    """Whether a leader whose largest epoch <= `epoch` is `end_epoch`, ending at
    `end_offset` (its OffsetForLeaderEpoch answer), still holds everything read before
    `position` in `epoch`: the same test its Fetch applies to LastFetchedEpoch."""
    return 0 <= epoch <= end_epoch and end_offset >= position


def diverged_at(position: int, end_offset: int, end_epoch: int) -> OffsetAndEpoch | None:
    """Where a log that does not hold `position` diverges from what was read: the end of
    the leader's epoch, never past the position (an answer cannot move a consumer forward
    over records it has not read); None if the leader cannot say."""
    if end_offset < 0 or end_epoch < 0:
        return None
    return OffsetAndEpoch(min(end_offset, position), end_epoch)
