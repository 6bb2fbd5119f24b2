"""What a fetch hands out: records, whole record batches, and a snapshot downloaded whole.

A consumer made with `snapshot_fallback=True` goes on from the snapshot the log starts at
when its position is below the log start (KIP-630, as a replica does): `SnapshotDownload`
takes the snapshot's FetchSnapshot chunks into an unlinked temporary file and hands out
its batches only once all of it is in and checked, never part of a state.
"""

import mmap
import tempfile
from dataclasses import dataclass

from kraft.client.client_errors import ConsumerError
from kraft.client.positions import OffsetAndEpoch, TopicPartition
from kraft.records import RecordBatch, RecordError, read_batches
from kraft.records.control import ControlType, parse_control_key


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    is_control: bool = False
    snapshot: OffsetAndEpoch | None = None  # the snapshot's id (end offset, epoch) for its records


@dataclass(frozen=True)
class FetchedBatches:
    """Whole record batches fetched for one partition, in offset order; records below
    `start` (in the first batch) had been consumed before. `end` is the position after them.
    With `snapshot` (its id: end offset and epoch), the batches are a whole snapshot's, with
    the snapshot's own offsets (from 0); its records stand at offset end - 1."""

    tp: TopicPartition
    start: int
    batches: list[RecordBatch]
    end: OffsetAndEpoch
    snapshot: OffsetAndEpoch | None = None


class SnapshotDownload:
    """A snapshot being fetched: its id and the bytes so far, in an unlinked temporary file
    (a metadata snapshot can be hundreds of MiB), mapped once complete."""

    def __init__(self, snapshot_id: OffsetAndEpoch) -> None:
        self.id = snapshot_id
        self.file = tempfile.TemporaryFile(prefix="kraft-snapshot-")
        self.size: int | None = None

    @property
    def position(self) -> int:
        return self.file.tell()

    def batches(self, tp: TopicPartition) -> list[RecordBatch]:
        """The complete snapshot's batches, checked: CRCs, offsets from 0, a control batch
        first (SnapshotHeader) and last (SnapshotFooter), every batch in the snapshot's epoch."""
        self.file.flush()
        size = self.position
        data = memoryview(mmap.mmap(self.file.fileno(), size, access=mmap.ACCESS_READ)) if size else b""
        self.close()
        try:
            batches = list(read_batches(data, expected_offset=0))
            kinds = [_control_type(b) for b in (batches[0], batches[-1])] if batches else []
        except (RecordError, ValueError) as e:
            raise ConsumerError(f"{tp}: snapshot {snapshot_name(self.id)} is corrupt: {e}") from None
        if kinds != [ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER] or any(
                b.header.partition_leader_epoch != self.id.leader_epoch for b in batches):
            raise ConsumerError(f"{tp}: snapshot {snapshot_name(self.id)} is not one whole snapshot of epoch "
                                f"{self.id.leader_epoch} (SnapshotHeader first, SnapshotFooter last)")
        return batches

    def close(self) -> None:
        self.file.close()


def snapshot_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"(end offset {snapshot_id.offset}, epoch {snapshot_id.leader_epoch})"


def _control_type(batch: RecordBatch) -> ControlType | None:
    if not batch.header.is_control:
        return None
    records = batch.records()
    return ControlType(parse_control_key(records[0].key)) if records else None
