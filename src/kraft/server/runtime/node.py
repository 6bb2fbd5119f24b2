"""One kraft node: Raft partitions driven by asyncio, on Kafka's wire protocol.

The node owns the clock, the sockets and the disk; the cores decide. It replicates
`__cluster_metadata-0`, whose state machine is the QuorumController, and the
`offsets.topic.num.partitions` partitions of `__consumer_offsets`, each a Raft log of its
own on the same voters (on a dynamic quorum, voters that follow the metadata partition's:
offsets_voters.py) whose state machine is that partition's GroupCoordinator. Each
partition is driven by a PartitionDriver (partition_driver.py: step, timer, flush, snapshot
job); they share the peer connections, the listeners and the node's fate (a fatal error in
one stops the node).

Two listeners: the controller listener (controller.listener.names) serves the Raft RPCs
to peers, each routed to the core of the partition it names; the client listener serves
Kafka clients (kraft.server.apis.client_api, and the group APIs of kraft.groups). The handlers
see the node only as a NodeContext (context.py) and a GroupContext (groups/api.py), which
this class implements: the reads they may make, and `step` / `run`, the ways they act.
"""

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from random import Random
from typing import Any, TypeVar

from kraft.controller import QuorumController
from kraft.controller.bootstrap import read_bootstrap
from kraft.groups import OFFSETS_TOPIC, GroupApi, GroupConfig, GroupCoordinator
from kraft.metadata import MetadataImage, features
from kraft.protocol import KafkaServer
from kraft.protocol.server import FeaturesAnswer
from kraft.protocol.tasks import cancel_and_wait
from kraft.raft import RaftConfig, RaftCore
from kraft.raft import messages as m
from kraft.raft.epochs import EpochHistory
from kraft.raft.voters import NO_DIRECTORY
from kraft.security.acl import AclOperation, ResourceType
from kraft.server.apis import features_api
from kraft.server.apis.client_api import ClientApi
from kraft.server.apis.raft_versions import PEER_RPCS, RaftVersions
from kraft.server.node_metrics import NodeMetrics
from kraft.server.runtime import fetch_batch, fetch_snapshot_batch, leadership_balance, offsets_voters
from kraft.server.runtime.fetch_batch import FetchBatcher
from kraft.server.runtime.fetch_snapshot_batch import FetchSnapshotBatcher
from kraft.server.runtime.partition_driver import FATAL, PartitionDriver, logging_as
from kraft.server.runtime.peers import Peers
from kraft.server.settings.authorization import Authorization
from kraft.server.settings.listener_security import ControllerConnector, controller_connector, listener_security
from kraft.server.settings.server_config import Endpoint, ServerConfig
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage import FileLog, FileQuorumStateStore, FileSnapshotStore, LogReadInfo
from kraft.storage.dirlock import DirectoryLock
from kraft.storage.fsutil import open_to_others
from kraft.storage.meta_properties import StorageNotFormattedError, read_directory_id, read_meta_properties

log = logging.getLogger("kraft.server")


def _warn_if_open_to_others(metadata_dir: Path) -> None:
    """One line at start if the metadata log's directory, or one of the partition
    directories in it, lets others than the node's user in: the log, its snapshots and the
    bootstrap checkpoint hold every SCRAM salt and key (kraft makes them 0700, 0600 files;
    one made before, or by hand, keeps its mode)."""
    children = sorted(p for p in metadata_dir.iterdir() if p.is_dir()) if metadata_dir.is_dir() else []
    wide = open_to_others([metadata_dir, *children])
    if wide:
        named = ", ".join(f"{path} ({mode:04o})" for path, mode in wide)
        log.warning("directories holding the metadata log are open to other users than the node's: %s; they hold "
                    "SCRAM salts and keys, from which passwords can be guessed offline: chmod 700 them", named)
T = TypeVar("T")

PARTITION_DIR = "__cluster_metadata-0"
# `__consumer_offsets`' topic id between kraft's nodes (Fetch v13 names topics by id). Kafka
# gives the topic a random id in its metadata; here it is no topic of the image, so one fixed
# id, derived from the name, that no random id will be.
OFFSETS_TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_URL, "kraft:__consumer_offsets")
__all__ = ["FATAL", "KraftNode"]

# The Raft RPCs, as the core speaks them: (api key, version). Every other version Kafka
# defines is converted to and from these (raft_versions.py); peers send these.
RAFT_APIS = {
    "Vote": (52, 2),  # KIP-996: PreVote
    "BeginQuorumEpoch": (53, 0),
    "EndQuorumEpoch": (54, 0),
    "Fetch": (1, 18),  # KIP-1166: the follower's high watermark
    "FetchSnapshot": (59, 0),
    "DescribeQuorum": (55, 1),
    "AddRaftVoter": (80, 1),  # KIP-853; v1 (KIP-1186): AckWhenCommitted
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
                          for lst in config.listeners}
        self.authorization = Authorization(config, lambda: self.image)
        # Before anything is read or written there: one process per data directory.
        self._lock = DirectoryLock(config.metadata_dir).acquire()
        try:
            cluster_id, node_id = read_meta_properties(config.metadata_dir)
            self.directory_id = read_directory_id(config.metadata_dir)  # KIP-853's; older formats have none
            if node_id != config.node_id:
                raise StorageNotFormattedError(
                    f"{config.metadata_dir} belongs to node {node_id}, but node.id is {config.node_id}"
                )
        except BaseException:
            self._lock.release()
            raise
        _warn_if_open_to_others(config.metadata_dir)
        self.cluster_id = cluster_id
        self.metrics = NodeMetrics(config.node_id)
        self.controller = QuorumController(
            SnapshotPolicy(
                config.metadata_log_max_record_bytes_between_snapshots,
                config.metadata_snapshot_min_changed_records_ratio,
                config.metadata_log_max_snapshot_interval_ms,
            ),
            freeze_loaded_images=True,  # a full collection over a large image would stall the loop
            idle_interval_ms=config.metadata_max_idle_interval_ms,
            derived_fencing=config.kraft_metadata_derived_fencing,
        )
        self.metadata: PartitionDriver | None = None  # __cluster_metadata-0, once started
        self.coordinators: dict[int, GroupCoordinator] = {}  # by __consumer_offsets partition
        self.offsets: dict[int, PartitionDriver] = {}
        self._routes: dict[tuple[Any, int], PartitionDriver] = {}  # (topic name or id, index) -> its driver
        self._endpoints_known: dict[int, Endpoint] = {}  # each peer's last endpoint found (dynamic quorum)
        self.stopping = False
        self.failure: BaseException | None = None
        self.failed = asyncio.Event()  # set with `failure`, so the process exits without polling
        self._tasks: set[asyncio.Task] = set()
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
        names = c.controller_listener_names
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
        (negative ids) controller.quorum.bootstrap.servers, as Kafka numbers them. A node
        named in controller.quorum.voters stays reachable there once the kraft.version upgrade
        has made the log's voters the quorum's and one was removed: it may lead still, and the
        offsets partitions keep those voters."""
        if node_id <= -2:
            servers = self.config.bootstrap_servers
            return servers[-2 - node_id] if -2 - node_id < len(servers) else None
        found = (self.controller_endpoints().get(node_id) or self.peers.learned.get(node_id)
                 or self.config.voters.get(node_id))
        if not self.config.voters:  # dynamic: a peer may be in no set the metadata log names now
            found = found or offsets_voters.voter_endpoint(self.offsets.values(), node_id, self.config) \
                or self._endpoints_known.get(node_id)
            if found is not None:
                self._endpoints_known[node_id] = found
        return found

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
            election_timeout_ms=c.controller_quorum_election_timeout_ms,
            election_backoff_max_ms=c.controller_quorum_election_backoff_max_ms,
            fetch_timeout_ms=c.controller_quorum_fetch_timeout_ms,
            # A parked Fetch must come back well before the follower's fetch timeout.
            fetch_max_wait_ms=min(500, c.controller_quorum_fetch_timeout_ms // 2),
            request_timeout_ms=c.controller_quorum_request_timeout_ms,
            retry_backoff_ms=c.controller_quorum_retry_backoff_ms,
            append_linger_ms=c.controller_quorum_append_linger_ms,
            auto_join=c.controller_quorum_auto_join_enable and c.is_voter,  # a controller's (KIP-1186)
            snapshot_response_max_bytes=c.replica_fetch_response_max_bytes,
            snapshot_partition_max_bytes=c.replica_fetch_snapshot_max_bytes,
            start_offset_lag_time_max_ms=c.metadata_start_offset_lag_time_max_ms,
            max_retention_bytes=c.metadata_max_retention_bytes,
            max_retention_ms=c.metadata_max_retention_ms,
        )

    def _open_log(self, directory: Path, checkpoint_dir: Path | None = None) -> FileLog:
        c = self.config
        return FileLog(
            directory,
            segment_bytes=c.metadata_log_segment_bytes,
            segment_ms=c.metadata_log_segment_ms,
            recovery_point_interval_ms=c.log_flush_offset_checkpoint_interval_ms,
            checkpoint_dir=checkpoint_dir,
        )

    def _snapshot_policy(self) -> SnapshotPolicy:
        """The metadata.* snapshot settings; the offsets partitions take them too (Kafka has
        no such settings for `__consumer_offsets`, which it compacts instead)."""
        c = self.config
        return SnapshotPolicy(
            c.metadata_log_max_record_bytes_between_snapshots,
            c.metadata_snapshot_min_changed_records_ratio,
            c.metadata_log_max_snapshot_interval_ms,
        )

    def _route(self, driver: PartitionDriver) -> None:
        where = driver.partition
        self._routes[(where.topic, where.index)] = driver
        self._routes[(where.topic_id, where.index)] = driver

    def _start_offsets_partitions(self) -> None:
        """`__consumer_offsets-<p>` for p < offsets.topic.num.partitions: a Raft log each, in
        its own directory, with the metadata partition's timeouts, snapshot and retention
        settings; its GroupCoordinator its state machine. Its voters are controller.quorum.voters,
        or on a dynamic quorum (KIP-853) its own log's, which follow the metadata partition's
        (offsets_voters.py; an observer finds its leaders through the bootstrap servers)."""
        c = self.config
        groups = GroupConfig(
            min_session_timeout_ms=c.group_min_session_timeout_ms,
            max_session_timeout_ms=c.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
            max_size=c.group_max_size,
            offset_metadata_max_bytes=c.offset_metadata_max_bytes,
            commit_timeout_ms=c.offsets_commit_timeout_ms,
        )
        base = replace(self.raft_config(), directory_id=None, endpoints=(), auto_join=False,
                       answer_behind_high_watermark=False)
        for p in range(c.offsets_topic_num_partitions):
            directory = c.metadata_dir / offsets_voters.partition_dir(p)
            where = m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, p)
            coordinator = GroupCoordinator(p, groups, self._snapshot_policy(), rng=Random())
            with logging_as(where):  # opening the log and the quorum state may log a recovery
                log_ = self._open_log(directory, checkpoint_dir=directory)  # the log dir's are the metadata log's
                core = RaftCore(replace(base, partition=where), log_, FileQuorumStateStore(directory), Random(),
                                self.now(), coordinator, FileSnapshotStore(directory))
            coordinator.core = core
            self.coordinators[p] = coordinator
            self.offsets[p] = PartitionDriver(self, core, log_, coordinator)
            self._route(self.offsets[p])

    async def start(self) -> None:
        c = self.config
        directory = c.metadata_dir / PARTITION_DIR
        self.log = self._open_log(directory)
        self.snapshots = FileSnapshotStore(directory)
        self.controller.bootstrap = read_bootstrap(c.metadata_dir)
        self.store = FileQuorumStateStore(directory)
        core = RaftCore(
            self.raft_config(), self.log, self.store, Random(), self.now(), self.controller, self.snapshots,
            self.metrics.snapshots,
        )
        self.controller.core = core
        self.metadata = PartitionDriver(self, core, self.log, self.controller)
        self.metadata.timed = self.metrics.raft.on_step
        self._route(self.metadata)
        self._start_offsets_partitions()
        self.peers = Peers(
            self.peer_endpoint,
            f"kraft-node-{self.node_id}",
            c.controller_quorum_request_timeout_ms,
            c.controller_quorum_election_timeout_ms,
            self.controller_connector,
        )
        self.fetches = FetchBatcher(self.peers)
        self.snapshot_fetches = FetchSnapshotBatcher(self.peers)
        max_frame = c.socket_request_max_bytes
        versions = RaftVersions(c, RAFT_APIS, self.controller_endpoints, self.voter_directories, self.peer_endpoint)
        if c.is_voter:
            listener = c.controller_listener
            assert listener is not None
            self.raft_server = KafkaServer(max_frame_bytes=max_frame, limits=c.listener_limits(listener.name),
                                           name=f"node {self.node_id} controller listener",
                                           security=self._security[listener.name])
            for name in PEER_RPCS:
                versions.register(self.raft_server, name, self.handle_raft_request)
            self.raft_address = await self.raft_server.start(listener.endpoint.host, listener.endpoint.port)
        self.client_api = ClientApi(self, versions)
        client = c.client_listener
        assert client is not None
        self.client_server = KafkaServer(max_frame_bytes=max_frame, limits=c.listener_limits(client.name),
                                         name=f"node {self.node_id} client listener",
                                         security=self._security[client.name])
        self.client_api.register(self.client_server)
        GroupApi(self).register(self.client_server)
        self.client_server.features = self.api_versions_features
        if self.raft_server is not None:
            self.client_api.register_controller_apis(self.raft_server)
            self.raft_server.features = self.api_versions_features
        if self.authorization.enabled:
            self.client_server.guard = self.authorization.client_guard
            if self.raft_server is not None:
                self.raft_server.guard = self.authorization.controller_guard
        self.client_address = await self.client_server.start(client.endpoint.host, client.endpoint.port)
        if c.kraft_metrics_port >= 0:
            host, port = c.kraft_metrics_host, c.kraft_metrics_port
            try:
                self.metrics.serve(host, port)
            except OSError as e:
                raise OSError(e.errno, f"metrics endpoint cannot listen on {host}:{port}: {e.strerror}") from e
        self.metrics.bind(core)
        self.metrics.image.source = lambda: self.image
        self.client_api.start()
        for driver in self._drivers:
            driver.start()
        if c.auto_leader_rebalance_enable:
            self.spawn(leadership_balance.keep_apart(self.metadata, list(self.offsets.values()), self.now,
                                                     c.controller_quorum_fetch_timeout_ms))
        if not c.voters:
            self.spawn(offsets_voters.OffsetsVoters(
                self.node_id, self.cluster_id, self.metadata, self.offsets, c.controller_quorum_fetch_timeout_ms,
                c.controller_quorum_request_timeout_ms, self.now, self.spawn).run())
        log.info(
            "node %d started: cluster %s, voters %s, log %s, %d %s partitions, controller listener %s, "
            "client listener %s, metrics port %s", self.node_id, self.cluster_id, sorted(self.controller_endpoints()),
            directory, len(self.offsets), OFFSETS_TOPIC, self.raft_address, self.client_address, self.metrics.port,
        )

    @property
    def _drivers(self) -> list[PartitionDriver]:
        return ([self.metadata] if self.metadata is not None else []) + list(self.offsets.values())

    async def stop(self, graceful: bool = True) -> None:
        """Stops; a leader first resigns (EndQuorumEpoch) so a successor is elected at once.
        After a failure nothing more is written: no resignation, no flush, no checkpoint."""
        # The broker's shutdown heartbeat first: it needs a leader, and this node may be it.
        await self.client_api.stop()
        leading = [d for d in self._drivers if d.core.is_leader]
        if graceful and leading and self.failure is None:
            for driver in leading:
                driver.step(lambda c, now: c.resign(now))
            await self._hand_over([d.core for d in leading])
        self.stopping = True
        for server in (self.raft_server, self.client_server):
            if server is not None:
                await server.close()
        await self.peers.close()
        await cancel_and_wait(self._tasks)
        for driver in self._drivers:
            await driver.stop()
        self.metrics.close()
        self._lock.release()
        log.info("node %d stopped", self.node_id)

    async def _hand_over(self, cores: list[RaftCore]) -> None:
        """Keeps the node running until every voter has acknowledged EndQuorumEpoch (of every
        partition this node led), a newer
        epoch is seen, or a request timeout passes. Waiting only for the requests under way
        was not enough: one queued behind another request to the same voter, or retried
        after a failure, was cancelled by the stop, and that voter, which had the longest
        log, sat out the fetch timeout before campaigning (5 s in a CI run)."""
        deadline = time.monotonic() + self.config.controller_quorum_request_timeout_ms / 1000
        while any(c.handing_over for c in cores) and self.failure is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # responses and the core's timer, retries included, run meanwhile
        if any(c.handing_over for c in cores):
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
    def core(self) -> RaftCore | None:
        """The metadata partition's core (None before start)."""
        return self.metadata.core if self.metadata is not None else None

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
    def kraft_version(self) -> int:
        return self._running.voters.kraft_version

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

    def api_versions_features(self, version: int) -> FeaturesAnswer:
        """What ApiVersions lists of features: this software's, and the finalized levels of the
        image this node has applied (kraft.version from its Raft layer)."""
        levels = features.finalized(self.image, self.kraft_version)
        return features_api.api_versions_features(version, features.SUPPORTED, levels, self.applied_offset)

    def after_step(self, listener: Callable[[], None]) -> None:
        """A handler's `on_step`: it reads what changed through this context, not the core."""
        self.on_step(lambda core: listener())

    # ---------------------------------------------------------------- consumer groups (GroupContext)

    @property
    def offsets_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    async def run(self, partition: int, action: Callable[[GroupCoordinator, int], T]) -> T | None:
        driver, coordinator = self.offsets.get(partition), self.coordinators.get(partition)
        if driver is None or coordinator is None:
            return None
        return await driver.step_together(lambda core, now: action(coordinator, now))

    def coordinator_endpoint(self, partition: int) -> tuple[int, str, int] | None:
        """The partition leader's client listener, as the metadata image registers it (or
        this node's own)."""
        driver = self.offsets.get(partition)
        leader = driver.core.leader_id if driver is not None else None
        broker = self.client_api.reads.brokers().get(leader) if leader is not None else None
        return (leader, broker["host"], broker["port"]) if leader is not None and broker is not None else None

    def knows_partition(self, topic: str, partition: int) -> bool:
        if topic == m.METADATA_TOPIC:
            return partition == m.METADATA_PARTITION
        found = self.image.topic(topic)
        return found is not None and 0 <= partition < len(found.partitions)

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorization.allowed(operation, resource_type, name)

    def spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---------------------------------------------------------------- driving the cores

    @staticmethod
    def now() -> int:
        return int(time.time() * 1000)

    def on_step(self, listener: Callable[[RaftCore], None]) -> None:
        """Called with the metadata core after each of its steps (a driver's hook: the
        benchmark's node sees its completions from it; handlers use `after_step`)."""
        assert self.metadata is not None, "listeners join once the node has started"
        self.metadata.step_listeners.append(listener)

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """One event into the metadata core (PartitionDriver.step); None if the node no
        longer steps."""
        return self.metadata.step(action) if self.metadata is not None else None

    async def step_together(self, action: Callable[[RaftCore, int], T]) -> T | None:
        return await self.metadata.step_together(action) if self.metadata is not None else None

    def fail(self, error: BaseException) -> None:
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
        for driver in self._drivers:
            driver.fail_replies(error)

    async def handle_raft_request(self, header: Any, request: Any) -> Any:
        """A peer's Raft RPC, into the core of the partition it names; the answer may come
        later (a parked Fetch). The membership RPCs name none: they are the metadata
        partition's. A partition this node does not replicate goes to the metadata core too,
        which answers UNKNOWN_TOPIC_OR_PARTITION as for any partition not its own. A Fetch
        naming several partitions is served by their cores and answered when one has news
        (fetch_batch.py); a FetchSnapshot naming several is split between their cores and its
        bytes shared (fetch_snapshot_batch.py)."""
        if self.failure is not None:
            raise ConnectionError(f"node {self.node_id} has stopped: {self.failure}")
        if isinstance(request, m.FetchRequest):
            partitions = fetch_batch.partitions_named(request)
            self.metrics.fetch_request_partitions.observe(partitions)
            if partitions > 1:  # one Fetch for every partition a follower has here (fetch_batch.py)
                return await fetch_batch.serve_across(request, lambda topic, index: self._routes.get((topic, index)))
        if isinstance(request, m.FetchSnapshotRequest):
            partitions = fetch_snapshot_batch.partitions_named(request)
            self.metrics.snapshot_request_partitions.observe(partitions)
            if partitions > 1:  # shared between the partitions' cores here (KIP-630)
                return await fetch_snapshot_batch.serve_across(
                    request, lambda name, index: self._routes.get((name, index)),
                    self.config.replica_fetch_response_max_bytes)
        named = m.named(request)
        driver = self._routes.get(named) if named is not None else None
        driver = driver or self.metadata
        assert driver is not None, "requests are served once the node has started"
        return await driver.handle_request(request)
