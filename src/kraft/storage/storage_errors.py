"""Errors from the storage layer. Each says which file and where, when there is one."""

from pathlib import Path


class StorageError(Exception):
    """Base class for log and checkpoint problems."""


class CorruptLogError(StorageError):
    """Data that was durable no longer reads back: opening refuses rather than drop it."""

    def __init__(self, path: Path | str, position: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt at position {position}: {reason}")
        self.path = Path(path)
        self.position = position
        self.reason = reason


class CorruptCheckpointError(StorageError):
    """A checkpoint file (leader epochs, log start offset, quorum-state) that does not parse."""


class OffsetOutOfRangeError(StorageError):
    def __init__(self, offset: int, start: int, end: int) -> None:
        super().__init__(f"offset {offset} is outside the log [{start}, {end})")
        self.offset = offset


class InvalidAppendError(StorageError):
    """A follower append that would break the log: bad CRC, a gap or overlap, an epoch going back."""


class RecordTooLargeError(InvalidAppendError):
    pass


class SnapshotError(StorageError):
    """A snapshot that cannot be created, found, written or frozen as asked."""


class SnapshotNotFoundError(SnapshotError):
    """No frozen snapshot with that id (FetchSnapshot's SNAPSHOT_NOT_FOUND)."""


class PositionOutOfRangeError(SnapshotError):
    """A chunk asked for past a snapshot's end (FetchSnapshot's POSITION_OUT_OF_RANGE)."""


class CorruptSnapshotError(SnapshotError):
    """Snapshot bytes that are not a whole, valid snapshot; `name` is the file (or the
    in-memory snapshot's id) and `position` the byte where the damage was found."""

    def __init__(self, name: Path | str, position: int, reason: str) -> None:
        super().__init__(f"{name}: corrupt snapshot at position {position}: {reason}")
        self.name = str(name)
        self.position = position
        self.reason = reason
