"""A node's metrics, in one Prometheus registry, served over HTTP.

KIP-630's four snapshot metrics (kraft.raft.metrics) plus what an operator watches on a
quorum: the high watermark, the log's end and start offsets, the epoch and the leader,
commit latency, and the bytes moved by Fetch and FetchSnapshot.
"""

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import InfoMetricFamily
from prometheus_client.registry import Collector

from kraft.metadata import MetadataImage
from kraft.raft import RaftCore
from kraft.raft.metrics import SnapshotMetrics
from kraft.storage import SnapshotId

log = logging.getLogger("kraft.server")


class ImageCollector(Collector):
    """kraft_metadata_image_info{offset, digest}: the image this node's state machine has
    reached, so nodes can be compared from outside. The digest hashes the whole image, which
    takes a while for a large one: it is computed when the endpoint is scraped (in the HTTP
    server's thread; images are immutable) and kept until the image changes, never on the
    node's event loop or on a timer that would load an idle node."""

    def __init__(self) -> None:
        self.source: Callable[[], MetadataImage | None] = lambda: None
        self._seen: tuple[MetadataImage, str] | None = None

    def collect(self) -> Iterator[InfoMetricFamily]:
        image = self.source()
        if image is None:
            return
        if self._seen is None or self._seen[0] is not image:
            self._seen = (image, image.digest())
        yield InfoMetricFamily("kraft_metadata_image", "The metadata image: the offset it reflects and a digest "
                               "of its content", value={"offset": str(image.offset), "digest": self._seen[1]})


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.snapshots = SnapshotMetrics(self.registry)
        r = self.registry
        self.high_watermark = Gauge("kraft_high_watermark", "The high watermark this node knows", registry=r)
        self.log_end_offset = Gauge("kraft_log_end_offset", "The end offset of this node's log", registry=r)
        self.log_start_offset = Gauge("kraft_log_start_offset", "The start offset of this node's log", registry=r)
        self.current_epoch = Gauge("kraft_current_epoch", "The epoch this node is in", registry=r)
        self.current_leader = Gauge("kraft_current_leader", "The leader this node knows (-1: none)", registry=r)
        self.commit_latency_ms = Histogram(
            "kraft_commit_latency_ms",
            "From an operation's append on the leader to its commit",
            registry=r,
            buckets=(0.5, 1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 5000),
        )
        self.fetch_bytes = Counter("kraft_fetch_bytes", "Record bytes served in Fetch responses", registry=r)
        self.snapshot_bytes_served = Counter(
            "kraft_fetch_snapshot_bytes_served", "Snapshot bytes served in FetchSnapshot responses", registry=r
        )
        self.snapshot_bytes_fetched = Counter(
            "kraft_fetch_snapshot_bytes_fetched", "Snapshot bytes received in FetchSnapshot responses", registry=r
        )
        self.latest_snapshot_end_offset = Gauge(
            "kraft_latest_snapshot_end_offset", "End offset of the latest snapshot (-1: none)", registry=r
        )
        self.latest_snapshot_epoch = Gauge("kraft_latest_snapshot_epoch", "Epoch of the latest snapshot", registry=r)
        self.image = ImageCollector()
        r.register(self.image)
        self.port: int | None = None
        self._server: Any = None

    def bind(self, core: RaftCore) -> None:
        """The gauges that follow the core are read from it when the endpoint is scraped
        (in the HTTP server's thread), rather than set after every step of the core: a
        busy node steps tens of thousands of times a second, and is scraped every few.
        Each read is of one attribute, or of a list copied in one call."""

        def latest() -> SnapshotId | None:
            ids = core.snapshots.list()
            return ids[-1] if ids else None

        def snapshot_lag() -> int:
            # KIP-630's SnapshotLag: from the latest snapshot's end (0 without one) to the high watermark.
            snapshot = latest()
            return max(0, (core.high_watermark or 0) - (snapshot.end_offset if snapshot is not None else 0))

        def or_minus_one(value: int | None) -> int:
            return -1 if value is None else value

        self.high_watermark.set_function(lambda: or_minus_one(core.high_watermark))
        self.log_end_offset.set_function(lambda: core.log.end_offset)
        self.log_start_offset.set_function(lambda: core.log.start_offset)
        self.current_epoch.set_function(lambda: core.epoch)
        self.current_leader.set_function(lambda: or_minus_one(core.leader_id))
        self.latest_snapshot_end_offset.set_function(lambda: or_minus_one(getattr(latest(), "end_offset", None)))
        self.latest_snapshot_epoch.set_function(lambda: or_minus_one(getattr(latest(), "epoch", None)))
        self.snapshots.lag.set_function(snapshot_lag)

    def serve(self, host: str, port: int) -> int:
        """Starts the HTTP endpoint (a daemon thread); returns the port it listens on."""
        server, _thread = start_http_server(port, host, registry=self.registry)
        self._server = server
        self.port = server.server_address[1]
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
