"""Snapshot metrics (KIP-630), in a Prometheus registry the server publishes.

    GenSnapshotLatencyMs   histogram: create_snapshot() until the snapshot is frozen
    LoadSnapshotLatencyMs  histogram: handle_load_snapshot() on the state machine
    SnapshotSizeBytes      gauge: the latest snapshot's size
    SnapshotLag            gauge: high watermark minus the latest snapshot's end offset

The core reads no clock; these durations are measured with a clock the driver hands in, and
nothing the core decides depends on them.
"""

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, Histogram

_LATENCY_BUCKETS_MS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)


class SnapshotMetrics:
    def __init__(
        self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.clock = clock
        self.gen_latency_ms = Histogram(
            "kraft_gen_snapshot_latency_ms",
            "Time to generate a snapshot (KIP-630 GenSnapshotLatencyMs)",
            registry=self.registry,
            buckets=_LATENCY_BUCKETS_MS,
        )
        self.load_latency_ms = Histogram(
            "kraft_load_snapshot_latency_ms",
            "Time to load a snapshot (KIP-630 LoadSnapshotLatencyMs)",
            registry=self.registry,
            buckets=_LATENCY_BUCKETS_MS,
        )
        self.size_bytes = Gauge(
            "kraft_snapshot_size_bytes", "Size of the latest snapshot (KIP-630 SnapshotSizeBytes)", registry=self.registry
        )
        self.lag = Gauge(
            "kraft_snapshot_lag",
            "Offsets between the latest snapshot's end and the high watermark (KIP-630 SnapshotLag)",
            registry=self.registry,
        )

    def since_ms(self, started: float) -> float:
        return (self.clock() - started) * 1000
