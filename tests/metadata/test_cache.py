"""The metadata cache: batches strictly in order, snapshots, reads at an offset, the ratio."""

import gc

import pytest

from kraft.metadata import MetadataCache, NotCaughtUpError, OffsetOrderError, ReplayError
from kraft.metadata import operations as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.metadata.image import ConfigResource, ConfigResourceType
from kraft.records import SimpleRecord, read_batches
from tests.metadata.cluster import Cluster, read_snapshot, replay, write_snapshot


def cluster_with_topics():
    c = Cluster(seed=3)
    c.add_brokers(1, 2, 3)
    c.create("a", partitions=4)
    c.create("b", partitions=2)
    return c


def test_the_cache_follows_the_log_and_reads_at_an_offset():
    c = cluster_with_topics()
    cache = replay(c.log)
    assert cache.image == c.image and cache.offset == c.image.offset
    assert cache.read(c.image.offset) is cache.image
    with pytest.raises(NotCaughtUpError, match=f"not yet at {c.image.offset + 1}"):
        cache.read(c.image.offset + 1)


def test_gaps_and_regressions_are_refused_and_change_nothing():
    c = cluster_with_topics()
    batches = [b for data in c.log for b in read_batches(data)]
    cache = MetadataCache()
    first = batches[0]
    with pytest.raises(OffsetOrderError, match="a gap"):
        cache.apply_batch(batches[1].records(), base_offset=batches[1].header.base_offset,
                          last_offset=batches[1].header.last_offset, epoch=1)
    cache.apply_batch(first.records(), base_offset=0, last_offset=first.header.last_offset, epoch=1)
    with pytest.raises(OffsetOrderError, match="a regression"):
        cache.apply_batch(first.records(), base_offset=0, last_offset=first.header.last_offset, epoch=1)
    assert cache.offset == first.header.last_offset


def test_control_batches_are_stepped_over_with_advance():
    c = cluster_with_topics()
    cache = MetadataCache()
    cache.advance(base_offset=0, last_offset=0, epoch=1)  # a LeaderChange at offset 0
    for b in (b for data in c.log for b in read_batches(data)):  # the data batches, one offset later
        h = b.header
        cache.apply_batch(b.records(), base_offset=h.base_offset + 1, last_offset=h.last_offset + 1, epoch=1)
    assert cache.offset == c.image.offset + 1
    assert cache.image.digest() == c.image.digest()


def test_a_batch_that_does_not_decode_leaves_the_cache_as_it_was():
    c = cluster_with_topics()
    cache = replay(c.log)
    image = cache.image
    with pytest.raises(ReplayError, match=r"record at offset \d+: unknown metadata record API key 99"):
        cache.apply_batch([SimpleRecord(None, bytes([1, 99, 0]))], base_offset=cache.offset + 1,
                          last_offset=cache.offset + 1, epoch=1)
    assert cache.image is image


def test_loading_a_snapshot_replaces_the_image_and_the_log_goes_on_after_it(tmp_path):
    c = cluster_with_topics()
    path = write_snapshot(tmp_path, c.image)
    middle = len(c.log)
    c.commit(ctl.delete_topic(c.image, "a"))
    c.create("c")
    cache = MetadataCache()
    reader = read_snapshot(path)
    cache.load_snapshot(reader.records(), end_offset=reader.snapshot_id.end_offset, epoch=reader.snapshot_id.epoch)
    assert cache.changes.snapshot_records == 3 + 2 + 4 + 2 and cache.changes.count == 0
    replay(c.log[middle:], cache)
    assert cache.image.digest() == c.image.digest() and cache.offset == c.image.offset


def test_changed_records_count_modified_and_deleted_snapshot_records_once_and_new_ones_never():
    c = cluster_with_topics()  # 3 brokers, 2 topics, 6 partitions: 11 records
    cache = replay(c.log)
    assert cache.changed_ratio == 1.0  # no snapshot yet
    cache.snapshot_written(cache.image)
    assert (cache.changes.snapshot_records, cache.changes.count) == (11, 0)

    c.create("c", partitions=5)  # new: does not count
    replay(c.log, cache)
    assert cache.changes.count == 0
    snapshotted = cache.image  # a snapshot of this image is being written meanwhile
    # Three brokers and replication factor 3: every partition's ISR holds every broker.
    c.commit(ctl.fence_broker(c.image, 1))
    c.commit(ctl.fence_broker(c.image, 2))
    replay(c.log, cache)
    assert cache.changes.count == 2 + 11  # brokers 1, 2 and all partitions, c's included:
    # added after the snapshot, then modified, they count (KIP-630)
    c.commit(ctl.fence_broker(c.image, 3))  # the same partitions again, and broker 3
    c.commit(ctl.alter_configs(c.image, ConfigResource(ConfigResourceType.TOPIC, "a"),
                               [AlterConfigOp("retention.ms", OpType.SET, "5")]))  # a new record
    replay(c.log, cache)
    assert cache.changes.count == 3 + 11
    assert cache.changed_ratio == 14 / 11

    cache.snapshot_written(snapshotted)  # changes after the snapshot point still count
    assert cache.changes.snapshot_records == snapshotted.record_count() == 11 + 1 + 5
    assert cache.changes.count == 3 + 11
    cache.snapshot_written(cache.image)
    assert cache.changes.count == 0 and cache.changes.snapshot_records == 11 + 1 + 5 + 1


def test_a_batch_applies_with_the_collector_paused_and_leaves_it_as_it_was():
    batches = [b for data in cluster_with_topics().log for b in read_batches(data)]
    seen: list[bool] = []

    def watched(records):
        for r in records:
            seen.append(gc.isenabled())
            yield r

    cache = MetadataCache()
    first, second = batches[0], batches[1]
    cache.apply_batch(watched(first.records()), base_offset=0, last_offset=first.header.last_offset, epoch=1)
    assert seen and not any(seen), "the collector ran while records were decoded and applied"
    assert gc.isenabled()
    with pytest.raises(ReplayError):
        cache.apply_batch(watched([SimpleRecord(None, bytes([1, 99, 0]))]), base_offset=cache.offset + 1,
                          last_offset=cache.offset + 1, epoch=1)
    assert gc.isenabled(), "a failed batch left the collector off"
    gc.disable()  # a caller that paused it itself keeps it paused
    try:
        h = second.header
        cache.apply_batch(second.records(), base_offset=h.base_offset, last_offset=h.last_offset, epoch=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
