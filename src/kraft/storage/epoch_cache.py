"""The leader-epoch cache: for each epoch, the first offset written in it.

It answers the question every fetcher's safety rests on (KIP-320, KIP-595): for an epoch,
where does this log's history of it end? Entries only ever grow at the end (a new epoch
starts at the log end) and shrink by truncation at the end. They are kept below the log start
too (a few bytes per epoch), so that the question still has its exact answer for records that
retention or a snapshot removed.
"""

import bisect
from pathlib import Path

from kraft.storage.checkpoint import read_checkpoint, write_checkpoint
from kraft.storage.storage_errors import CorruptCheckpointError
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

        When every cached epoch is larger than the one asked, the asked epoch ended at the
        first entry's start only if that is offset 0 (nothing came before it). Otherwise the
        history before the first entry is not known here, and the answer says so (undefined)
        where Kafka would guess the first entry's start, which after a restore can lie far
        past where the asked epoch truly ended.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return OffsetAndEpoch(UNDEFINED_OFFSET, UNDEFINED_EPOCH)
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return OffsetAndEpoch(0, epoch) if self._starts[0] == 0 else OffsetAndEpoch(UNDEFINED_OFFSET, UNDEFINED_EPOCH)
        if i == len(self._epochs) - 1:
            return OffsetAndEpoch(log_end_offset, self._epochs[i])
        return OffsetAndEpoch(self._starts[i + 1], self._epochs[i])

    def truncate_from_end(self, end_offset: int) -> None:
        """Forgets epochs that start at or after `end_offset` (the log was cut there)."""
        i = bisect.bisect_left(self._starts, end_offset)
        if i < len(self._starts):
            del self._epochs[i:], self._starts[i:]
            self.save()

    def history_before(self, offset: int, epoch_before: int | None, held: bool) -> list[tuple[int, int]]:
        """The epochs of the offsets below `offset`, for a log restarting there from a snapshot
        whose last record (offset - 1) is of epoch `epoch_before`.

        When this cache `held` offset - 1 in that same epoch, its history below `offset` is
        exactly the snapshot's (Raft's log matching: one offset in one epoch means the same
        records before it), so it is kept whole. Otherwise all that is known is that
        `epoch_before` was in force at offset - 1: one entry saying so.
        """
        if held and epoch_before is not None and self.epoch_for_offset(offset - 1) == epoch_before:
            i = bisect.bisect_left(self._starts, offset)
            return list(zip(self._epochs[:i], self._starts[:i]))
        return [(epoch_before, offset - 1)] if epoch_before is not None and offset > 0 else []

    def keep_history(self, earlier: list[tuple[int, int]], log_start: int) -> None:
        """Puts back, before the entries rebuilt from the batches a log holds, the history of
        the offsets below them (or below `log_start` when it holds none) as an earlier copy of
        this cache knew it: entries starting there that are not newer than the first epoch
        held (one of that same epoch continues it, from its true start). This is what lets
        OffsetForLeaderEpoch answer exactly for epochs whose records are gone."""
        limit = self._starts[0] if self._starts else log_start
        first_epoch = self._epochs[0] if self._epochs else None
        kept = [(e, s) for e, s in earlier if s < limit and (first_epoch is None or e <= first_epoch)]
        if kept and kept[-1][0] == first_epoch:
            self._starts[0] = kept.pop()[1]
        self._epochs[:0] = [e for e, _ in kept]
        self._starts[:0] = [s for _, s in kept]

    def reset(self, entries: list[tuple[int, int]]) -> None:
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self.save()

    def save(self) -> None:
        if self.path is not None:
            write_checkpoint(self.path, self.entries())
