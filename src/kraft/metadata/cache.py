"""The metadata cache: the image every voter and observer holds, fed committed batches.

It applies committed batches strictly in offset order, loads snapshots, and serves reads
as (image, offset): an image is immutable, so a reader holds a consistent view for as long
as it likes while the cache moves on. No threads and no IO here: the Raft listener calls it.

It also counts what KIP-630's `metadata.snapshot.min.changed_records.ratio` needs
(`changes`, the raft layer's ChangedRecords): the snapshot records modified or deleted since
the latest snapshot, against the records that snapshot holds.

Transactions replay as Kafka's MetadataBatchLoader replays them: the records between a
BeginTransactionRecord and its EndTransactionRecord, in one batch or many, apply together
when the End is read, and an AbortTransactionRecord drops them. Until then the image stays
where it was before the Begin (records before the Begin in its batch apply on their own,
so that image may end inside a batch: `batch_aligned` says whether a snapshot may be taken
of it). A record that does not decode or contradicts the image stops the replay with a
ReplayError naming its offset, as Kafka's loader stops.

The file tools read other nodes' files as Kafka's tools read them, and a cache given
`on_unapplied` does so: a record that contradicts the image is left out (the rest of its
batch applies) and handed to `on_unapplied` with why, as Kafka's MetadataLoader logs such a
record and goes on; and a snapshot is replayed as a log is, so a transaction in it applies
at its end. A replica's own cache has no `on_unapplied`: it stops.
"""

from collections.abc import Callable, Hashable, Iterable

from kraft.metadata.collector import collector_paused
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage
from kraft.metadata.image_snapshot import HasValue, load_snapshot
from kraft.metadata.metadata_errors import (
    InvalidRecordError,
    MetadataRecordError,
    NotCaughtUpError,
    OffsetOrderError,
    ReplayError,
)
from kraft.metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    MetadataRecord,
)
from kraft.metadata.serde import decode_record
from kraft.statemachine.changed_records import ChangedRecords

Unapplied = Callable[[int, MetadataRecord, InvalidRecordError], None]  # offset, record, why


class _Delta:
    """A delta being built and, when replaying tolerantly, the records it holds: to leave a
    record out, the delta is built again without it (a record that fails may have changed
    the delta before failing)."""

    def __init__(self, image: MetadataImage, on_unapplied: Unapplied | None) -> None:
        self.image, self.delta, self.held = image, MetadataDelta(image), list[MetadataRecord]()
        self.on_unapplied = on_unapplied

    def replay(self, record: MetadataRecord, offset: int) -> None:
        try:
            self.delta.replay(record)
        except InvalidRecordError as e:
            if self.on_unapplied is None:
                raise ReplayError(offset, e) from e
            self.on_unapplied(offset, record, e)
            self.delta = MetadataDelta(self.image).replay_all(self.held)
            return
        if self.on_unapplied is not None:
            self.held.append(record)


class MetadataCache:
    def __init__(self, on_unapplied: Unapplied | None = None) -> None:
        self.on_unapplied = on_unapplied  # None: a replica's cache, which stops (see above)
        self._image = MetadataImage()
        self.changes = ChangedRecords()
        self._next_offset = 0  # the offset the next batch must start at
        # Records since an unfinished Begin, with their offsets (None: no transaction open).
        self._transaction: tuple[tuple[int, MetadataRecord], ...] | None = None
        self._aligned = True  # the image ends where a batch ends

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

    @property
    def batch_aligned(self) -> bool:
        """Whether the image ends on a batch boundary (not inside a transaction's first batch),
        so a snapshot of it can have an id."""
        return self._aligned

    @property
    def in_transaction(self) -> bool:
        return self._transaction is not None

    def drop_transaction(self) -> None:
        """Forgets an open transaction's records, as an AbortTransactionRecord would: for a
        tool that skips a batch the transaction could not apply and reads on."""
        self._transaction = None

    def _check_next(self, base_offset: int, last_offset: int) -> None:
        expected = self._next_offset
        if base_offset != expected or last_offset < base_offset:
            kind = "a gap" if base_offset > expected else "a regression" if base_offset < expected else "empty"
            raise OffsetOrderError(
                f"batch at offsets {base_offset}..{last_offset} after offset {expected - 1}: {kind}; "
                f"the next batch must start at {expected}"
            )

    def apply_batch(
        self, records: Iterable[HasValue], *, base_offset: int, last_offset: int, epoch: int
    ) -> MetadataImage:
        """Applies one committed data batch (Kafka records holding metadata record values).

        The batch applies whole or not at all: a record that does not decode or contradicts
        the image raises ReplayError naming it, and the cache keeps its image and offset.
        """
        self._check_next(base_offset, last_offset)
        with collector_paused():  # see kraft.metadata.collector: images hold no cycles
            try:
                image, transaction, aligned, changed = self._replay(records, base_offset, last_offset, epoch)
            except (MetadataRecordError, InvalidRecordError) as e:
                raise ReplayError(base_offset, e) from e
        self._image, self._transaction, self._aligned = image, transaction, aligned
        self._next_offset = last_offset + 1
        self.changes.changed(changed, last_offset)
        return self._image

    def _replay(
        self, records: Iterable[HasValue], base_offset: int, last_offset: int, epoch: int
    ) -> tuple[MetadataImage, tuple[tuple[int, MetadataRecord], ...] | None, bool, set[tuple]]:
        """(image, transaction still open, image batch-aligned, changed keys) after a batch.
        Nothing of the cache's changes here: a batch that raises leaves it as it was, an
        open transaction included (its records are kept apart, and replayed at its end)."""
        image, aligned, changed = self._image, self._aligned, set()
        delta = _Delta(image, self.on_unapplied)
        pending = None if self._transaction is None else list(self._transaction)
        replayed = False  # records of this batch in `delta`
        for offset, r in enumerate(records, base_offset):
            try:
                record = decode_record(r.value)
            except MetadataRecordError as e:
                raise ReplayError(offset, e) from e
            kind = type(record)
            if kind is BeginTransactionRecord:
                if pending is not None:
                    raise ReplayError(offset, "a BeginTransactionRecord inside a transaction")
                if replayed:  # what came before it in this batch applies on its own
                    image, aligned = delta.delta.apply(offset - 1, epoch), False
                    changed |= delta.delta.changed
                    delta, replayed = _Delta(image, self.on_unapplied), False
                pending = []
            elif kind is EndTransactionRecord or kind is AbortTransactionRecord:
                if pending is None:
                    raise ReplayError(offset, f"a {kind.__name__} without a BeginTransactionRecord")
                if kind is EndTransactionRecord:
                    for at, held in pending:
                        delta.replay(held, at)
                    replayed = replayed or bool(pending)
                pending = None
            elif pending is not None:
                pending.append((offset, record))
            else:
                delta.replay(record, offset)
                replayed = True
        if pending is not None:
            return image, tuple(pending), aligned, changed
        return delta.delta.apply(last_offset, epoch), None, True, changed | delta.delta.changed

    def adopt(self, image: MetadataImage, changed: Iterable[Hashable], *, base_offset: int) -> None:
        """Takes `image` as the one a batch ending where it ends makes: the active controller's
        own batch, which it built its working image with (statemachine/own_batches.py). Its
        batches hold no transaction, and none may be open."""
        assert self._transaction is None, "a batch replayed inside a transaction is never adopted"
        self._check_next(base_offset, image.offset)
        self._image, self._aligned = image, True
        self._next_offset = image.offset + 1
        self.changes.changed(changed, image.offset)

    def advance(self, *, base_offset: int, last_offset: int, epoch: int) -> None:
        """Moves past a batch that holds no metadata (a control batch: LeaderChange), so the
        next data batch is not taken for a gap."""
        self._check_next(base_offset, last_offset)
        self._next_offset = last_offset + 1
        if self._transaction is None:
            self._image = MetadataDelta(self._image).apply(last_offset, epoch)

    def load_snapshot(self, records: Iterable[HasValue], *, end_offset: int, epoch: int) -> MetadataImage:
        """Replaces the image with the snapshot (end_offset, epoch); the next batch must
        start at end_offset. The image is swapped only once every record has loaded. A
        tolerant cache replays the snapshot's records as a log's (Kafka's shell reads a
        snapshot so), a transaction left open at its end going on into the log after it."""
        if self.on_unapplied is None:
            self._image, transaction = load_snapshot(records, end_offset=end_offset, epoch=epoch), None
        else:
            self._image, self._transaction = MetadataImage(), None
            with collector_paused():
                try:
                    self._image, transaction, _, _ = self._replay(records, 0, end_offset - 1, epoch)
                except (MetadataRecordError, InvalidRecordError) as e:
                    raise ReplayError(0, e) from e
        self._next_offset = end_offset
        self._transaction, self._aligned = transaction, True
        self.changes.loaded(end_offset, self._image.record_count())
        return self._image

    def snapshot_written(self, image: MetadataImage) -> None:
        """Tells the cache a snapshot of `image` (an image it served) was frozen."""
        self.changes.written(image.end_offset, image.record_count())

    @property
    def changed_ratio(self) -> float:
        return self.changes.ratio
