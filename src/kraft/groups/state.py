"""The committed state of one `__consumer_offsets` partition: groups and offsets, from records.

`GroupsImage` is what the partition's records say, replayed by Kafka's rules (its
GroupMetadataManager and OffsetMetadataManager replay): a GroupMetadata value sets the
group, its tombstone removes it; an OffsetCommit value sets the (group, topic, partition)
offset, its tombstone removes it. A group exists while it has metadata or an offset: Kafka
creates a "simple" group (no protocol, no members) for offsets committed without group
management, and writes no metadata for it, so its offsets are all that say it exists.

Images are immutable (HAMT maps, as the metadata image): a snapshot job writes one on
another thread while commits go on, the leader's working image is the committed one plus
what it appended, and a reader keeps the image it was given. `GroupsCache` feeds committed
batches and snapshots in, in order, and counts what KIP-630's changed-records ratio needs.
"""

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from immutables import Map, MapMutation

from kraft.groups.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
    encode_key,
    encode_value,
)
from kraft.groups.wire import GroupRecordError
from kraft.statemachine.changed_records import ChangedRecords

TopicPartition = tuple[str, int]
GroupOffsets = Map[TopicPartition, OffsetCommitValue]
_NO_OFFSETS: GroupOffsets = Map()


@dataclass(frozen=True, slots=True)
class GroupsImage:
    groups: Map[str, GroupMetadataValue] = field(default_factory=Map)
    offsets: Map[str, GroupOffsets] = field(default_factory=Map)
    offset: int = -1  # the last log offset applied (-1: none)

    @property
    def end_offset(self) -> int:
        """A snapshot of this image holds every offset below this one."""
        return self.offset + 1

    def metadata(self, group_id: str) -> GroupMetadataValue | None:
        return self.groups.get(group_id)

    def offsets_of(self, group_id: str) -> GroupOffsets:
        return self.offsets.get(group_id, _NO_OFFSETS)

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups or group_id in self.offsets

    def group_ids(self) -> list[str]:
        """Every group, in order."""
        return sorted({*self.groups.keys(), *self.offsets.keys()})

    def record_count(self) -> int:
        """Records a snapshot of this image holds."""
        return len(self.groups) + sum(len(o) for o in self.offsets.values())

    def apply(self, records: Iterable[GroupRecord], last_offset: int) -> tuple["GroupsImage", list[Key]]:
        """The image after `records`, ending at `last_offset`, and the keys they modified or
        deleted (a key they created is not counted: KIP-630's changed records)."""
        groups = self.groups.mutate()
        offsets = self.offsets.mutate()
        touched: dict[str, MapMutation[TopicPartition, OffsetCommitValue]] = {}  # a group's offsets, mid-batch
        changed: list[Key] = []
        for key, value in records:
            if isinstance(key, OffsetCommitKey):
                partitions = touched.get(key.group)
                if partitions is None:
                    partitions = touched[key.group] = offsets.get(key.group, _NO_OFFSETS).mutate()
                tp = (key.topic, key.partition)
                existed = tp in partitions
                if value is None:
                    if existed:
                        del partitions[tp]
                else:
                    assert isinstance(value, OffsetCommitValue)  # decode_record pairs keys and values
                    partitions[tp] = value
                if existed:
                    changed.append(key)
            else:
                existed = key.group in groups
                if value is None:
                    if existed:
                        del groups[key.group]
                else:
                    assert isinstance(value, GroupMetadataValue)
                    groups[key.group] = value
                if existed:
                    changed.append(key)
        for group_id, partitions in touched.items():
            finished = partitions.finish()
            if len(finished):
                offsets[group_id] = finished
            elif group_id in offsets:
                del offsets[group_id]
        return GroupsImage(groups.finish(), offsets.finish(), last_offset), changed

    def snapshot_records(self) -> Iterator[tuple[bytes, bytes]]:
        """The image as records, groups in order and each group's metadata before its offsets
        in (topic, partition) order: the same image always gives the same snapshot bytes."""
        for group_id in self.group_ids():
            metadata = self.groups.get(group_id)
            if metadata is not None:
                yield encode_key(GroupMetadataKey(group_id)), encode_value(metadata)
            partitions = self.offsets.get(group_id)
            if partitions is not None:
                for (topic, partition), value in sorted(partitions.items()):
                    yield encode_key(OffsetCommitKey(group_id, topic, partition)), encode_value(value)


class HasKeyValue(Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


def decode_all(records: Iterable[HasKeyValue], where: str) -> list[GroupRecord]:
    """Decodes log records; one that does not read raises GroupRecordError saying `where`."""
    try:
        return [decode_record(r.key, r.value) for r in records]
    except GroupRecordError as e:
        raise GroupRecordError(f"{where}: {e}") from None


class GroupsCache:
    """The committed image of one partition, fed in offset order, and what KIP-630's
    `metadata.snapshot.min.changed_records.ratio` counts: the latest snapshot's records
    modified or deleted since, against the records it holds."""

    def __init__(self, name: str = "__consumer_offsets") -> None:
        self.name = name
        self.image = GroupsImage()
        self._next_offset = 0
        self.changes = ChangedRecords()

    @property
    def offset(self) -> int:
        """The last offset applied (-1 before any)."""
        return self.image.offset

    def _check_next(self, base_offset: int, last_offset: int) -> None:
        if base_offset != self._next_offset or last_offset < base_offset:
            raise GroupRecordError(f"{self.name}: a batch of offsets {base_offset}-{last_offset} came "
                                   f"where offset {self._next_offset} was expected")

    def apply_batch(self, records: Iterable[HasKeyValue], *, base_offset: int, last_offset: int) -> None:
        self._check_next(base_offset, last_offset)
        decoded = decode_all(records, f"{self.name} at offsets {base_offset}-{last_offset}")
        self.image, changed = self.image.apply(decoded, last_offset)
        self.changes.changed(changed, last_offset)
        self._next_offset = last_offset + 1

    def adopt(self, image: GroupsImage, changed: Iterable[Hashable], *, base_offset: int) -> None:
        """Takes `image` as the one a batch ending where it ends makes: the leader's own batch,
        which it built its working image with (statemachine/own_batches.py)."""
        self._check_next(base_offset, image.offset)
        self.image = image
        self.changes.changed(changed, image.offset)
        self._next_offset = image.offset + 1

    def advance(self, *, base_offset: int, last_offset: int) -> None:
        """Moves past a batch holding no group records (a control batch: LeaderChange)."""
        self._check_next(base_offset, last_offset)
        self.image = GroupsImage(self.image.groups, self.image.offsets, last_offset)
        self._next_offset = last_offset + 1

    def load_snapshot(self, records: Iterable[HasKeyValue], *, end_offset: int) -> GroupsImage:
        """Replaces the image with the snapshot's, once every record has loaded."""
        decoded = decode_all(records, f"{self.name} snapshot ending at {end_offset}")
        self.image, _ = GroupsImage().apply(decoded, end_offset - 1)
        self._next_offset = end_offset
        self.changes.loaded(end_offset, self.image.record_count())
        return self.image

    def snapshot_written(self, image: GroupsImage) -> None:
        """A snapshot of `image` was frozen."""
        self.changes.written(image.end_offset, image.record_count())

    @property
    def changed_ratio(self) -> float:
        return self.changes.ratio
