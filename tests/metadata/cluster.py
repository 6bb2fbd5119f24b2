"""A small cluster driven through the controller, for the metadata tests.

`Cluster` keeps what a metadata log would: every committed batch (its encoded values and
offsets), and the image after each. Tests replay those batches through the real cache and
write snapshots with the real snapshot files of kraft.storage.
"""

import random
from pathlib import Path

from kraft.metadata import MetadataCache, MetadataImage, apply_records, encode_record, snapshot_records
from kraft.metadata import operations as ctl
from kraft.metadata.operations import ControllerResult
from kraft.records import SimpleRecord, build_batch, read_batches
from kraft.storage.snapshot import SnapshotId, SnapshotReader, parse_snapshot_file_name
from kraft.storage.snapshot_store import FileSnapshotStore


class Cluster:
    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.image = MetadataImage()
        self.log: list[bytes] = []  # committed batches, as the log holds them
        self.images = [self.image]  # images[i]: the image after the first i batches

    def commit(self, result: ControllerResult, epoch: int = 1):
        """Appends the result's records as one batch and applies it; returns the response."""
        if result.records:
            base = self.image.offset + 1
            values = [encode_record(r) for r in result.records]
            self.log.append(
                build_batch([SimpleRecord(None, v) for v in values], base_offset=base, partition_leader_epoch=epoch)
            )
            self.image = apply_records(self.image, result.records, offset=base + len(values) - 1, epoch=epoch)
            self.images.append(self.image)
        return result.response

    def add_brokers(self, *ids: int) -> None:
        """Registers and unfences brokers (epoch = the offset of their registration)."""
        for b in ids:
            epoch = self.commit(
                ctl.register_broker(self.image, b, incarnation_id=bytes([b % 256]) * 16, broker_epoch=self.image.offset + 1)
            )
            self.commit(ctl.unfence_broker(self.image, b, epoch))

    def create(self, name: str, partitions: int = 3, rf: int = 3, configs=None):
        return self.commit(ctl.create_topic(self.image, ctl.NewTopic(name, partitions, rf, configs or {}), self.rng))


def replay(batches: list[bytes], cache: MetadataCache | None = None) -> MetadataCache:
    """A cache fed committed batches, as the Raft listener would."""
    cache = cache or MetadataCache()
    for data in batches:
        for batch in read_batches(data):
            h = batch.header
            if h.base_offset <= cache.offset:
                continue
            cache.apply_batch(batch.records(), base_offset=h.base_offset, last_offset=h.last_offset,
                              epoch=h.partition_leader_epoch)
    return cache


def write_snapshot(directory: Path, image: MetadataImage, *, records_per_batch: int = 1000) -> Path:
    """A .checkpoint of `image` written with kraft.storage's SnapshotWriter; its path."""
    store = FileSnapshotStore(directory)
    snapshot_id = SnapshotId(image.end_offset, max(image.epoch, 0))
    with store.create_writer(snapshot_id, 0, records_per_batch=records_per_batch) as writer:
        writer.append(list(snapshot_records(image)))
        writer.freeze()
    return store.path(snapshot_id)


def read_snapshot(path: Path) -> SnapshotReader:
    return SnapshotReader.open(path, parse_snapshot_file_name(path.name))


def recomputed_index(image):
    """brokers_to_isrs built from scratch, to check the maintained one against."""
    index = {}
    for topic in image.topics_by_id.values():
        for pid, p in enumerate(topic.partitions):
            for b in p.isr:
                index.setdefault(b, {}).setdefault(topic.id, []).append(pid)
    return {b: {t: tuple(p) for t, p in m.items()} for b, m in index.items()}


def index_of(image):
    return {b: dict(m) for b, m in image.brokers_to_isrs.items()}
