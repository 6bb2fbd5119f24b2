"""Kill -9 around freeze: what a snapshot store holds after its process dies.

A child process writes a large snapshot and freezes it (fsync, rename, directory fsync),
telling the parent on a pipe when it starts writing, when it starts freezing and when
freeze has returned. The
parent SIGKILLs it at a random moment: while it writes records, during freeze, or after.
The store reopened after each kill must hold the older snapshot, whole; hold the new one
if (and only if) its rename happened, and then whole too, and certainly if freeze had
returned; and have no `.part` left.
"""

import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from kraft.storage import FileSnapshotStore, SnapshotId

from .test_snapshot_contract import TIMESTAMP, some_records, write

KILLS = int(os.environ.get("KRAFT_SNAPSHOT_CRASH_KILLS", "40"))
RECORDS, PER_APPEND = 8000, 200  # 1 KB values: an 8 MB snapshot
VALUE = b"s" * 1000
WRITING, FREEZING, FROZEN = b"W", b"F", b"D"


def write_large(
    store: FileSnapshotStore, snapshot_id: SnapshotId, report: int | None = None
) -> tuple[float, float]:
    """Writes and freezes the large snapshot; returns the seconds spent writing and freezing."""
    start = time.perf_counter()
    writer = store.create_writer(snapshot_id, TIMESTAMP, records_per_batch=100)
    if report is not None:
        os.write(report, WRITING)
    for first in range(0, RECORDS, PER_APPEND):
        writer.append([(b"%d" % i, VALUE) for i in range(first, first + PER_APPEND)])
    written = time.perf_counter()
    if report is not None:
        os.write(report, FREEZING)
    writer.freeze()
    if report is not None:
        os.write(report, FROZEN)
    return written - start, time.perf_counter() - written


def child(path: Path, snapshot_id: SnapshotId, report: int) -> None:
    write_large(FileSnapshotStore(path), snapshot_id, report)
    time.sleep(60)  # the kill ends it


def test_sigkill_around_freeze_leaves_a_store_that_opens_cleanly(tmp_path):
    path = tmp_path / "__cluster_metadata-0"
    seed = int(os.environ.get("KRAFT_CRASH_SEED") or random.randrange(1 << 30))
    print(f"snapshot crash test seed {seed}: replay with KRAFT_CRASH_SEED={seed}")
    rng = random.Random(seed)
    store = FileSnapshotStore(path)
    older = write(store, SnapshotId(500, 1), some_records(50))
    calibration = SnapshotId(999, 1)
    write_seconds, freeze_seconds = write_large(store, calibration)
    store.delete(calibration)

    ctx = multiprocessing.get_context("fork")
    outcomes: Counter[tuple[str, str]] = Counter()
    for kill in range(KILLS):
        new = SnapshotId(1000 + kill, 2)
        reader, writer = os.pipe()
        proc = ctx.Process(target=child, args=(path, new, writer))
        proc.start()
        os.close(writer)
        moment = rng.choice(["writing", "freezing", "frozen"])
        wanted = {"writing": WRITING, "freezing": FREEZING, "frozen": FROZEN}[moment]
        marks = b""
        while wanted not in marks and (chunk := os.read(reader, 1)):
            marks += chunk
        if moment == "writing":
            time.sleep(rng.uniform(0, write_seconds))
        elif moment == "freezing":
            time.sleep(rng.uniform(0, freeze_seconds * 1.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        os.set_blocking(reader, False)
        try:
            marks += os.read(reader, 16)
        except BlockingIOError:
            pass
        os.close(reader)

        store = FileSnapshotStore(path)
        assert not list(path.glob("*.part")), "opening removes what was never frozen"
        assert older in store.list()
        reopened = store.open_reader(older)
        reopened.validate()
        assert len(list(reopened.records())) == 50
        if FROZEN in marks:
            assert new in store.list(), f"kill {kill}: freeze returned, yet {new} is gone"
        assert set(store.list()) <= {older, new}
        if new in store.list():
            reader_new = store.open_reader(new)
            reader_new.validate()
            assert sum(b.header.records_count for b in reader_new.batches()) == RECORDS
            store.delete(new)  # keep the directory small
            outcomes[moment, "kept"] += 1
        else:
            outcomes[moment, "gone"] += 1
    kept = sum(n for (_, outcome), n in outcomes.items() if outcome == "kept")
    assert 0 < kept < KILLS, outcomes
    print(f"{KILLS} kills, new snapshot kept or gone by moment of the kill: {dict(sorted(outcomes.items()))}")
