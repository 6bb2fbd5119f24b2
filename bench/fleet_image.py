"""The metadata image at a million partitions, in one process (the fleet benchmark's second part).

Kafka's benchmark shape (jmh-benchmarks' TopicsImage*Benchmark): 100,000 topics of 10
partitions, replication factor 3; here over 1,000 brokers (ids FIRST_BROKER on), as issue 28
asks, where Kafka's JMH shape has 300 (10,000 replicas a broker). The image is built as a
controller builds it (brokers registered and unfenced, then every topic through
`create_topic`) and replayed batch by batch into a MetadataCache, as every replica does.

Each operation is timed twice, in CPU seconds of this process (time.process_time: on a 2-core
machine shared with other work, wall time measured the machine's load more than the work), as
it costs in a cluster:
* controller: what QuorumController.submit does before the append: the operation against the
  working image, its records encoded, and applied to the working image (`applied_to`: replayed,
  or the delta the operation derived them with applied);
* replica: what every replica (controller or broker) does once it commits: the batch read,
  its records decoded and applied to the committed image (MetadataCache.apply_batch);
and its memory: the bytes the new image holds that the one before it does not share, while
the old image is still held as a snapshot job would hold it (tracemalloc, in a run of its
own; for the zonal outage, the growth of the process's resident memory over it). The image
is frozen once built (gc.freeze), as a server keeps an image it loaded, so the collector
does not walk it.

Operations: CreateTopics of one topic (10 partitions) and of 100; a broker fence (the broker
in the most ISRs; Kafka's records: a FenceBrokerRecord and a PartitionChangeRecord per
partition it leaves); a zonal outage (a third of the brokers fenced, one operation each, in
turn, as Kafka's controller fences them); a snapshot load in a fresh process (time and peak
resident memory, as metadata_bench.py measures it).
"""

import gc
import os
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from metadata_bench import batches, load_in_fresh_process, write_snapshot

from kraft.metadata import MetadataCache, MetadataImage, apply_records, encode_record, snapshot_records
from kraft.metadata import operations as ctl
from kraft.metadata.operations import ControllerResult
from kraft.records import SimpleRecord, build_batch, read_batches
from kraft.storage.snapshot import SnapshotId

TOPICS, PARTITIONS, REPLICATION, BROKERS = 100_000, 10, 3, 1000
FIRST_BROKER = 1000  # broker ids FIRST_BROKER.. (the light observers use the same ids)
CREATE_TRIALS = 20
MANY_TOPICS = 100
Operation = Callable[[MetadataImage], ControllerResult]


def build(topics: int, brokers: int, rng: random.Random) -> MetadataCache:
    """A cache holding the image: every broker registered and unfenced, then every topic,
    replayed in batches of metadata_bench.RECORDS_PER_BATCH as a replica replays its log."""
    image = MetadataImage()
    records: list = []
    for b in range(FIRST_BROKER, FIRST_BROKER + brokers):
        for result in (ctl.register_broker(image, b, incarnation_id=rng.randbytes(16), broker_epoch=b),):
            image = apply_records(image, result.records, offset=image.offset + 1, epoch=1)
            records += result.records
        unfenced = ctl.unfence_broker(image, b, b)
        image = apply_records(image, unfenced.records, offset=image.offset + 1, epoch=1)
        records += unfenced.records
    for t in range(topics):  # each against the brokers' image: the names never collide
        records += ctl.create_topic(image, ctl.NewTopic(f"topic-{t:06d}", PARTITIONS, REPLICATION), rng).records
    cache = MetadataCache()
    gc.disable()
    try:
        for data in batches(records, base_offset=0):
            for batch in read_batches(data):
                h = batch.header
                cache.apply_batch(batch.records(), base_offset=h.base_offset, last_offset=h.last_offset, epoch=1)
    finally:
        gc.enable()
    gc.collect()
    gc.freeze()  # as a server keeps an image it loaded (kraft.metadata.collector): not walked by the collector
    return cache


def run(cache: MetadataCache, operation: Operation) -> dict:
    """One operation as the controller and then every replica pay for it; the cache moves on."""
    image = cache.image
    start = time.process_time()
    result = operation(image)
    records = result.records
    values = [encode_record(r) for r in records]
    result.applied_to(image, offset=image.offset + len(records), epoch=image.epoch)
    controller_s = time.process_time() - start
    data = build_batch([SimpleRecord(None, v) for v in values], base_offset=image.offset + 1,
                       partition_leader_epoch=image.epoch, timestamp=0)
    start = time.process_time()
    (batch,) = read_batches(data)
    h = batch.header
    cache.apply_batch(batch.records(), base_offset=h.base_offset, last_offset=h.last_offset, epoch=image.epoch)
    replica_s = time.process_time() - start
    return {"controller_s": controller_s, "replica_s": replica_s, "records": len(records),
            "bytes": sum(len(v) for v in values)}


def retained_bytes(image: MetadataImage, operations: list[Operation]) -> int:
    """Bytes the image after `operations` holds beyond `image` (which is kept alive)."""
    gc.collect()
    tracemalloc.start()
    current = image
    for operation in operations:
        records = operation(current).records
        current = apply_records(current, records, offset=current.offset + len(records), epoch=current.epoch)
        del records
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del current
    return held


def resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def create(names: list[str], rng: random.Random) -> Operation:
    return lambda image: ctl.create_topics(image, [ctl.NewTopic(n, PARTITIONS, REPLICATION) for n in names], rng)


def fence(broker: int) -> Operation:
    return lambda image: ctl.fence_broker(image, broker)


def measure(topics: int, brokers: int, directory: Path) -> dict:
    rng = random.Random(28)
    start = time.perf_counter()
    cache = build(topics, brokers, rng)
    built_s = time.perf_counter() - start
    image = cache.image
    partitions = image.partition_count()
    print(f"  built the image: {topics} topics, {partitions} partitions, {brokers} brokers in {built_s:.0f} s",
          flush=True)
    out: dict = {"topics": topics, "partitions": partitions, "brokers": brokers, "build_s": built_s}

    one = [run(cache, create([f"new-{i:03d}"], rng)) for i in range(CREATE_TRIALS)]
    out["create_one"] = summary(one) | {"memory_bytes": retained_bytes(cache.image, [create(["new-mem"], rng)])}
    many = run(cache, create([f"batch-{i:03d}" for i in range(MANY_TOPICS)], rng))
    out["create_many"] = many | {"topics": MANY_TOPICS, "memory_bytes": retained_bytes(
        cache.image, [create([f"batch-mem-{i:03d}" for i in range(MANY_TOPICS)], rng)])}

    hosts = cache.image.brokers_to_isrs
    busiest = max(hosts.keys(), key=lambda b: sum(len(p) for p in hosts[b].values()))
    hosted = sum(len(p) for p in hosts[busiest].values())
    out["fence"] = run(cache, fence(busiest)) | {"broker": busiest, "partitions_hosted": hosted}
    zone = [b for b in range(FIRST_BROKER, FIRST_BROKER + brokers) if (b - FIRST_BROKER) % 3 == 1 and b != busiest]
    out["fence"]["memory_bytes"] = retained_bytes(cache.image, [fence(zone[0])])
    before_outage = cache.image  # held, as a snapshot of it being written would hold it
    gc.collect()
    resident = resident_bytes()
    fences = [run(cache, fence(b)) for b in zone]
    gc.collect()
    out["zonal_memory_bytes"] = resident_bytes() - resident
    out["zonal"] = {
        "brokers": len(zone), "records": sum(f["records"] for f in fences),
        "controller_s": sum(f["controller_s"] for f in fences), "replica_s": sum(f["replica_s"] for f in fences),
        "replica_per_fence_s": statistics.median(f["replica_s"] for f in fences),
        "controller_per_fence_s": statistics.median(f["controller_s"] for f in fences),
        "memory_bytes": out.pop("zonal_memory_bytes"),
        "partitions_left_leaderless": sum(1 for t in cache.image.topics_by_id.values() for p in t.partitions
                                          if p.leader < 0),
    }
    del before_outage

    snapshot_image = cache.image
    snapshot_id = SnapshotId(snapshot_image.end_offset, snapshot_image.epoch)
    path, write_s = write_snapshot(snapshot_records(snapshot_image), snapshot_id, directory)
    loaded = load_in_fresh_process(path, snapshot_id)
    assert loaded["partitions"] == snapshot_image.partition_count() and loaded["digest"] == snapshot_image.digest()
    out["snapshot"] = {"path": str(path), "bytes": path.stat().st_size, "write_s": write_s, **loaded,
                       "end_offset": snapshot_id.end_offset, "epoch": snapshot_id.epoch}
    return out


def summary(runs: list[dict]) -> dict:
    return {"controller_s": statistics.median(r["controller_s"] for r in runs),
            "replica_s": statistics.median(r["replica_s"] for r in runs),
            "records": runs[0]["records"], "bytes": runs[0]["bytes"], "trials": len(runs)}
