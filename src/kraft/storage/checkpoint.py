"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

    leader-epoch-checkpoint         (partition dir)   "epoch start_offset"
    log-start-offset-checkpoint     (log dir)         "topic partition offset"
    recovery-point-offset-checkpoint (log dir)        "topic partition offset"

Written with atomic_write, read strictly: a file that does not parse is an error naming it.
"""

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
        text = path.read_text()
    except FileNotFoundError:
        return None
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
        if name == topic and int(index) == partition:
            try:
                return int(offset)
            except ValueError:
                raise CorruptCheckpointError(f"{path}: bad offset {offset!r}") from None
    return None


def write_offset_checkpoint(path: Path, topic: str, partition: int, offset: int) -> None:
    write_checkpoint(path, [(topic, partition, offset)])
