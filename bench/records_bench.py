"""Record batch encode/decode throughput against aiokafka's C codec, and the batch walker
against the raw CRC32C pass it wraps.

Batches of 1000 records of 100 bytes. Targets (issue 2): walker >= 1 GB/s; encode and
decode within 2x of aiokafka's C codec (ratio >= 0.5).
"""

import sys
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from common import all_met, best_of, goal, print_goals, print_table, write_results
from crc32c import crc32c

from kraft.records import SimpleRecord, build_batch, iter_batches, read_batches

RECORDS = 1000
VALUE = 100
TIMESTAMP = 1_700_000_000_000


def main() -> int:
    values = [bytes([i % 256]) * VALUE for i in range(RECORDS)]
    ours_in = [SimpleRecord(None, v, (), TIMESTAMP) for v in values]

    def ours_encode() -> bytes:
        return build_batch(ours_in, timestamp=TIMESTAMP)

    def aio_encode() -> bytes:
        b = AioBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1,
                       base_sequence=-1, batch_size=1 << 30)
        for i, v in enumerate(values):
            b.append(i, timestamp=TIMESTAMP, key=None, value=v, headers=[])
        return bytes(b.build())

    batch = ours_encode()
    assert len(batch) == len(aio_encode())
    size = len(batch)

    def ours_decode() -> int:
        total = 0
        for b in read_batches(batch):
            for r in b.records():
                total += len(r.value)
        return total

    def aio_decode() -> int:
        total = 0
        for r in AioBatch(batch):
            total += len(r.value)
        return total

    assert ours_decode() == aio_decode() == RECORDS * VALUE

    stream = batch * 100  # 100 batches, ~11 MB

    def walk() -> int:
        return sum(h.records_count for h in iter_batches(stream))

    def raw_crc() -> int:
        view = memoryview(stream)
        return sum(crc32c(view[i * size + 21 : (i + 1) * size]) & 1 for i in range(100))

    rows: list[dict[str, Any]] = []
    for name, ours, theirs, nbytes in [
        ("encode", ours_encode, aio_encode, size),
        ("decode", ours_decode, aio_decode, size),
        ("walk (CRC, headers)", walk, raw_crc, len(stream)),
    ]:
        t_ours, t_base = best_of(ours), best_of(theirs)
        records = RECORDS * (nbytes // size)
        rows.append({
            "operation": name,
            "baseline": "aiokafka C codec" if name != "walk (CRC, headers)" else "raw crc32c over the same spans",
            "ours_MB_s": nbytes / t_ours / 1e6,
            "ours_records_s": records / t_ours,
            "baseline_MB_s": nbytes / t_base / 1e6,
            "baseline_records_s": records / t_base,
            "ratio": t_base / t_ours,
        })
    print(f"RecordBatch v2, {RECORDS} records x {VALUE} B per batch ({size} B)\n")
    print_table(rows, ["operation", "ours_MB_s", "ours_records_s", "baseline_MB_s", "baseline_records_s", "ratio", "baseline"])
    print("\nratio = baseline time / our time (>1 means we are faster).")
    encode, decode, walked = rows
    goals = [goal(f"RecordBatch {r['operation']}", r["ours_MB_s"], "MB/s", goal=">= 0.5x the peer",
                  met=r["ratio"] >= 0.5, peer=r["baseline"], peer_value=r["baseline_MB_s"]) for r in (encode, decode)]
    goals.append(goal(f"RecordBatch {walked['operation']}", walked["ours_MB_s"], "MB/s", goal=">= 1,000 MB/s",
                      met=walked["ours_MB_s"] >= 1000, peer=walked["baseline"], peer_value=walked["baseline_MB_s"]))
    print_goals(goals)
    path = write_results("records", rows, goals)
    print(f"results: {path}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    sys.exit(main())
