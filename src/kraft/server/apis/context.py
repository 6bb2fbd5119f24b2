"""What the server's handlers may read of their node, and the one way they may act.

The handlers (admin, broker, client_api, client_reads, describe_cluster, describe_configs,
forwarding) answer requests; the node (node.py) owns the core, the log, the snapshots, the
controller and the sockets. A handler sees its node only as a NodeContext, which names
exactly what the handlers read: identity and config, the leadership, the committed part of
the log and its epoch history, the metadata image, the metrics they bump. So no handler
reaches past it into the log files or the snapshot store, and no handler imports the node
(which imports the handlers: that was the import cycle in `server/`).

A handler acts only in a step of the core: `step(action)` runs `action(core, now)` as one
event and returns what it returned, after which the node sends what the core asked for.
A controller operation is submitted that way (its records go out in that same step), and a
Raft request (DescribeQuorum, FetchSnapshot on the client listener) goes in through
`handle_raft_request`, a step whose answer may come later.
"""

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from kraft.controller import Pending
from kraft.metadata import MetadataImage
from kraft.metadata.operations import ControllerResult
from kraft.raft import RaftCore
from kraft.raft.epochs import EpochHistory
from kraft.server.node_metrics import NodeMetrics
from kraft.server.settings.authorization import Authorization
from kraft.server.settings.listener_security import ControllerConnector
from kraft.server.settings.server_config import Endpoint, ServerConfig
from kraft.storage import LogReadInfo

T = TypeVar("T")


class ControllerView(Protocol):
    """What the admin handlers ask of the metadata controller (the active one, or not)."""

    @property
    def active(self) -> bool:
        """Whether this node is the active controller and has caught up with its epoch."""
        ...

    @property
    def working_image(self) -> MetadataImage:
        """The committed image plus what this controller appended and is not yet committed."""
        ...

    def next_offset(self) -> int:
        """The offset the next submitted record will have (a registering broker's epoch)."""
        ...

    def submit(self, operation: Callable[[MetadataImage], ControllerResult], now: int) -> Pending:
        """Appends the operation's records; called only inside `NodeContext.step`."""
        ...


class NodeContext(Protocol):
    """A node as its handlers see it. Read between steps, everything here is as the last
    step of the core left it."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> ServerConfig:
        """The node's server.properties, parsed (immutable)."""
        ...

    def controller_endpoints(self) -> dict[int, Endpoint]:
        """The voters now and their controller endpoints (KIP-853: from the log when dynamic)."""
        ...

    def peer_endpoint(self, node_id: int) -> Endpoint | None:
        """Where a controller is, if known: a voter, or a leader a Fetch answer named."""
        ...

    @property
    def controller_connector(self) -> ControllerConnector:
        """How this node connects to a controller listener (its TLS and SASL login)."""
        ...

    @property
    def authorization(self) -> Authorization:
        """Whether the request being handled may act (ACLs; everything, when off)."""
        ...

    @property
    def metrics(self) -> NodeMetrics:
        """The metrics handlers bump (bytes fetched, commit latency) and the registry their
        own counters join."""
        ...

    @property
    def advertised_client_address(self) -> tuple[str, int] | None:
        """Where clients reach this node's client listener."""
        ...

    @property
    def failure(self) -> BaseException | None:
        """What stopped the node, if something did: nothing more is written after it."""
        ...

    # ---------------------------------------------------------------- the Raft leadership

    @property
    def leader_id(self) -> int | None: ...

    @property
    def epoch(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def kraft_version(self) -> int:
        """kraft.version as the Raft layer has it: its latest KRaftVersionRecord's, appended
        or committed (the level the controller checks a broker's registration against)."""
        ...

    # ---------------------------------------------------------------- the log, committed

    @property
    def high_watermark(self) -> int | None:
        """None on a new leader that has not committed in its epoch yet."""
        ...

    @property
    def log_start(self) -> int: ...

    @property
    def log_end(self) -> int: ...

    @property
    def history(self) -> EpochHistory:
        """Which epoch wrote which offsets (the log's, and before its start the snapshot's):
        every leader-epoch answer is read from it, as the core's own are."""
        ...

    def read_committed(self, offset: int, max_bytes: int) -> LogReadInfo:
        """Whole batches from `offset` (between the log start and end), none reaching the
        high watermark: what a consumer may read. The data is a FileRegion of the segment."""
        ...

    # ---------------------------------------------------------------- the metadata

    @property
    def image(self) -> MetadataImage:
        """The committed metadata image this node has applied."""
        ...

    @property
    def applied_offset(self) -> int:
        """The last offset the image holds (-1 before any)."""
        ...

    @property
    def controller(self) -> ControllerView: ...

    # ---------------------------------------------------------------- acting

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """Runs `action(core, now)` as one event of the core and returns its result; None
        when the node no longer steps (stopping, or stopped by a failure, this action's
        included). An error the action raises that does not stop the node is raised here."""
        ...

    async def step_together(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """`step` for a client's request: the requests of one turn of the loop share one step
        (PartitionDriver.step_together)."""
        ...

    async def handle_raft_request(self, header: Any, request: Any) -> Any:
        """A Raft request into the core; its answer may come later (a parked Fetch)."""
        ...

    def after_step(self, listener: Callable[[], None]) -> None:
        """Calls `listener` after every step (a waiting read looks again)."""
        ...
