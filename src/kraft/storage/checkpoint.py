"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

    leader-epoch-checkpoint         (partition dir)   "epoch start_offset"
    log-start-offset-checkpoint     (log dir)         "topic partition offset"
    recovery-point-offset-checkpoint (log dir)        "topic partition offset"

Written with atomic_write, read strictly: a file that does not parse is an error naming it.
The recovery point changes on every flush, so `InPlaceOffsetCheckpoint` rewrites it in
place instead (see there).
"""

import os
from pathlib import Path

from kraft.storage.errors import CorruptCheckpointError
from kraft.storage.fsutil import atomic_write

VERSION = 0


def write_checkpoint(path: Path, entries: list[tuple[object, ...]]) -> None:
    lines = [str(VERSION), str(len(entries)), *(" ".join(str(f) for f in e) for e in entries)]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of `path` as lists of strings, or None if it does not exist."""
    try:
        text = path.read_bytes().decode()
    except FileNotFoundError:
        return None
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


def read_offset_checkpoint(path: Path, topic: str, partition: int) -> int | None:
    """One partition's offset from a log-dir level checkpoint (log start, recovery point)."""
    entries = read_checkpoint(path, 3)
    for name, index, offset in entries or []:
        try:
            if name == topic and int(index) == partition:
                return int(offset)
        except ValueError:
            raise CorruptCheckpointError(f"{path}: bad partition or offset in {name} {index} {offset}") from None
    return None


def write_offset_checkpoint(path: Path, topic: str, partition: int, offset: int) -> None:
    write_checkpoint(path, [(topic, partition, offset)])


class InPlaceOffsetCheckpoint:
    """One partition's offset checkpoint, made durable on every write at the cost of one
    small write and one fdatasync.

    The recovery point must be durable before a flushed offset is reported, or opening
    cannot tell fsynced data gone bad (refused) from a torn tail (cut). Kafka's way, a
    temporary file and a rename, costs three fsyncs, so Kafka writes its recovery point
    lazily. Here the offset is zero-padded to 20 digits: every version of the file has the
    same length and lies in its first disk sector, so a pwrite over the old bytes leaves the
    old value or the new after a crash, and fdatasync has no metadata to write. The file
    still reads as Kafka's format (the padded number parses the same).
    """

    def __init__(self, path: Path, topic: str, partition: int) -> None:
        self.path = path
        self._prefix = f"{VERSION}\n1\n{topic} {partition} "
        current = read_offset_checkpoint(path, topic, partition)
        if current is None or path.read_bytes() != self._content(current):
            atomic_write(path, self._content(current or 0))  # the padded form, written whole once
        self._fd = os.open(path, os.O_WRONLY)

    def _content(self, offset: int) -> bytes:
        return f"{self._prefix}{offset:020d}\n".encode()

    def write(self, offset: int) -> None:
        data = self._content(offset)
        if os.pwrite(self._fd, data, 0) != len(data):
            raise OSError(f"{self.path}: short write")
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
