"""Errors raised while reading record batches.

Every error carries the absolute byte position of the batch (or record) it is about, so a
caller can say which file and where, and recovery can cut a log at exactly that point.
"""


class RecordError(Exception):
    """Base class for problems with record bytes."""


class CorruptRecordError(RecordError):
    """The bytes at `position` are not a valid record batch (CRC, framing, field ranges)."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch at position {position}: {reason}")
        self.position = position
        self.reason = reason


class IncompleteBatchError(CorruptRecordError):
    """The buffer ends inside a batch: a torn write or a short read, not a bad checksum."""


class UnsupportedCompressionError(RecordError):
    """The batch uses a codec this build does not decode (snappy)."""
