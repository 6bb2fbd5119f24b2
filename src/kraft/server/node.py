"""One kraft node: the Raft core driven by asyncio, on Kafka's wire protocol.

The node owns the clock, the sockets and the disk; the core decides. Every event (a
request, a response, a finished fsync, a timer) becomes one `step` of the core, after
which the node sends what the core's outbox holds, starts an fsync in a worker thread if
the log has unflushed appends (group commit: appends go on while it runs), starts a
snapshot job in a worker thread if one is due, and re-arms the timer for the core's next
deadline.

The timer is one loop.call_at handle, re-armed after a step only when the core's next
deadline comes earlier than the one armed (a step is often a single request's worth of
work, tens of thousands a second under load; the timer must cost nothing per step).

Two listeners: the controller listener (controller.listener.names) serves the Raft RPCs
to peers; the client listener serves Kafka clients (kraft.server.client_api). The handlers
see the node only as a NodeContext (context.py), which this class implements: the reads
they may make, and `step`, the one way they act.
"""

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Callable
from random import Random
from typing import Any, TypeVar

from kraft.controller import QuorumController, SnapshotJob
from kraft.controller.bootstrap import read_bootstrap
from kraft.metadata import MetadataImage, ReplayError
from kraft.protocol import KafkaServer
from kraft.protocol.tasks import cancel_and_wait
from kraft.raft import InvariantViolation, RaftConfig, RaftCore, Reply, Send
from kraft.raft import messages as m
from kraft.raft.epochs import EpochHistory
from kraft.raft.snapshot_policy import SnapshotPolicy
from kraft.raft.voters import NO_DIRECTORY
from kraft.server.authorization import Authorization
from kraft.server.client_api import ClientApi
from kraft.server.config import Endpoint, ServerConfig
from kraft.server.listener_security import ControllerConnector, controller_connector, listener_security
from kraft.server.metrics import NodeMetrics
from kraft.server.peers import Peers
from kraft.server.raft_versions import PEER_RPCS, RaftVersions
from kraft.storage import (
    CorruptLogError,
    CorruptSnapshotError,
    FileLog,
    FileQuorumStateStore,
    FileSnapshotStore,
    LogReadInfo,
)
from kraft.storage.dirlock import DirectoryLock
from kraft.storage.meta_properties import StorageNotFormattedError, read_directory_id, read_meta_properties

log = logging.getLogger("kraft.server")
T = TypeVar("T")

PARTITION_DIR = "__cluster_metadata-0"

# What stops a node at once: a write, sync, truncation, rename or removal that failed (the
# data's durability is unknown: after a failed fsync the kernel may have dropped the pages
# it could not write, and a second fsync would succeed with the data gone), durable data
# that no longer reads back, a committed metadata record that cannot be replayed (newer than
# this build, or contradicting the image: Kafka's loader stops there too), or the core
# finding its own rules broken. The core is sans-IO, so an OSError out of a step can only
# come from the storage it was handed.
FATAL = (InvariantViolation, OSError, CorruptLogError, CorruptSnapshotError, ReplayError)

# The Raft RPCs, as the core speaks them: (api key, version). Every other version Kafka
# defines is converted to and from these (raft_versions.py); peers send these.
RAFT_APIS = {
    "Vote": (52, 2),  # KIP-996: PreVote
    "BeginQuorumEpoch": (53, 0),
    "EndQuorumEpoch": (54, 0),
    "Fetch": (1, 13),
    "FetchSnapshot": (59, 0),
    "DescribeQuorum": (55, 1),
    "AddRaftVoter": (80, 0),  # KIP-853
    "RemoveRaftVoter": (81, 0),
    "UpdateRaftVoter": (82, 0),
}


class KraftNode:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        # Keystores and truststores are read now: a bad one stops the node before it takes its directory.
        self.controller_connector: ControllerConnector = controller_connector(config)
        self._security = {lst.name: listener_security(config, lst.name, lambda: self.image)
                          for lst in config["listeners"]}
        self.authorization = Authorization(config, lambda: self.image)
        # Before anything is read or written there: one process per data directory.
        self._lock = DirectoryLock(config.log_dir).acquire()
        try:
            cluster_id, node_id = read_meta_properties(config.log_dir)
            self.directory_id = read_directory_id(config.log_dir)  # KIP-853's; older formats have none
            if node_id != config.node_id:
                raise StorageNotFormattedError(
                    f"{config.log_dir} belongs to node {node_id}, but node.id is {config.node_id}"
                )
        except BaseException:
            self._lock.release()
            raise
        self.cluster_id = cluster_id
        self.metrics = NodeMetrics(config.node_id)
        self.controller = QuorumController(
            SnapshotPolicy(
                config["metadata.log.max.record.bytes.between.snapshots"],
                config["metadata.snapshot.min.changed_records.ratio"],
                config["metadata.log.max.snapshot.interval.ms"],
            ),
            freeze_loaded_images=True,  # a full collection over a large image would stall the loop
            idle_interval_ms=config["metadata.max.idle.interval.ms"],
            derived_fencing=config["kraft.metadata.derived.fencing"],
        )
        self.core: RaftCore | None = None
        self.stopping = False
        self.failure: BaseException | None = None
        self.failed = asyncio.Event()  # set with `failure`, so the process exits without polling
        self._replies: dict[int, asyncio.Future] = {}
        self._next_handle = 0
        self._flushing = False
        self._flush_task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0  # loop time the armed timer fires at
        self._tasks: set[asyncio.Task] = set()
        self._step_listeners: list[Callable[[RaftCore], None]] = []
        self.raft_server: KafkaServer | None = None
        self.client_server: KafkaServer | None = None
        self.raft_address: tuple[str, int] | None = None
        self.client_address: tuple[str, int] | None = None

    # ---------------------------------------------------------------- where the controllers are

    def controller_endpoints(self) -> dict[int, Endpoint]:
        """The voters and their controller endpoints: controller.quorum.voters for a static
        quorum; for a dynamic one (KIP-853), the latest voter set in the log, at the endpoint of
        this node's controller listener name (any, if the voter gave no such name)."""
        core, c = self.core, self.config
        if core is None or not core.voters.is_dynamic:
            return dict(c.voters)
        names = c["controller.listener.names"]
        found = {}
        for voter in core.voters.latest.voters:
            ep = core.voters.latest.endpoint(voter.voter_id, names[0] if names else None)
            if ep is not None:
                found[voter.voter_id] = Endpoint(ep.host, ep.port)
        return found

    def voter_directories(self) -> dict[int, uuid.UUID]:
        """The voters' directory ids (KIP-853; none in a static quorum)."""
        core = self.core
        if core is None:
            return {}
        return {v.voter_id: uuid.UUID(bytes=v.directory_id) for v in core.voters.latest.voters
                if v.directory_id != NO_DIRECTORY}

    def peer_endpoint(self, node_id: int) -> Endpoint | None:
        """Where the core's requests to `node_id` go: a voter, a leader some answer named, or
        (negative ids) controller.quorum.bootstrap.servers, as Kafka numbers them."""
        if node_id <= -2:
            servers = self.config.bootstrap_servers
            return servers[-2 - node_id] if -2 - node_id < len(servers) else None
        return self.controller_endpoints().get(node_id) or self.peers.learned.get(node_id)

    # ---------------------------------------------------------------- lifecycle

    def raft_config(self) -> RaftConfig:
        c = self.config
        return RaftConfig(
            node_id=c.node_id,
            voters=tuple(sorted(c.voters)),
            bootstrap_servers=len(c.bootstrap_servers),
            directory_id=self.directory_id.bytes if self.directory_id is not None else None,
            endpoints=c.own_controller_endpoints(),
            cluster_id=self.cluster_id,
            election_timeout_ms=c["controller.quorum.election.timeout.ms"],
            election_backoff_max_ms=c["controller.quorum.election.backoff.max.ms"],
            fetch_timeout_ms=c["controller.quorum.fetch.timeout.ms"],
            # A parked Fetch must come back well before the follower's fetch timeout.
            fetch_max_wait_ms=min(500, c["controller.quorum.fetch.timeout.ms"] // 2),
            request_timeout_ms=c["controller.quorum.request.timeout.ms"],
            retry_backoff_ms=c["controller.quorum.retry.backoff.ms"],
            append_linger_ms=c["controller.quorum.append.linger.ms"],
            snapshot_response_max_bytes=c["replica.fetch.response.max.bytes"],
            snapshot_partition_max_bytes=c["replica.fetch.snapshot.max.bytes"],
            start_offset_lag_time_max_ms=c["metadata.start.offset.lag.time.max.ms"],
            max_retention_bytes=c["metadata.max.retention.bytes"],
            max_retention_ms=c["metadata.max.retention.ms"],
        )

    async def start(self) -> None:
        c = self.config
        directory = c.log_dir / PARTITION_DIR
        self.log = FileLog(
            directory,
            segment_bytes=c["metadata.log.segment.bytes"],
            segment_ms=c["metadata.log.segment.ms"],
            recovery_point_interval_ms=c["log.flush.offset.checkpoint.interval.ms"],
        )
        self.snapshots = FileSnapshotStore(directory)
        self.controller.bootstrap = read_bootstrap(c.log_dir)
        self.store = FileQuorumStateStore(directory)
        self.core = RaftCore(
            self.raft_config(), self.log, self.store, Random(), self.now(), self.controller, self.snapshots,
            self.metrics.snapshots,
        )
        self.controller.core = self.core
        self.peers = Peers(
            self.peer_endpoint,
            f"kraft-node-{self.node_id}",
            c["controller.quorum.request.timeout.ms"],
            c["controller.quorum.election.timeout.ms"],
            self.controller_connector,
        )
        max_frame = c["socket.request.max.bytes"]
        versions = RaftVersions(c, RAFT_APIS, self.controller_endpoints, self.voter_directories)
        if c.is_voter:
            listener = c.controller_listener
            assert listener is not None
            self.raft_server = KafkaServer(max_frame_bytes=max_frame, limits=c.listener_limits,
                                           name=f"node {self.node_id} controller listener",
                                           security=self._security[listener.name])
            for name in PEER_RPCS:
                versions.register(self.raft_server, name, self.handle_raft_request)
            self.raft_address = await self.raft_server.start(listener.endpoint.host, listener.endpoint.port)
        self.client_api = ClientApi(self, versions)
        client = c.client_listener
        assert client is not None
        self.client_server = KafkaServer(max_frame_bytes=max_frame, limits=c.listener_limits,
                                         name=f"node {self.node_id} client listener",
                                         security=self._security[client.name])
        self.client_api.register(self.client_server)
        if self.raft_server is not None:
            self.client_api.register_controller_apis(self.raft_server)
        if self.authorization.enabled:
            self.client_server.guard = self.authorization.client_guard
            if self.raft_server is not None:
                self.raft_server.guard = self.authorization.controller_guard
        self.client_address = await self.client_server.start(client.endpoint.host, client.endpoint.port)
        if c["kraft.metrics.port"] >= 0:
            host, port = c["kraft.metrics.host"], c["kraft.metrics.port"]
            try:
                self.metrics.serve(host, port)
            except OSError as e:
                raise OSError(e.errno, f"metrics endpoint cannot listen on {host}:{port}: {e.strerror}") from e
        self.metrics.bind(self.core)
        self.metrics.image.source = lambda: self.image
        self.client_api.start()
        self.step(lambda core, now: core.tick(now))
        log.info(
            "node %d started: cluster %s, voters %s, log %s, controller listener %s, client listener %s, metrics port %s",
            self.node_id, self.cluster_id, sorted(self.controller_endpoints()), directory, self.raft_address, self.client_address,
            self.metrics.port,
        )

    async def stop(self, graceful: bool = True) -> None:
        """Stops; a leader first resigns (EndQuorumEpoch) so a successor is elected at once.
        After a failure nothing more is written: no resignation, no flush, no checkpoint."""
        core = self.core
        # The broker's shutdown heartbeat first: it needs a leader, and this node may be it.
        await self.client_api.stop()
        if graceful and core is not None and core.is_leader and self.failure is None:
            self.step(lambda c, now: c.resign(now))
            await self._hand_over(core)
        self.stopping = True
        if self._timer is not None:
            self._timer.cancel()
        if self._flush_task is not None:
            await asyncio.gather(self._flush_task, return_exceptions=True)  # never close under a running fsync
        for server in (self.raft_server, self.client_server):
            if server is not None:
                await server.close()
        await self.peers.close()
        await cancel_and_wait(self._tasks)
        for future in self._replies.values():
            future.cancel()
        self.log.close(flush=self.failure is None)
        self.metrics.close()
        self._lock.release()
        log.info("node %d stopped", self.node_id)

    async def _hand_over(self, core: RaftCore) -> None:
        """Keeps the node running until every voter has acknowledged EndQuorumEpoch, a newer
        epoch is seen, or a request timeout passes. Waiting only for the requests under way
        was not enough: one queued behind another request to the same voter, or retried
        after a failure, was cancelled by the stop, and that voter, which had the longest
        log, sat out the fetch timeout before campaigning (5 s in a CI run)."""
        deadline = time.monotonic() + self.config["controller.quorum.request.timeout.ms"] / 1000
        while core.handing_over and self.failure is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # responses and the core's timer, retries included, run meanwhile
        if core.handing_over:
            log.warning("node %d stops before every voter acknowledged EndQuorumEpoch: those that did not "
                        "campaign only after controller.quorum.fetch.timeout.ms", self.node_id)

    @property
    def advertised_client_address(self) -> tuple[str, int] | None:
        """Where clients reach this node's client listener, as it registers it: its
        advertised.listeners entry, else the bound address, an unspecified host (a listener
        on every interface) replaced by this host's name, as Kafka does."""
        listener = self.config.client_listener
        if listener is None or self.client_address is None:
            return None
        advertised = self.config.advertised(listener)
        if advertised is listener.endpoint:
            host, port = self.client_address
        else:
            host, port = advertised.host, advertised.port or self.client_address[1]
        return (socket.getfqdn() if host in ("", "0.0.0.0", "::") else host), port

    # ---------------------------------------------------------------- what handlers read (NodeContext)

    @property
    def _running(self) -> RaftCore:
        core = self.core
        assert core is not None, "handlers run only once the node has started"
        return core

    @property
    def leader_id(self) -> int | None:
        return self._running.leader_id

    @property
    def epoch(self) -> int:
        return self._running.epoch

    @property
    def is_leader(self) -> bool:
        return self._running.is_leader

    @property
    def high_watermark(self) -> int | None:
        return self._running.high_watermark

    @property
    def log_start(self) -> int:
        return self.log.start_offset

    @property
    def log_end(self) -> int:
        return self.log.end_offset

    @property
    def history(self) -> EpochHistory:
        return self._running.history

    def read_committed(self, offset: int, max_bytes: int) -> LogReadInfo:
        hw = self._running.high_watermark
        return self.log.read(offset, max_bytes, upper_bound=hw if hw is not None else 0)

    @property
    def image(self) -> MetadataImage:
        return self.controller.cache.image

    @property
    def applied_offset(self) -> int:
        return self.controller.cache.offset

    def after_step(self, listener: Callable[[], None]) -> None:
        """A handler's `on_step`: it reads what changed through this context, not the core."""
        self.on_step(lambda core: listener())

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---------------------------------------------------------------- driving the core

    @staticmethod
    def now() -> int:
        return int(time.time() * 1000)

    def on_step(self, listener: Callable[[RaftCore], None]) -> None:
        """Called with the core after every step (a driver's hook: the benchmark's node sees
        its completions from it; handlers use `after_step`)."""
        self._step_listeners.append(listener)

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """One event into the core, then what it asks for; returns the action's result, or
        None if the node no longer steps. A fatal error (see FATAL) stops the node before
        anything else is sent; any other error is the action's own answer to its caller (a
        refused controller operation) and leaves the core as it was."""
        core = self.core
        if core is None or self.stopping or self.failure is not None:
            return None
        started = time.perf_counter()
        try:
            result = action(core, self.now())
        except FATAL as e:
            self._fail(e)
            return None
        try:
            self._after_step(core)
        except FATAL as e:
            self._fail(e)
        self.metrics.raft.on_step(core, time.perf_counter() - started)
        return result

    def _fail(self, error: BaseException) -> None:
        """Stops serving at once: nothing is stepped, sent or acknowledged after this."""
        if self.failure is not None:
            return
        self.failure = error
        self.failed.set()
        if isinstance(error, OSError):
            log.critical(
                "node %d stops: %s. Nothing more is acknowledged; the node exits without flushing. Check "
                "the disk (dmesg, free space), then restart it: it recovers from what reached the disk",
                self.node_id, error,
            )
        else:
            log.critical("node %d stops: %s", self.node_id, error)
        for future in self._replies.values():
            if not future.done():
                future.set_exception(error)

    def _after_step(self, core: RaftCore) -> None:
        for message in core.poll_outbox():
            if isinstance(message, Send):
                self._send(message)
            else:
                self._reply(message)
        if core.wants_flush and not self._flushing:
            self._flushing = True
            self._flush_task = asyncio.create_task(self._flush())
        now = self.now()
        self.controller.poll(now)
        job = self.controller.start_snapshot(now)
        if job is not None:
            self._spawn(self._snapshot(job))
        for listener in self._step_listeners:
            listener(core)
        self._arm_timer(core)

    def _send(self, send: Send) -> None:
        request_id = send.request_id
        extra = 0
        if isinstance(send.request, m.FetchRequest):
            extra = int(send.request.max_wait.total_seconds() * 1000)

        def on_response(response: Any) -> None:
            if isinstance(response, m.FetchSnapshotResponse):
                for topic in response.topics:
                    for p in topic.partitions:
                        self.metrics.snapshot_bytes_fetched.inc(len(p.unaligned_records or b""))
            self.step(lambda core, now: core.handle_response(request_id, response, now))

        self.peers.send(
            send.destination,
            send.request,
            on_response,
            lambda: self.step(lambda core, now: core.handle_send_failure(request_id, now)),
            extra,
        )

    def _reply(self, reply: Reply) -> None:
        future = self._replies.pop(reply.handle, None)
        if future is None or future.done():
            return
        response = reply.response
        if isinstance(response, m.FetchResponse):
            for topic in response.responses:
                for p in topic.partitions:
                    self.metrics.fetch_bytes.inc(len(p.records) if p.records is not None else 0)
        elif isinstance(response, m.FetchSnapshotResponse):
            for snapshot_topic in response.topics:
                for chunk in snapshot_topic.partitions:
                    self.metrics.snapshot_bytes_served.inc(len(chunk.unaligned_records or b""))
        future.set_result(response)

    async def handle_raft_request(self, header: Any, request: Any) -> Any:
        """A peer's Raft RPC: into the core; the answer may come later (a parked Fetch)."""
        if self.failure is not None:
            raise ConnectionError(f"node {self.node_id} has stopped: {self.failure}")
        self._next_handle += 1
        handle = self._next_handle
        future = asyncio.get_running_loop().create_future()
        self._replies[handle] = future
        self.step(lambda core, now: core.handle_request(handle, request, now))
        try:
            return await future
        finally:
            self._replies.pop(handle, None)

    def _arm_timer(self, core: RaftCore) -> None:
        """Makes sure a tick comes by the core's next deadline (and at least once a second)."""
        loop = asyncio.get_running_loop()
        now = self.now()
        deadline = min(core.next_deadline(), self.controller.next_deadline(now) or core.next_deadline())
        due = loop.time() + min(max(0.0, (deadline - now) / 1000), 1.0)
        if self._timer is not None and self._timer_due <= due:
            return  # an earlier tick is armed; it looks again when it fires
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = loop.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        core = self.core
        if core is None or self.stopping or self.failure is not None:
            return
        now = self.now()
        if min(core.next_deadline(), self.controller.next_deadline(now) or now + 1) <= now:
            self.step(lambda c, now: c.tick(now))
        else:
            self._arm_timer(core)  # woke early (the 1 s cap, or the clocks disagree by a little)

    async def _flush(self) -> None:
        """Group commit: one fsync, in a worker thread, for every append made before it began."""
        try:
            while self.core is not None and self.core.wants_flush and not self.stopping and self.failure is None:
                try:
                    await asyncio.to_thread(self.log.flush)
                except FATAL as e:
                    self._fail(e)
                    return
                self.step(lambda core, now: core.handle_flush(now))
        finally:
            self._flushing = False

    async def _snapshot(self, job: SnapshotJob) -> None:
        started = time.monotonic()
        try:
            await asyncio.to_thread(job.run)
        except FATAL as e:  # the snapshot's file could not be written: the disk is failing
            self.controller.finish_snapshot(job, e)
            self._fail(e)
            return
        except Exception as e:  # any other failure is logged and the snapshot retried later
            self.controller.finish_snapshot(job, e)
            return
        self.controller.finish_snapshot(job)
        log.info(
            "node %d wrote snapshot %d-%d in %.0f ms (%s)",
            self.node_id, job.writer.snapshot_id.end_offset, job.writer.snapshot_id.epoch,
            (time.monotonic() - started) * 1000, job.reason,
        )
        self.step(lambda core, now: core.tick(now))
