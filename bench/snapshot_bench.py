"""Snapshot write and validate-read throughput against plain file I/O of the same bytes.

A 100 MiB snapshot of 1 KiB records, 1000 to a batch:

* write: FileSnapshotStore's writer (encode the batches, write, fsync, rename, directory
  fsync) against a plain copy of the same bytes (os.write of 1 MiB chunks, then fsync).
* validate-read: SnapshotReader.validate() (every batch's CRC, the offsets, the epochs,
  header first and footer last; no record decoded) against a plain read of the same file
  (os.readv into one reused 1 MiB buffer). Both read from the page cache.
* for information: validate-read against a plain read that also computes CRC32C over
  what it reads (the CRC is most of the work, so this shows what the walk itself adds);
  and loading, decoding every record (what a state machine pays), against the plain read.

Issue 4 sets no target, so the ratios (baseline time / our time) are printed and
recorded, and the exit status is 0.
"""

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import RESULTS, best_of, goal, print_table, write_results
from crc32c import crc32c

from kraft.storage import FileSnapshotStore, SnapshotId

RECORD_VALUE = bytes(range(256)) * 4  # 1 KiB
RECORDS = 100 * 1024  # 100 MiB of values
PER_BATCH = 1000
CHUNK = 1 << 20
ROUNDS = 5
SNAPSHOT = SnapshotId(RECORDS + 2, 1)
TIMESTAMP = 1_700_000_000_000


def best(fn: Callable[[], object], after: Callable[[], object]) -> float:
    """The best of ROUNDS timed writes; `after` removes what each wrote, untimed."""
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        after()
    return min(times)


def main() -> int:
    directory = Path(tempfile.mkdtemp(dir=RESULTS, prefix="snapshot-bench-"))
    records = [(None, RECORD_VALUE)] * RECORDS
    try:
        store = FileSnapshotStore(directory / "__cluster_metadata-0")

        def write_snapshot() -> None:
            writer = store.create_writer(SNAPSHOT, TIMESTAMP, records_per_batch=PER_BATCH)
            writer.append(records)
            writer.freeze()

        t_write = best(write_snapshot, after=lambda: store.delete(SNAPSHOT))
        write_snapshot()
        path = store.path(SNAPSHOT)
        data = path.read_bytes()
        size = len(data)
        copy = directory / "copy"

        def plain_copy() -> None:
            fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            view = memoryview(data)
            for position in range(0, size, CHUNK):
                os.write(fd, view[position : position + CHUNK])
            os.fsync(fd)
            os.close(fd)

        t_copy = best(plain_copy, after=copy.unlink)

        def validate() -> None:
            store.open_reader(SNAPSHOT).validate()

        def plain_read() -> int:
            fd = os.open(path, os.O_RDONLY)
            buf = bytearray(CHUNK)
            total = 0
            while got := os.readv(fd, [buf]):
                total += got
            os.close(fd)
            return total

        def plain_read_crc() -> int:
            fd = os.open(path, os.O_RDONLY)
            buf = bytearray(CHUNK)
            crc = 0
            while got := os.readv(fd, [buf]):
                crc = crc32c(memoryview(buf)[:got], crc)
            os.close(fd)
            return crc

        def load() -> int:
            return sum(len(batch.records()) for batch in store.open_reader(SNAPSHOT).batches())

        assert plain_read() == size and load() == RECORDS
        t_validate = best_of(validate, repeat=10)
        t_read = best_of(plain_read, repeat=10)
        t_read_crc = best_of(plain_read_crc, repeat=10)
        t_load = best_of(load)
    finally:
        shutil.rmtree(directory)

    mb = size / 1e6
    rows = [
        {"operation": "write snapshot (encode, write, fsync, rename)", "ours_MB_s": mb / t_write,
         "baseline_MB_s": mb / t_copy, "ratio": t_copy / t_write,
         "baseline": "os.write 1 MiB chunks + fsync"},
        {"operation": "validate-read (CRC walk, no decoding)", "ours_MB_s": mb / t_validate,
         "baseline_MB_s": mb / t_read, "ratio": t_read / t_validate, "baseline": "os.readv 1 MiB chunks"},
        {"operation": "validate-read vs read + CRC (information)", "ours_MB_s": mb / t_validate,
         "baseline_MB_s": mb / t_read_crc, "ratio": t_read_crc / t_validate,
         "baseline": "os.readv 1 MiB chunks + crc32c"},
        {"operation": "load: decode every record (information)", "ours_MB_s": mb / t_load,
         "baseline_MB_s": mb / t_read, "ratio": t_read / t_load, "baseline": "os.readv 1 MiB chunks"},
    ]
    print(f"Snapshot of {RECORDS} records of 1 KiB, {PER_BATCH} per batch: {size / 2**20:.1f} MiB; "
          f"best of {ROUNDS} writes, 10 reads\n")
    print_table(rows, ["operation", "ours_MB_s", "baseline_MB_s", "ratio", "baseline"])
    print("\nratio = baseline time / our time (no target in issue 4)")
    for r in rows:
        print(f"  {r['operation']}: {r['ratio']:.2f}")
    goals = [goal(r["operation"], r["ours_MB_s"], "MB/s", peer=r["baseline"], peer_value=r["baseline_MB_s"])
             for r in rows]
    print(f"results: {write_results('snapshot', rows, goals, snapshot_bytes=size)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
