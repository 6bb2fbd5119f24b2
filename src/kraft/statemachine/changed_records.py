"""KIP-630's changed-records count, one rule for every state machine's cache.

The metadata cache and each groups cache count, as they apply batches, which of the latest
snapshot's records were modified or deleted since; the snapshot policy compares that with
the records the snapshot holds. It imports nothing of kraft's, so the metadata layer can
keep it without depending on the Raft layer.
"""

from collections.abc import Iterable
from typing import Any


class ChangedRecords:
    """What KIP-630's `metadata.snapshot.min.changed_records.ratio` counts: the latest
    snapshot's records modified or deleted since it, against the records it holds. Records
    added since do not count until they too are modified or deleted."""

    def __init__(self) -> None:
        self._changed: dict[Any, int] = {}  # record key -> the last offset it changed at
        self._snapshot_end = 0  # the latest snapshot's end offset (0: none)
        self.snapshot_records = 0  # records in the latest snapshot

    def changed(self, keys: Iterable[Any], offset: int) -> None:
        for key in keys:
            self._changed[key] = offset

    def loaded(self, end_offset: int, records: int) -> None:
        """A snapshot was loaded in place of everything: nothing has changed since."""
        self._changed.clear()
        self._snapshot_end = end_offset
        self.snapshot_records = records

    def written(self, end_offset: int, records: int) -> None:
        """A snapshot ending at `end_offset` was frozen: changes up to it no longer count,
        those applied since (while it was written) still do."""
        if end_offset <= self._snapshot_end:
            return
        self._snapshot_end = end_offset
        self.snapshot_records = records
        self._changed = {key: at for key, at in self._changed.items() if at >= end_offset}

    @property
    def count(self) -> int:
        return len(self._changed)

    @property
    def ratio(self) -> float:
        """count / snapshot_records; 1.0 when there is no snapshot to compare with (all in
        the log is then new), so the byte threshold alone decides."""
        if not self.snapshot_records:
            return 1.0
        return self.count / self.snapshot_records

