"""`make demo` (for now): record batches written to a segment, read back, verified, dumped.

Until the cluster exists this shows the layer that does exist end to end: data and
control batches in every codec go to a real segment file with fsync, are walked and
decoded back and compared with what was written, and are printed as `kraft dump-log`
prints them. A damaged copy shows what corruption looks like to the tools.
"""

import os
import shutil
from pathlib import Path

from kraft.cli.dump_log import dump_segment
from kraft.records import (
    Compression,
    LeaderChangeMessage,
    SimpleRecord,
    build_batch,
    build_control_batch,
    iter_file_batches,
    read_batches,
)

SEGMENT = "00000000000000000000.log"


def _batches() -> tuple[list[bytes], list[tuple[int, bytes | None]]]:
    """The demo's log: two leader epochs, each opened by a LeaderChange record."""
    batches: list[bytes] = []
    expected: list[tuple[int, bytes | None]] = []
    offset = 0

    def add(batch: bytes, values: list[bytes | None]) -> None:
        nonlocal offset
        batches.append(batch)
        expected.extend((offset + i, v) for i, v in enumerate(values))
        offset += len(values)

    epoch = 1
    leader_change = build_control_batch(
        LeaderChangeMessage(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2)),
        base_offset=offset,
        partition_leader_epoch=epoch,
    )
    add(leader_change, [None])  # control values are checked by type below, not by bytes
    records = [
        SimpleRecord(b"broker-1", b'{"type":"RegisterBroker","id":1}', [("source", b"demo")]),
        SimpleRecord(b"broker-2", b'{"type":"RegisterBroker","id":2}'),
        SimpleRecord(None, b'{"type":"Topic","name":"orders"}'),
    ]
    add(build_batch(records, base_offset=offset, partition_leader_epoch=epoch), [r.value for r in records])
    epoch = 2
    add(
        build_control_batch(
            LeaderChangeMessage(leader_id=2, voters=(1, 2, 3), granting_voters=(2, 3)),
            base_offset=offset,
            partition_leader_epoch=epoch,
        ),
        [None],
    )
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD):
        values = [b'{"type":"PartitionChange","codec":"%s","partition":%d}' % (codec.name.lower().encode(), p)
                  for p in range(2)]
        add(
            build_batch([SimpleRecord(None, v) for v in values], base_offset=offset,
                        partition_leader_epoch=epoch, compression=codec),
            values,
        )
    return batches, expected


def run(directory: Path) -> int:
    partition = directory / "__cluster_metadata-0"
    shutil.rmtree(partition, ignore_errors=True)
    partition.mkdir(parents=True)
    path = partition / SEGMENT
    batches, expected = _batches()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for batch in batches:
            os.write(fd, batch)
        os.fsync(fd)
    finally:
        os.close(fd)
    print(f"Wrote {len(batches)} batches ({len(expected)} records, {path.stat().st_size} bytes) to {path}\n")

    # Read back: the walker checks CRCs and offset contiguity, the decoder every record.
    data = path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    try:
        headers = list(iter_file_batches(fd, expected_offset=0))
    finally:
        os.close(fd)
    got = [(r.offset, None if b.header.is_control else r.value) for b in read_batches(data) for r in b.records()]
    assert got == expected, "read back differs from what was written"
    print(f"Read back and verified: {len(headers)} CRCs, offsets 0..{headers[-1].last_offset} contiguous, "
          f"every record equal to what was written.\n")

    print("$ kraft dump-log --print-records --files", path)
    for line in dump_segment(path, print_records=True):
        print(line)

    damaged = partition / "damaged.log"
    broken = bytearray(data)
    broken[headers[1].position + 70] ^= 0x10
    damaged.write_bytes(bytes(broken[:-9]))
    print("\nA copy with one flipped bit in the second batch and its last 9 bytes cut off:")
    print("$ kraft dump-log --files", damaged)
    for line in dump_segment(damaged):
        print(line)
    return 0
