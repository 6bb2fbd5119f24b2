"""The leader-epoch cache: for each epoch, the first offset written in it.

It answers the question every fetcher's safety rests on (KIP-320, KIP-595): for an epoch,
where does this log's history of it end? Entries only ever grow at the end (a new epoch
starts at the log end) and shrink by truncation at either end.
"""

import bisect
from pathlib import Path

from kraft.storage.checkpoint import read_checkpoint, write_checkpoint
from kraft.storage.errors import CorruptCheckpointError
from kraft.storage.types import OffsetAndEpoch

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """Epoch -> start offset, kept in memory; `path` (if given) mirrors it in Kafka's format."""

    def __init__(self, path: Path | None = None, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self._epochs.append(epoch)
            self._starts.append(start)

    @classmethod
    def read(cls, path: Path) -> "LeaderEpochCache":
        """The checkpoint's entries as a detached cache (changing it does not touch the file)."""
        entries = []
        for fields in read_checkpoint(path, 2) or []:
            try:
                entries.append((int(fields[0]), int(fields[1])))
            except ValueError:
                raise CorruptCheckpointError(f"{path}: bad entry {fields!r}") from None
        for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
            if e2 <= e1 or s2 < s1:
                raise CorruptCheckpointError(f"{path}: entries out of order: {entries!r}")
        return cls(None, entries)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeaderEpochCache) and self.entries() == other.entries()

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in, per the cache."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Records that `epoch` starts at `start_offset` (the log end). True if that is new."""
        if self._epochs and epoch <= self._epochs[-1]:
            if epoch < self._epochs[-1]:
                raise ValueError(f"epoch {epoch} is older than the latest epoch {self._epochs[-1]}")
            return False
        if self._starts and start_offset < self._starts[-1]:
            raise ValueError(f"epoch {epoch} cannot start at {start_offset}, before epoch {self._epochs[-1]}")
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.save()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` and the offset where it ends (the next epoch's start, or the log end).

        When every cached epoch is larger than the one asked, the history before the first
        entry is gone (truncated or snapshotted); as Kafka does, answer the asked epoch with
        the first entry's start, which is where that history ended as far as anyone can know.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return OffsetAndEpoch(UNDEFINED_OFFSET, UNDEFINED_EPOCH)
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return OffsetAndEpoch(self._starts[0], epoch)
        if i == len(self._epochs) - 1:
            return OffsetAndEpoch(log_end_offset, self._epochs[i])
        return OffsetAndEpoch(self._starts[i + 1], self._epochs[i])

    def truncate_from_end(self, end_offset: int) -> None:
        """Forgets epochs that start at or after `end_offset` (the log was cut there)."""
        i = bisect.bisect_left(self._starts, end_offset)
        if i < len(self._starts):
            del self._epochs[i:], self._starts[i:]
            self.save()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drops history below `start_offset`, keeping the epoch in force there (as starting there)."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:i], self._starts[:i]
        self._starts[0] = start_offset
        self.save()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self.save()

    def save(self) -> None:
        if self.path is not None:
            write_checkpoint(self.path, self.entries())
