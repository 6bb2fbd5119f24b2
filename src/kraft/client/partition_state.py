"""One assigned partition as the consumer sees it: its position, its leader, what is in flight.

The position moves only through these methods: `seek` (to a known offset and epoch),
`reset_to` (unknown until ListOffsets finds it by the reset policy) and `advance` (past
records handed out). Seeking or resetting drops whatever was fetched for the old position,
records buffered and a snapshot half downloaded alike.
"""

from dataclasses import dataclass, field
from typing import Literal

from kraft.client.fetched import ConsumerRecord, SnapshotDownload
from kraft.client.positions import OffsetAndEpoch

NO_EPOCH = -1

Reset = Literal["earliest", "latest"]


@dataclass
class PartitionState:
    position: int | None = None  # the next offset poll() returns; None: to be reset by the policy
    last_epoch: int | None = None  # epoch of the record before it (last consumed, or given to seek)
    leader: int | None = None
    leader_epoch: int = NO_EPOCH  # the partition leader's epoch as of our metadata
    validated_epoch: int = NO_EPOCH  # the leader epoch our position was checked against
    high_watermark: int = -1
    reset: Reset | None = None
    buffered: list[ConsumerRecord] = field(default_factory=list)  # fetched, not yet returned by poll()
    buffered_end: OffsetAndEpoch | None = None  # the position once `buffered` is all returned
    download: SnapshotDownload | None = None  # the snapshot being fetched (snapshot_fallback)

    def seek(self, offset: int, epoch: int | None, validated_epoch: int = NO_EPOCH) -> None:
        self.position, self.last_epoch, self.reset, self.validated_epoch = offset, epoch, None, validated_epoch
        self.buffered, self.buffered_end = [], None
        self.drop_download()

    def reset_to(self, policy: Reset | None) -> None:
        """The position is unknown until ListOffsets finds it by `policy` (None: never)."""
        self.position, self.reset = None, policy
        self.buffered, self.buffered_end = [], None
        self.drop_download()

    def drop_download(self) -> None:
        if self.download is not None:
            self.download.close()
            self.download = None

    def advance(self, to: OffsetAndEpoch) -> None:
        self.position, self.last_epoch = to.offset, to.leader_epoch

    @property
    def awaits_validation(self) -> bool:
        return self.position is not None and self.last_epoch is not None and self.validated_epoch != self.leader_epoch
