"""The metadata cache: the image every voter and observer holds, fed committed batches.

It applies committed batches strictly in offset order, loads snapshots, and serves reads
as (image, offset): an image is immutable, so a reader holds a consistent view for as long
as it likes while the cache moves on. No threads and no IO here: the Raft listener calls it.

It also counts what KIP-630's `metadata.snapshot.min.changed_records.ratio` needs: the
snapshot records modified or deleted since the latest snapshot (`changed_records`), against
the records that snapshot holds (`snapshot_records`).
"""

from collections.abc import Iterable

from kraft.metadata.collector import collector_paused
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.errors import NotCaughtUpError, OffsetOrderError
from kraft.metadata.image import MetadataImage
from kraft.metadata.snapshot import HasValue, decode_records, load_snapshot


class MetadataCache:
    def __init__(self) -> None:
        self._image = MetadataImage()
        self._changed: dict[tuple, int] = {}  # snapshot record key -> last offset it changed at
        self._snapshot_end = 0  # end offset of the latest snapshot (0: none)
        self._snapshot_records = 0

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def offset(self) -> int:
        """The last offset applied (-1 before any)."""
        return self._image.offset

    def read(self, min_offset: int = -1) -> MetadataImage:
        """The current image, provided it includes `min_offset` (a client that wrote at offset
        X reads its write with read(X)); its `offset` says exactly what it reflects."""
        if self._image.offset < min_offset:
            raise NotCaughtUpError(f"metadata is at offset {self._image.offset}, not yet at {min_offset}")
        return self._image

    def _check_next(self, base_offset: int, last_offset: int) -> None:
        expected = self._image.offset + 1
        if base_offset != expected or last_offset < base_offset:
            kind = "a gap" if base_offset > expected else "a regression" if base_offset < expected else "empty"
            raise OffsetOrderError(
                f"batch at offsets {base_offset}..{last_offset} after offset {self._image.offset}: {kind}; "
                f"the next batch must start at {expected}"
            )

    def apply_batch(
        self, records: Iterable[HasValue], *, base_offset: int, last_offset: int, epoch: int
    ) -> MetadataImage:
        """Applies one committed data batch (Kafka records holding metadata record values).

        The batch applies whole or not at all: a record that does not decode or contradicts
        the image raises, and the cache keeps its image and offset.
        """
        self._check_next(base_offset, last_offset)
        with collector_paused():  # see kraft.metadata.collector: images hold no cycles
            delta = MetadataDelta(self._image).replay_all(decode_records(records))
            self._image = delta.apply(last_offset, epoch)
        for key in delta.changed:
            self._changed[key] = last_offset
        return self._image

    def advance(self, *, base_offset: int, last_offset: int, epoch: int) -> None:
        """Moves past a batch that holds no metadata (a control batch: LeaderChange), so the
        next data batch is not taken for a gap."""
        self._check_next(base_offset, last_offset)
        self._image = MetadataDelta(self._image).apply(last_offset, epoch)

    def load_snapshot(self, records: Iterable[HasValue], *, end_offset: int, epoch: int) -> MetadataImage:
        """Replaces the image with the snapshot (end_offset, epoch); the next batch must
        start at end_offset. The image is swapped only once every record has loaded."""
        self._image = load_snapshot(records, end_offset=end_offset, epoch=epoch)
        self._changed.clear()
        self._snapshot_end = end_offset
        self._snapshot_records = self._image.record_count()
        return self._image

    def snapshot_written(self, image: MetadataImage) -> None:
        """Tells the cache a snapshot of `image` (an image it served) was frozen: changes up
        to it no longer count, those applied since still do."""
        if image.end_offset <= self._snapshot_end:
            return
        self._snapshot_end = image.end_offset
        self._snapshot_records = image.record_count()
        self._changed = {key: at for key, at in self._changed.items() if at >= image.end_offset}

    @property
    def snapshot_records(self) -> int:
        """Records in the latest snapshot (0 if there is none)."""
        return self._snapshot_records

    @property
    def changed_records(self) -> int:
        """Snapshot records modified or deleted since the latest snapshot; records added since
        do not count until they too are modified or deleted (KIP-630, "When to Snapshot")."""
        return len(self._changed)

    @property
    def changed_ratio(self) -> float:
        """changed_records / snapshot_records; 1.0 when there is no snapshot to compare with
        (everything in the log is then new), so the byte threshold alone decides."""
        if not self._snapshot_records:
            return 1.0
        return self.changed_records / self._snapshot_records
