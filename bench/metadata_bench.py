"""The metadata state machine at KIP-630's example scale: 100 000 topics of 10 partitions,
replication factor 3, 100 brokers (a million partitions).

* Replay: the whole metadata log applied batch by batch through the metadata cache
  (decode + apply), in records/s, once with CPython's cyclic garbage collector as it comes
  and once with it paused (as snapshot loading does). The difference is the collector
  walking the growing image: the image holds no cycles, but every full collection visits
  all of it; the pause one full collection takes on the final image is printed too.
  kraft.records decoding the same batches with no metadata work is the baseline.
* Snapshot: writing the image with kraft.storage's SnapshotWriter (time, size), and loading
  it in a fresh process (time, and peak memory as that process's VmHWM, the high-water mark
  of its resident memory, which counts the interpreter: its value before loading is
  printed beside it).
* The same load of a Kafka-shaped snapshot of the same million partitions with every part of
  a Kafka 3.7+ image (issue 15): features and the ZooKeeper migration state, brokers with two
  log dirs each (RegisterBrokerRecord v3), three controllers, every partition with its
  replicas' directories (PartitionRecord v1) and one in ten with ELR (v2), a config per
  topic and per broker, client quotas, a producer-id block, ACLs, SCRAM credentials and
  delegation tokens. Both loads run in the same run, the smaller mix as the baseline; the
  ratios are printed. The loaded image's digest must equal that of the records written.
* Fencing a broker (KIP-630, "Amount of Data Replicated"): bytes appended to the log for one
  FenceBrokerRecord (a log with the kraft.derived.fencing feature) against what Kafka's
  controller writes (the FenceBrokerRecord and one PartitionChangeRecord per partition the
  broker leaves), and the time every replica spends deriving the changes from the event.

Targets (issue 7): load the million-partition snapshot in under 20 s, peak memory under
2 GiB. The snapshot is left in bench/results/ (git-ignored).
"""

import gc
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from common import RESULTS, all_met, goal, print_goals, print_table, write_results

from kraft.metadata import (
    MetadataCache,
    MetadataDelta,
    MetadataImage,
    apply_records,
    encode_record,
    snapshot_records,
)
from kraft.metadata import operations as ctl
from kraft.metadata.image import DERIVED_FENCING, METADATA_VERSION, image_to_records, kafka_uuid_order
from kraft.metadata.records import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    DelegationTokenRecord,
    EntityData,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from kraft.records import SimpleRecord, build_batch, read_batches
from kraft.storage.snapshot import SnapshotId, SnapshotReader
from kraft.storage.snapshot_store import FileSnapshotStore

TOPICS = 100_000
PARTITIONS = 10
REPLICATION = 3
BROKERS = 100
RECORDS_PER_BATCH = 1000
LOAD_TARGET_S = 20.0
MEMORY_TARGET_BYTES = 2 << 30
SNAPSHOT_DIR = RESULTS / "metadata-snapshot"
KAFKA_MIX_DIR = RESULTS / "metadata-snapshot-kafka-mix"
ISSUE_FIGURES = (6.1, 527)  # s, MiB: the smaller mix's load when issue 15 was filed
ACLS, USERS, TOKENS, QUOTA_ENTITIES = 10_000, 1000, 1000, 1000


def build_log() -> list[bytes]:
    """The metadata log of the example cluster, as committed batches: brokers registered and
    unfenced, then every topic created through the controller."""
    rng = random.Random(630)
    image = MetadataImage()
    records = []
    for b in range(BROKERS):
        registered = ctl.register_broker(image, b, incarnation_id=rng.randbytes(16), broker_epoch=b)
        image = apply_records(image, registered.records, offset=image.offset + 1, epoch=1)
        unfenced = ctl.unfence_broker(image, b, b)
        image = apply_records(image, unfenced.records, offset=image.offset + 1, epoch=1)
        records += registered.records + unfenced.records
    for t in range(TOPICS):  # each against the brokers' image: the names never collide
        records += ctl.create_topic(image, ctl.NewTopic(f"topic-{t:06d}", PARTITIONS, REPLICATION), rng).records
    return batches(records, base_offset=0)


def batches(records: list, base_offset: int) -> list[bytes]:
    out = []
    for i in range(0, len(records), RECORDS_PER_BATCH):
        chunk = [SimpleRecord(None, encode_record(r)) for r in records[i : i + RECORDS_PER_BATCH]]
        out.append(build_batch(chunk, base_offset=base_offset + i, partition_leader_epoch=1, timestamp=0))
    return out


def replay(log: list[bytes], collector: bool) -> tuple[MetadataCache, float, int]:
    cache = MetadataCache()
    count = 0
    gc.collect()
    if not collector:
        gc.disable()
    start = time.perf_counter()
    for data in log:
        for batch in read_batches(data):
            h = batch.header
            cache.apply_batch(batch.records(), base_offset=h.base_offset, last_offset=h.last_offset, epoch=1)
            count += h.records_count
    elapsed = time.perf_counter() - start
    gc.enable()
    return cache, elapsed, count


def full_collection_s() -> float:
    start = time.perf_counter()
    gc.collect()
    return time.perf_counter() - start


def decode_only(log: list[bytes]) -> float:
    start = time.perf_counter()
    for data in log:
        for batch in read_batches(data):
            batch.records()
    return time.perf_counter() - start


def kafka_mix(image: MetadataImage) -> Iterator[MetadataRecord]:
    """The image's snapshot records with every other part of a Kafka image added, in the
    order kraft writes a snapshot (image_to_records), so the loaded image's digest is the
    digest of these records."""
    rng = random.Random(15)
    dirs = sorted(rng.randbytes(16) for _ in range(2 * BROKERS))
    levels = {METADATA_VERSION: 21, "group.version": 1, "kraft.version": 1, "transaction.version": 2}
    for name in sorted(levels, key=lambda n: (n != METADATA_VERSION, n)):
        yield FeatureLevelRecord(name=name, feature_level=levels[name])
    yield ZkMigrationStateRecord(zk_migration_state=0)
    controllers_written = False
    for record in image_to_records(image):
        kind = type(record)
        assert kind in (RegisterBrokerRecord, TopicRecord, PartitionRecord), f"the smaller mix has no {kind.__name__}"
        if kind is RegisterBrokerRecord:
            b = record.broker_id
            record = replace(record, log_dirs=kafka_uuid_order((dirs[2 * b], dirs[2 * b + 1])),
                             in_controlled_shutdown=b % 50 == 7)
        elif kind is TopicRecord and not controllers_written:
            controllers_written = True
            for c in range(3):
                endpoint = ControllerEndpoint(name="CONTROLLER", host=f"controller-{c}", port=9093)
                yield RegisterControllerRecord(controller_id=1000 + c, incarnation_id=rng.randbytes(16),
                                               end_points=(endpoint,))
        elif kind is PartitionRecord:
            directories = tuple(dirs[2 * r + record.partition_id % 2] for r in record.replicas)
            elr = {"eligible_leader_replicas": record.replicas[1:]} if (
                record.partition_id == 0) else {}
            record = replace(record, directories=directories, **elr)
        yield record
    topics = sorted(image.topics_by_name.keys())
    for name in topics:
        yield ConfigRecord(resource_type=2, resource_name=name, name="retention.ms", value="604800000")
    for b in sorted(map(str, range(BROKERS))):
        yield ConfigRecord(resource_type=4, resource_name=b, name="log.cleaner.threads", value="2")
    for u in range(QUOTA_ENTITIES):
        entity = (EntityData(entity_type="user", entity_name=f"user-{u:05d}"),)
        for key, value in (("consumer_byte_rate", 2e6), ("producer_byte_rate", 1e6)):
            yield ClientQuotaRecord(entity=entity, key=key, value=value)
    yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=5_000_000)
    for acl_id in sorted(rng.randbytes(16) for _ in range(ACLS)):
        yield AccessControlEntryRecord(id=acl_id, resource_type=2, resource_name=rng.choice(topics), pattern_type=3,
                                       principal=f"User:user-{rng.randrange(USERS):05d}", host="*", operation=3,
                                       permission_type=3)
    for u in range(USERS):
        for mechanism in (1, 2):
            yield UserScramCredentialRecord(name=f"user-{u:05d}", mechanism=mechanism, salt=rng.randbytes(32),
                                            stored_key=rng.randbytes(32), server_key=rng.randbytes(32),
                                            iterations=4096)
    for t in range(TOKENS):
        yield DelegationTokenRecord(owner="User:admin", requester="User:admin", renewers=("User:ops",),
                                    issue_timestamp=t, max_timestamp=t + 2, expiration_timestamp=t + 1,
                                    token_id=f"token-{t:05d}")


def hashed(records: Iterable[MetadataRecord], digest: "hashlib._Hash") -> Iterator[tuple[None, bytes]]:
    """Snapshot (key, value) pairs of `records`, hashed as MetadataImage.digest hashes them."""
    for record in records:
        value = encode_record(record)
        digest.update(len(value).to_bytes(4, "big"))
        digest.update(value)
        yield None, value


def write_snapshot(pairs: Iterable[tuple[None, bytes]], snapshot_id: SnapshotId, directory: Path) -> tuple[Path, float]:
    shutil.rmtree(directory, ignore_errors=True)
    store = FileSnapshotStore(directory)
    start = time.perf_counter()
    with store.create_writer(snapshot_id, 0) as writer:
        chunk = []
        for pair in pairs:
            chunk.append(pair)
            if len(chunk) == 10_000:
                writer.append(chunk)
                chunk = []
        writer.append(chunk)
        writer.freeze()
    return store.path(snapshot_id), time.perf_counter() - start


def load_in_fresh_process(path: Path, snapshot_id: SnapshotId) -> dict:
    """Runs `load_main` in a new interpreter, so its peak RSS is the load's alone."""
    out = subprocess.run(
        [sys.executable, __file__, "--load", str(path), str(snapshot_id.end_offset), str(snapshot_id.epoch)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def peak_memory_bytes() -> int:
    """This process's resident high-water mark. VmHWM, not ru_maxrss: Linux carries
    ru_maxrss over from the parent across fork and exec, VmHWM starts afresh."""
    status = Path(f"/proc/{os.getpid()}/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load_main(path: str, end_offset: str, epoch: str) -> None:
    baseline = peak_memory_bytes()
    snapshot_id = SnapshotId(int(end_offset), int(epoch))
    start, cpu = time.perf_counter(), time.process_time()
    reader = SnapshotReader.open(Path(path), snapshot_id)
    cache = MetadataCache()
    cache.load_snapshot(reader.records(), end_offset=snapshot_id.end_offset, epoch=snapshot_id.epoch)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = peak_memory_bytes()
    walked_s = full_collection_s()
    gc.freeze()  # what a server does after a load (kraft.metadata.collector.frozen_when_built)
    frozen_s = full_collection_s()
    print(json.dumps({"load_s": elapsed, "load_cpu_s": cpu, "peak_memory_bytes": peak,
                      "memory_before_bytes": baseline,
                      "collect_s": walked_s, "collect_frozen_s": frozen_s,
                      "partitions": cache.image.partition_count(), "digest": cache.image.digest()}))


def fence_comparison(image: MetadataImage) -> dict:
    """The broker hosting the most partitions, fenced as Kafka's controller writes it (the
    FenceBrokerRecord and a PartitionChangeRecord per partition it leaves) and as a log with
    KIP-630's derived fencing writes it (the event alone: every replica derives the changes).
    Both must give the same partitions."""
    broker = max(image.brokers_to_isrs.keys(), key=lambda b: sum(len(p) for p in image.brokers_to_isrs[b].values()))
    hosted = sum(len(p) for p in image.brokers_to_isrs[broker].values())
    kafka = ctl.fence_broker(image, broker).records
    changes = [r for r in kafka if isinstance(r, PartitionChangeRecord)]
    start = time.perf_counter()
    by_kafka = apply_records(image, kafka, offset=image.offset + len(kafka), epoch=image.epoch)
    changes_apply_s = time.perf_counter() - start
    derived_log = apply_records(image, [FeatureLevelRecord(name=DERIVED_FENCING, feature_level=1)],
                                offset=image.offset + 1, epoch=image.epoch)
    (fence,) = ctl.fence_broker(derived_log, broker).records
    start = time.perf_counter()
    delta = MetadataDelta(derived_log)
    delta.replay(fence)
    derived = delta.apply(derived_log.offset + 1, image.epoch)
    derive_s = time.perf_counter() - start
    assert derived.topics_by_id == by_kafka.topics_by_id
    return {
        "broker": broker,
        "partitions_hosted": hosted,
        "partitions_changed": len(changes),
        "fence_record_bytes": len(encode_record(fence)),
        "fence_batch_bytes": len(build_batch([SimpleRecord(None, encode_record(fence))], timestamp=0)),
        "partition_change_record_bytes": sum(len(encode_record(c)) for c in changes),
        "partition_change_batch_bytes": sum(len(b) for b in batches(kafka, 0)),
        "fence_derive_s": derive_s,
        "partition_changes_apply_s": changes_apply_s,
    }


def main() -> int:
    start = time.perf_counter()
    log = build_log()
    print(f"built the log: {sum(len(b) for b in log) / 1e6:.1f} MB in {len(log)} batches "
          f"({time.perf_counter() - start:.1f} s)", flush=True)
    decode_s = decode_only(log)
    cache, replay_s, count = replay(log, collector=True)
    pause_s = full_collection_s()
    del cache
    cache, replay_paused_s, _ = replay(log, collector=False)
    image = cache.image
    assert image.partition_count() == TOPICS * PARTITIONS
    snapshot_id = SnapshotId(image.end_offset, image.epoch)
    path, write_s = write_snapshot(snapshot_records(image), snapshot_id, SNAPSHOT_DIR)
    loaded = load_in_fresh_process(path, snapshot_id)
    assert loaded["partitions"] == TOPICS * PARTITIONS and loaded["digest"] == image.digest()
    mix_digest = hashlib.sha256()
    mix_path, _ = write_snapshot(hashed(kafka_mix(image), mix_digest), snapshot_id, KAFKA_MIX_DIR)
    mixed = load_in_fresh_process(mix_path, snapshot_id)
    assert mixed["partitions"] == TOPICS * PARTITIONS and mixed["digest"] == mix_digest.hexdigest()
    load_ratio, memory_ratio = mixed["load_s"] / loaded["load_s"], mixed["peak_memory_bytes"] / loaded["peak_memory_bytes"]
    fence = fence_comparison(image)

    rows = [
        {"measure": "replay (decode + apply)", "value": count / replay_s, "unit": "records/s",
         "note": f"kraft.records alone decodes the same batches at {count / decode_s:,.0f} records/s"},
        {"measure": "replay, collector paused", "value": count / replay_paused_s, "unit": "records/s",
         "note": f"one full gc.collect() on the final image takes {pause_s:.2f} s"},
        {"measure": "snapshot write", "value": write_s, "unit": "s", "note": f"{path.stat().st_size / 1e6:.1f} MB"},
        {"measure": "snapshot load", "value": loaded["load_s"], "unit": "s",
         "note": f"{loaded['load_cpu_s']:.1f} s of CPU"},
        {"measure": "load peak memory", "value": loaded["peak_memory_bytes"] / 2**20, "unit": "MiB",
         "note": f"VmHWM of the loading process; {loaded['memory_before_bytes'] / 2**20:.0f} MiB before loading"},
        {"measure": "snapshot load, Kafka mix", "value": mixed["load_s"], "unit": "s",
         "note": f"{mix_path.stat().st_size / 1e6:.1f} MB; {load_ratio:.2f}x the smaller mix's load"},
        {"measure": "load peak memory, Kafka mix", "value": mixed["peak_memory_bytes"] / 2**20, "unit": "MiB",
         "note": f"{memory_ratio:.2f}x the smaller mix's; {mixed['memory_before_bytes'] / 2**20:.0f} MiB before loading"},
        {"measure": "full collection after a load", "value": loaded["collect_s"], "unit": "s",
         "note": f"{loaded['collect_frozen_s'] * 1e6:.0f} us with the image frozen, as a server keeps it "
                 f"({loaded['collect_s'] / loaded['collect_frozen_s']:,.0f}x)"},
        {"measure": "fence: FenceBroker", "value": fence["fence_batch_bytes"], "unit": "bytes",
         "note": f"record {fence['fence_record_bytes']} B; "
                 f"derived on every replica in {fence['fence_derive_s']:.2f} s"},
        {"measure": "fence: as Kafka writes it", "value": fence["partition_change_batch_bytes"],
         "unit": "bytes", "note": f"{fence['partitions_changed']} records, {fence['partition_change_record_bytes']} B "
                                  f"of values; applied in {fence['partition_changes_apply_s']:.2f} s"},
    ]
    print(f"\nmetadata image: {TOPICS} topics x {PARTITIONS} partitions, RF {REPLICATION}, {BROKERS} brokers "
          f"({count} records)\n")
    print_table(rows, ["measure", "value", "unit", "note"])
    print(f"\nfencing broker {fence['broker']} (in {fence['partitions_hosted']} ISRs): "
          f"{fence['fence_batch_bytes']} B appended against {fence['partition_change_batch_bytes'] / 1e6:.2f} MB "
          f"(KIP-630's estimate: 8 B against 1.14 MB)")
    print(f"snapshot load, smaller mix: {loaded['load_s']:.1f} s, {loaded['peak_memory_bytes'] / 2**20:.0f} MiB "
          f"(issue 15 quotes {ISSUE_FIGURES[0]} s, {ISSUE_FIGURES[1]} MiB); Kafka mix: {mixed['load_s']:.1f} s, "
          f"{mixed['peak_memory_bytes'] / 2**20:.0f} MiB; ratio Kafka mix / smaller mix: {load_ratio:.2f} (time), "
          f"{memory_ratio:.2f} (memory)")
    goals = []
    for mix, m in (("", loaded), (", Kafka mix", mixed)):
        goals += [goal(f"snapshot load{mix}", m["load_s"], "s", goal=f"< {LOAD_TARGET_S:.0f} s (issue 7)",
                       met=m["load_s"] < LOAD_TARGET_S),
                  goal(f"load peak memory{mix}", m["peak_memory_bytes"] / 2**20, "MiB",
                       goal=f"< {MEMORY_TARGET_BYTES / 2**30:.0f} GiB (issue 7)",
                       met=m["peak_memory_bytes"] < MEMORY_TARGET_BYTES)]
    print_goals(goals)
    results = write_results("metadata", rows, goals, fence=fence, load=loaded, load_kafka_mix=mixed, load_ratio=load_ratio,
                            memory_ratio=memory_ratio, snapshot_bytes=path.stat().st_size,
                            replay_s=replay_s, replay_paused_s=replay_paused_s, full_collection_s=pause_s,
                            records=count)
    print(f"results: {results}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--load":
        load_main(*sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
