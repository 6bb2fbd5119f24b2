"""A node's metrics, in one Prometheus registry, served over HTTP.

KIP-630's four snapshot metrics (kraft.raft.snapshot_metrics) plus what an operator watches on a
quorum: the high watermark, the log's end and start offsets, the epoch and the leader,
commit latency, the bytes moved by Fetch and FetchSnapshot, the partitions each FetchSnapshot
served names. And Kafka's own Raft metrics (KafkaRaftMetrics, JMX
kafka.server:type=raft-metrics), under the names Prometheus's JMX exporter gives them (`kafka_server_raft_metrics_current_leader`...), labelled with the
node and its role, so dashboards made for Kafka read kraft too.
"""

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from kraft.metadata import MetadataImage
from kraft.raft import RaftCore, Role
from kraft.raft.snapshot_metrics import SnapshotMetrics
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


class Window:
    """Kafka's sampled stats: what was recorded in the last `seconds` (two 30 s samples).

    Values are summed into one bucket per second, so a node stepping tens of thousands of
    times a second keeps sixty buckets, not a value per step. The node's loop records; the
    HTTP server's thread reads a copy of the bucket list, taken in one call.
    """

    def __init__(self, seconds: int = 60, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self._buckets: deque[list[float]] = deque()  # [second, sum, count, max]
        self._started = clock()

    def record(self, value: float) -> None:
        second = int(self.clock())
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            bucket = buckets[-1]
            bucket[1] += value
            bucket[2] += 1
            bucket[3] = max(bucket[3], value)
            return
        buckets.append([second, value, 1, value])
        while buckets[0][0] <= second - self.seconds:
            buckets.popleft()

    def _recent(self) -> list[list[float]]:
        cutoff = self.clock() - self.seconds
        return [b for b in list(self._buckets) if b[0] > cutoff]

    def avg(self) -> float:
        buckets = self._recent()
        count = sum(b[2] for b in buckets)
        return sum(b[1] for b in buckets) / count if count else float("nan")

    def max(self) -> float:
        return max((b[3] for b in self._recent()), default=float("nan"))

    def rate(self) -> float:
        """Per second, over the window (or over the time since start, if shorter)."""
        elapsed = min(self.seconds, self.clock() - self._started)
        return sum(b[1] for b in self._recent()) / elapsed if elapsed > 0 else 0.0


# A prospective (KIP-996's pre-vote) is "unattached", as in Kafka's gauge (its last branch):
# without it a scrape while the node pre-votes failed with a KeyError (HTTP 500).
_STATES = {Role.LEADER: "leader", Role.CANDIDATE: "candidate", Role.VOTED: "voted", Role.FOLLOWER: "follower",
           Role.RESIGNED: "resigned", Role.UNATTACHED: "unattached", Role.PROSPECTIVE: "unattached"}


class RaftMetrics(Collector):
    """Kafka's KafkaRaftMetrics, read from the core when scraped and from what the node
    records per step (`on_step`): committed and appended records, elections, busy time."""

    PREFIX = "kafka_server_raft_metrics_"

    def __init__(self, node_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.node_id = node_id
        self.clock = clock
        self.core: RaftCore | None = None
        self.commit_latency_ms = Window(clock=clock)
        self.election_latency_ms = Window(clock=clock)
        self.fetch_records = Window(clock=clock)
        self.append_records = Window(clock=clock)
        self.busy_seconds = Window(clock=clock)
        self._log_end = 0
        self._election_started: float | None = None

    def on_step(self, core: RaftCore, busy: float) -> None:
        """After each core step: `busy` seconds it took. Cheap: a few reads and compares."""
        end = core.log.end_offset
        if end > self._log_end:
            (self.append_records if core.is_leader else self.fetch_records).record(end - self._log_end)
        self._log_end = end
        self.busy_seconds.record(busy)
        if core.leader_id is None:
            if self._election_started is None:
                self._election_started = self.clock()
        elif self._election_started is not None:
            self.election_latency_ms.record((self.clock() - self._election_started) * 1000)
            self._election_started = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        core = self.core
        if core is None:
            return
        role = "voter" if core.is_voter else "observer"
        state = _STATES[core.role] if core.is_voter or core.role != Role.FOLLOWER else "observer"

        def gauge(name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
            names = ["node", "role", *labels]
            family = GaugeMetricFamily(self.PREFIX + name, doc, labels=names)
            family.add_metric([str(self.node_id), role, *labels.values()], value)
            return family

        def or_minus_one(value: int | None) -> int:
            return -1 if value is None else value

        yield gauge("current_state", "The current state of this member (1 for the state labelled)", 1, state=state)
        yield gauge("current_leader", "The current quorum leader's id; -1 indicates unknown", or_minus_one(core.leader_id))
        yield gauge("current_vote", "The current voted id; -1 indicates not voted for anyone",
                    or_minus_one(core.voted_id))
        yield gauge("current_epoch", "The current quorum epoch", core.epoch)
        yield gauge("high_watermark", "The high watermark maintained on this member; -1 if it is unknown",
                    or_minus_one(core.high_watermark))
        yield gauge("log_end_offset", "The current raft log end offset", core.log.end_offset)
        epochs = core.log.epoch_entries()  # one copy: the loop thread may be changing them
        yield gauge("log_end_epoch", "The current raft log end epoch", epochs[-1][0] if epochs else -1)
        yield gauge("commit_latency_avg", "The average time in ms to commit an entry in the raft log",
                    self.commit_latency_ms.avg())
        yield gauge("commit_latency_max", "The maximum time in ms to commit an entry in the raft log",
                    self.commit_latency_ms.max())
        yield gauge("election_latency_avg", "The average time in ms to elect a new leader",
                    self.election_latency_ms.avg())
        yield gauge("election_latency_max", "The maximum time in ms to elect a new leader",
                    self.election_latency_ms.max())
        yield gauge("fetch_records_rate", "The average number of records fetched from the leader of the raft quorum",
                    self.fetch_records.rate())
        yield gauge("append_records_rate", "The average number of records appended per sec by the leader",
                    self.append_records.rate())
        yield gauge("poll_idle_ratio_avg", "The ratio of time the Raft IO thread is idle as opposed to doing work",
                    max(0.0, 1.0 - self.busy_seconds.rate()))


class NodeMetrics:
    def __init__(self, node_id: int = -1) -> None:
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
        self.fetch_request_partitions = Histogram(
            "kraft_fetch_request_partitions",
            "Partitions named by each Fetch request served (a follower asks for all it follows here in one)",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 64),
        )
        self.snapshot_request_partitions = Histogram(
            "kraft_fetch_snapshot_request_partitions",
            "Partitions named by each FetchSnapshot request served (a lagging replica asks for all it lacks in one)",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 64),
        )
        self.latest_snapshot_end_offset = Gauge(
            "kraft_latest_snapshot_end_offset", "End offset of the latest snapshot (-1: none)", registry=r
        )
        self.latest_snapshot_epoch = Gauge("kraft_latest_snapshot_epoch", "Epoch of the latest snapshot", registry=r)
        self.image = ImageCollector()
        r.register(self.image)
        self.raft = RaftMetrics(node_id)
        r.register(self.raft)
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

        self.raft.core = core
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
