"""The snapshots a replica holds, as the core sees them between steps.

The store is the truth (the state machine freezes snapshots into it, a download adds one,
retention deletes); the catalog notices changes after each step and keeps what the core
asks of each snapshot often: its size and the last contained log timestamp (retention
reads both every cleanup), and the readers FetchSnapshot serves chunks from. It also
feeds Kafka's snapshot metrics: generation latency from create_snapshot() to the freeze,
the latest snapshot's size, and how far the high watermark is past it.
"""

from kraft.raft.epochs import EpochHistory
from kraft.raft.snapshot_metrics import SnapshotMetrics
from kraft.raft.state_machine import Listener
from kraft.storage import SnapshotError, SnapshotId, SnapshotNotFoundError, SnapshotReader, SnapshotStore


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

    def for_fetcher(self, fetch_offset: int, last_fetched_epoch: int, log_start: int) -> SnapshotId | None:
        """KIP-630: the latest snapshot, when a fetcher cannot go on from the log.

        Its offset is below the log start; or at it with an epoch other than the earliest
        snapshot's; or its last epoch is older than the earliest snapshot's; or it starts
        from nothing (offset 0) while a snapshot exists, which is the faster way in.

        Never the empty snapshot (0, 0) (Kafka's bootstrap snapshot id): it holds nothing
        to catch up with, and a fetcher at offset 0 sent to it would load it, fetch from 0
        again and be sent to it again, forever.
        """
        latest = self.store.latest()
        earliest = self.store.earliest()
        if latest is None or earliest is None or latest.end_offset == 0:
            return None
        if (
            fetch_offset == 0
            or fetch_offset < log_start
            or (fetch_offset == log_start and last_fetched_epoch != earliest.epoch)
            or last_fetched_epoch < earliest.epoch
        ):
            return latest
        return None

    @staticmethod
    def check_creatable(snapshot_id: SnapshotId, high_watermark: int | None, history: EpochHistory) -> None:
        """Raises SnapshotError unless the snapshot ends at or below the high watermark, at or
        above the log start offset, on a batch boundary, with the epoch the log has there: a
        snapshot must hold exactly a committed prefix of this log."""
        end, log = snapshot_id.end_offset, history.log
        if end <= 0:
            raise SnapshotError(
                f"cannot create snapshot {snapshot_id}: a snapshot must hold at least one record "
                f"(end offset 0 is the empty bootstrap snapshot, never sent to fetchers)"
            )
        if high_watermark is None or end > high_watermark:
            raise SnapshotError(f"cannot snapshot up to {end}: the high watermark is {high_watermark}")
        if end < log.start_offset:
            raise SnapshotError(f"cannot snapshot up to {end}: the log starts at {log.start_offset}")
        if end < log.end_offset and log.read(end, 1).first_offset != end:
            raise SnapshotError(f"cannot snapshot up to {end}: it is inside a batch; snapshots end on batch boundaries")
        expected = history.snapshot_id_at(end)
        if expected != snapshot_id:
            raise SnapshotError(
                f"cannot create snapshot {snapshot_id}: the log's epoch at offset {end - 1} is {expected.epoch}"
            )

    def load(self, snapshot_id: SnapshotId, listener: Listener) -> None:
        """Hands the snapshot to the state machine, timing it (Kafka's snapshot load latency)."""
        reader = self.store.open_reader(snapshot_id)
        started = self.metrics.clock() if self.metrics is not None else 0.0
        listener.handle_load_snapshot(reader)
        if self.metrics is not None:
            self.metrics.load_latency_ms.observe(self.metrics.since_ms(started))
