"""What a leader built for the batches it appended, taken at their commit instead of a replay.

A leader's state machine applies each batch to its working image when it appends it, to
validate the next operation against; when the batch commits, the committed image it would get
by decoding and replaying those records is that same image. Kafka's controller and group
coordinator do not replay their own records at commit either (their timeline structures only
move their committed point). A committed batch is this leader's own when its offsets are
exactly those of its appends, in the epoch they were appended in (Raft's log matching: the
same offset and epoch hold the same records); the core may have put several appends in one
batch. Any other batch (another leader's, or one written before this node led) is replayed.
"""

from collections import deque
from collections.abc import Collection, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kraft.raft import CommittedBatch

Image = TypeVar("Image")


@dataclass(frozen=True, slots=True)
class _Built(Generic[Image]):
    base_offset: int
    last_offset: int
    epoch: int
    image: Image  # the working image once this append applied
    changed: Collection[Hashable]  # the keys it modified or deleted (KIP-630's changed records)


class OwnBatches(Generic[Image]):
    def __init__(self) -> None:
        self._built: deque[_Built[Image]] = deque()

    def appended(self, base_offset: int, last_offset: int, epoch: int, image: Image,
                 changed: Collection[Hashable]) -> None:
        self._built.append(_Built(base_offset, last_offset, epoch, image, changed))

    def committed(self, batch: CommittedBatch) -> tuple[Image, list[Hashable]] | None:
        """The image `batch` makes and the keys it changed, if it is this leader's own; None if
        it must be replayed. Forgets every append at or below its last offset."""
        own: list[_Built[Image]] = []
        while self._built and self._built[0].last_offset <= batch.last_offset:
            own.append(self._built.popleft())
        if (batch.control or not own or own[0].base_offset != batch.base_offset
                or own[-1].last_offset != batch.last_offset or any(b.epoch != batch.epoch for b in own)):
            return None
        return own[-1].image, [key for b in own for key in b.changed]

    def clear(self) -> None:
        """The leadership ended or the state was replaced: nothing built is this node's to take."""
        self._built.clear()
