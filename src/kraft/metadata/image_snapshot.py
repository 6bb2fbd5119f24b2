"""Writing an image as a snapshot's records, and loading an image back from them.

A snapshot's data batches hold the framed values of `image_to_records(image)`, one
metadata record per Kafka record, with a null key. The snapshot file itself (header and
footer control batches, offsets, epochs, the .part and atomic rename) belongs to
`kraft.storage.snapshot`: hand `snapshot_records(image)` to its `SnapshotWriter.append`,
and `SnapshotReader.records()` to `load_snapshot`.
"""

from collections.abc import Iterable, Iterator
from typing import Protocol

from kraft.metadata.collector import collector_paused
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage, image_to_records
from kraft.metadata.records import MetadataRecord
from kraft.metadata.serde import decode_record, encode_record


class HasValue(Protocol):
    """A Kafka record as `kraft.records` decodes it; only its value matters here."""

    @property
    def value(self) -> bytes | None: ...


def snapshot_records(image: MetadataImage) -> Iterator[tuple[None, bytes]]:
    """(key, value) pairs of a snapshot of `image`, in its fixed order."""
    for record in image_to_records(image):
        yield None, encode_record(record)


def decode_records(records: Iterable[HasValue]) -> Iterator[MetadataRecord]:
    """The metadata records in Kafka records' values (MetadataRecordError for a bad one)."""
    for r in records:
        yield decode_record(r.value)


def image_from_records(records: Iterable[MetadataRecord], *, offset: int = -1, epoch: int = -1) -> MetadataImage:
    """The image a snapshot's records describe, as of `offset` (the snapshot's end offset - 1).

    The cyclic garbage collector is paused meanwhile: a large snapshot allocates millions of
    objects, none in a cycle, and each full collection would walk the growing image again
    (7 s of 18 s when loading a million partitions, measured)."""
    with collector_paused():
        return MetadataDelta(MetadataImage()).replay_all(records).apply(offset, epoch)


def load_snapshot(records: Iterable[HasValue], *, end_offset: int, epoch: int) -> MetadataImage:
    """The image in a snapshot whose id is (end_offset, epoch), from its Kafka records."""
    return image_from_records(decode_records(records), offset=end_offset - 1, epoch=epoch)
