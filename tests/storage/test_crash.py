"""Kill -9 at random moments: nothing reported durable is ever lost.

A child process appends and flushes in a loop, reporting each durable offset (and where
the durable bytes end) on a pipe, and is SIGKILLed at a random moment. Half the kills
also emulate a power cut: everything beyond the last flush is torn at a random byte,
zeroed or followed by garbage, and segments rolled since are cut too, since a killed
process alone leaves its writes in the page cache. The reopened log must hold every
offset reported durable, with the right value, and take appends.
"""

import multiprocessing
import os
import random
import signal
import struct
import time
from pathlib import Path

from kraft.records import SimpleRecord, build_batch, iter_file_batches, read_batches
from kraft.storage import FileLog

REPORT = struct.Struct(">qqq")  # flushed offset, active segment base, its size at the flush
KILLS = int(os.environ.get("KRAFT_CRASH_KILLS", "200"))


def child(path: Path, writer, seed: int) -> None:
    rng = random.Random(seed)
    log = FileLog(path, segment_bytes=32 * 1024, recovery_point_interval_ms=rng.choice([0, 0, 5, 1000]))
    epoch = log.latest_epoch or 0
    while True:
        epoch += rng.random() < 0.05
        start = log.end_offset
        n = rng.randint(1, 30)
        log.append_as_leader(build_batch([SimpleRecord(None, b"%d" % (start + i)) for i in range(n)]), epoch)
        if rng.random() < 0.3:
            active = log.segments[-1]
            base, size = active.base_offset, active.size
            flushed = log.flush()
            os.write(writer, REPORT.pack(flushed, base, size))


def drain(reader) -> tuple[int, int, int] | None:
    data = b""
    while chunk := os.read(reader, 1 << 16):
        data += chunk
    whole = len(data) - len(data) % REPORT.size
    return REPORT.unpack_from(data, whole - REPORT.size) if whole else None


def recovery_point_position(segment: Path) -> int:
    """Bytes of `segment` below the recovery point. The point may be ahead of the last report
    (the child fsynced and wrote it, then died before reporting); data below it is fsynced,
    which a power cut does not take."""
    rp = int((segment.parent.parent / "recovery-point-offset-checkpoint").read_text().split()[-1])
    fd = os.open(segment, os.O_RDONLY)
    try:
        position = 0
        for h in iter_file_batches(fd, verify_crc=False, partial_tail="stop"):
            if h.base_offset >= rp:
                break
            position = h.position + h.size
        return position
    finally:
        os.close(fd)


def power_cut(path: Path, base: int, durable_size: int, rng: random.Random) -> None:
    """Loses what the page cache held beyond the last flush, as a machine crash may."""
    for seg in sorted(path.glob("*.log")):
        seg_base = int(seg.name[:20])
        if seg_base < base:
            continue
        length = seg.stat().st_size
        floor = max(durable_size if seg_base == base else 0, recovery_point_position(seg))
        if length <= floor:
            continue
        cut = rng.randint(floor, length)
        with open(seg, "r+b") as f:
            f.truncate(cut)
            damage = rng.choice(["none", "zeros", "garbage"])
            if damage == "zeros" and cut > floor:
                f.seek(rng.randint(floor, cut - 1))
                f.write(bytes(rng.randint(1, 64)))
            elif damage == "garbage":
                f.seek(cut)
                f.write(os.urandom(rng.randint(1, 200)))


def verify(log: FileLog, durable: int, checked_from: int) -> None:
    assert log.end_offset >= durable, f"lost durable offsets: log ends at {log.end_offset}, {durable} were reported"
    offset = max(checked_from, log.start_offset)
    while offset < durable:
        info = log.read(offset, 1 << 20, upper_bound=durable)
        if info.size == 0:
            info = log.read(offset, 1 << 20)
        for batch in read_batches(info.tobytes(), expected_offset=info.first_offset):
            for record in batch.records():
                assert record.value == b"%d" % record.offset, f"offset {record.offset} holds {record.value!r}"
        offset = info.next_offset


def test_sigkill_at_random_moments_never_loses_a_durable_offset(tmp_path):
    path = tmp_path / "__cluster_metadata-0"
    ctx = multiprocessing.get_context("fork")
    seed = int(os.environ.get("KRAFT_CRASH_SEED") or random.randrange(1 << 30))
    print(f"crash test seed {seed}: replay with KRAFT_CRASH_SEED={seed}")
    rng = random.Random(seed)
    durable = checked = 0
    power_cuts = 0
    for _ in range(KILLS):
        reader, writer = os.pipe()
        proc = ctx.Process(target=child, args=(path, writer, rng.randrange(1 << 30)))
        proc.start()
        os.close(writer)
        time.sleep(rng.uniform(0.005, 0.04))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        report = drain(reader)
        os.close(reader)
        if report:
            durable = max(durable, report[0])
            if rng.random() < 0.5:
                power_cut(path, report[1], report[2], rng)
                power_cuts += 1
        log = FileLog(path, segment_bytes=32 * 1024)
        verify(log, durable, checked)
        checked = durable
        # Keep the log small: history already verified can go.
        if log.end_offset > durable > log.start_offset:
            boundary = log.read(durable, 1).first_offset
            log.advance_start_offset(boundary)
        log.close()
    log = FileLog(path)
    log.append_as_leader(build_batch([SimpleRecord(None, b"%d" % log.end_offset)]), epoch=(log.latest_epoch or 0) + 1)
    log.flush()
    assert durable > 0 and power_cuts > 0
    print(f"{KILLS} kills, {power_cuts} with a power cut; {durable} offsets reported durable, none lost")
