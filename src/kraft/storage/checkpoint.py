"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

    leader-epoch-checkpoint         (partition dir)   "epoch start_offset"
    log-start-offset-checkpoint     (log dir)         "topic partition offset"
    recovery-point-offset-checkpoint (log dir)        "topic partition offset"

Written with atomic_write, read strictly: a file that does not parse is an error naming it.
The recovery point changes on every flush, so `InPlaceOffsetCheckpoint` rewrites it in
place instead (see there).

The two offset checkpoints carry a checksum. The log start and the recovery point decide
what the log may delete and what it may cut, so a flipped digit in either must be caught
before it acts: `1301` read as `3301` once made a node delete a segment that no snapshot
covered. Kafka's format has no room for a checksum line (its reader counts the entries),
so the checksum is a second entry under a name no topic can clash with, `__kraft_crc32c`
(partition 0, the CRC32C of every byte before that line). Kafka reads such a file as two
partitions' offsets and ignores the one it does not host; kraft reads files written by
Kafka, which have no checksum entry, and then relies on the cross-checks in file_log.py.
The leader-epoch checkpoint cannot carry one (Kafka's reader takes every entry as an
epoch); it is checked against the log's batches instead, entry by entry.
"""

import os
from collections.abc import Sequence
from pathlib import Path

import crc32c

from kraft.storage import fsutil
from kraft.storage.storage_errors import CorruptCheckpointError

VERSION = 0
CHECKSUM_ENTRY = "__kraft_crc32c"


def write_checkpoint(path: Path, entries: Sequence[tuple[object, ...]]) -> None:
    lines = [str(VERSION), str(len(entries)), *(" ".join(str(f) for f in e) for e in entries)]
    fsutil.atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of `path` as lists of strings, or None if it does not exist."""
    data = _read(path)
    return None if data is None else _entries(path, data, fields)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _entries(path: Path, data: bytes, fields: int) -> list[list[str]]:
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError(f"{path}: not a text checkpoint ({e})") from None
    lines = text.splitlines()
    try:
        if int(lines[0]) != VERSION:
            raise CorruptCheckpointError(f"{path}: unsupported checkpoint version {lines[0]!r}")
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError(f"{path}: missing or malformed version/count lines") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(e) != fields for e in entries):
        raise CorruptCheckpointError(f"{path}: expected {count} entries of {fields} fields, found {entries!r}")
    return entries


def _offset_content(topic: str, partition: int, offset: int) -> bytes:
    """A one-partition offset checkpoint with its checksum entry. The offset is zero-padded
    to 20 digits and the checksum to 10, so every version has the same length."""
    body = f"{VERSION}\n2\n{topic} {partition} {offset:020d}\n".encode()
    return body + f"{CHECKSUM_ENTRY} 0 {crc32c.crc32c(body):010d}\n".encode()


def read_offset_checkpoint(path: Path, topic: str, partition: int) -> int | None:
    """One partition's offset from a log-dir level checkpoint (log start, recovery point),
    or None if the file does not exist or does not name the partition. Raises
    CorruptCheckpointError if it does not parse or its checksum entry disagrees.

    The file is read once: a node rewrites it in place while it runs, and a checksum
    compared against a second read could belong to another version of it."""
    data = _read(path)
    if data is None:
        return None
    found: int | None = None
    for name, index, offset in _entries(path, data, 3):
        if name == CHECKSUM_ENTRY:
            line = data.rfind(f"\n{CHECKSUM_ENTRY} ".encode()) + 1
            if not offset.isdigit() or crc32c.crc32c(data[:line]) != int(offset):
                raise CorruptCheckpointError(f"{path}: checksum mismatch: the file is damaged")
            continue
        try:
            if name == topic and int(index) == partition:
                found = int(offset)
        except ValueError:
            raise CorruptCheckpointError(f"{path}: bad partition or offset in {name} {index} {offset}") from None
    if found is not None and found < 0:
        raise CorruptCheckpointError(f"{path}: negative offset {found} for {topic}-{partition}")
    return found


def write_offset_checkpoint(path: Path, topic: str, partition: int, offset: int) -> None:
    fsutil.atomic_write(path, _offset_content(topic, partition, offset))


class InPlaceOffsetCheckpoint:
    """One partition's offset checkpoint, made durable on every write at the cost of one
    small write and one fdatasync.

    The recovery point must be durable before a flushed offset is reported, or opening
    cannot tell fsynced data gone bad (refused) from a torn tail (cut). Kafka's way, a
    temporary file and a rename, costs three fsyncs, so Kafka writes its recovery point
    lazily. Here every version of the file has the same length (see `_offset_content`)
    and lies in its first disk sector, so a pwrite over the old bytes leaves the old value
    or the new after a crash, and fdatasync has no metadata to write. The file still reads
    as Kafka's format.
    """

    def __init__(self, path: Path, topic: str, partition: int, offset: int) -> None:
        self.path = path
        self._topic, self._partition = topic, partition
        fsutil.atomic_write(path, _offset_content(topic, partition, offset))  # the fixed-length form, whole once
        with fsutil.disk("open", path):
            self._fd = os.open(path, os.O_WRONLY)

    def write(self, offset: int) -> None:
        fsutil.pwrite_all(self._fd, _offset_content(self._topic, self._partition, offset), 0, self.path)
        fsutil.fdatasync(self._fd, self.path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
