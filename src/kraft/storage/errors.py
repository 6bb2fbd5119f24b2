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
