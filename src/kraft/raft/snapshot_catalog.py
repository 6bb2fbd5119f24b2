"""The snapshots a replica holds, as the core sees them between steps.

The store is the truth (the state machine freezes snapshots into it, a download adds one,
retention deletes); the catalog notices changes after each step and keeps what the core
asks of each snapshot often: its size and the last contained log timestamp (retention
reads both every cleanup), and the readers FetchSnapshot serves chunks from. It also
feeds Kafka's snapshot metrics: generation latency from create_snapshot() to the freeze,
the latest snapshot's size, and how far the high watermark is past it.
"""

from kraft.raft.metrics import SnapshotMetrics
from kraft.storage import SnapshotId, SnapshotNotFoundError, SnapshotReader, SnapshotStore


class SnapshotCatalog:
    def __init__(self, store: SnapshotStore, metrics: SnapshotMetrics | None) -> None:
        self.store = store
        self.metrics = metrics
        self._known: list[SnapshotId] = []
        self.sizes: dict[SnapshotId, int] = {}
        self.timestamps: dict[SnapshotId, int] = {}  # last contained log timestamp
        self._started: dict[SnapshotId, float] = {}  # create_snapshot() time, for GenSnapshotLatencyMs
        self._readers: dict[SnapshotId, SnapshotReader] = {}  # open for FetchSnapshot

    def creating(self, snapshot_id: SnapshotId) -> None:
        """The state machine started writing `snapshot_id`: its latency runs from now."""
        if self.metrics is not None:
            self._started[snapshot_id] = self.metrics.clock()

    def observe(self, high_watermark: int | None) -> None:
        """Learns of snapshots frozen or deleted since the last step."""
        ids = self.store.list()
        if ids == self._known:
            return
        for sid in ids:
            if sid not in self.sizes:
                reader = self.store.open_reader(sid)
                self.sizes[sid] = reader.size
                self.timestamps[sid] = reader.header.last_contained_log_timestamp
                started = self._started.pop(sid, None)
                if started is not None and self.metrics is not None:
                    self.metrics.gen_latency_ms.observe(self.metrics.since_ms(started))
        for sid in set(self.sizes) - set(ids):
            del self.sizes[sid], self.timestamps[sid]
            self._readers.pop(sid, None)
        self._known = ids
        self._update_metrics(high_watermark)

    def _update_metrics(self, high_watermark: int | None) -> None:
        latest = self.store.latest()
        if self.metrics is None or latest is None:
            return
        self.metrics.size_bytes.set(self.sizes[latest])
        if high_watermark is not None:
            self.metrics.lag.set(max(0, high_watermark - latest.end_offset))

    def reader(self, sid: SnapshotId) -> SnapshotReader | None:
        """An open reader of `sid` for FetchSnapshot (kept open between chunks); None if gone."""
        if sid not in self._readers:
            try:
                self._readers[sid] = self.store.open_reader(sid)
            except SnapshotNotFoundError:
                return None
        return self._readers[sid]
