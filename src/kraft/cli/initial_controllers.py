"""`kraft storage format --standalone | --initial-controllers ... | --no-initial-controllers`:
which voters a new dynamic quorum (KIP-853) starts with, and the rules for asking.

A static quorum's voters are controller.quorum.voters. A dynamic quorum's are in its log,
and a new log gets its first voter set from the format command: the bootstrap snapshot
(`storage/bootstrap_snapshot.py`) holds it. The flags are Kafka's (StorageTool):

- `--standalone` (`-s`): this controller is the only voter, at its advertised controller
  endpoint, with the directory id the format makes;
- `--initial-controllers` (`-I`) `id@host:port:directory_id,...`: these voters (the same
  text on every node, Kafka's DynamicVoters syntax); a node among them gets its own
  directory id from the list, one not among them a new one and no vote (an observer that
  `kraft metadata-quorum add-controller` may promote);
- `--no-initial-controllers` (`-N`): no voter set written (a controller joining a dynamic
  quorum later, or a broker).

Rules, checked before anything is written: the three are mutually exclusive;
`--standalone` and `--initial-controllers` are for controllers, whose configuration must
not name controller.quorum.voters (the voters would then be static, and the two sets
could disagree) and must name controller.quorum.bootstrap.servers (how the nodes find the
leader); a controller without controller.quorum.voters needs one of the three (Kafka's
rule). A node listed in --initial-controllers must be listed at the endpoint its
controller listener advertises, or the quorum would try to reach it elsewhere; directory
ids must not be Kafka's reserved ones (below 100: "unassigned", "lost").
"""

import uuid
from dataclasses import dataclass

from kraft.records import Voter, VoterEndpoint
from kraft.server.settings.server_config import ServerConfig
from kraft.storage.meta_properties import (
    is_reserved_directory_id,
    kafka_text,
    random_directory_id,
    uuid_from_kafka_text,
)

KRAFT_VERSIONS_SUPPORTED = (0, 1)  # what Kafka's DynamicVoter writes for every initial voter
UNSPECIFIED_HOST = "0.0.0.0"  # kraft's config reads a listener without a host as this
DEFAULT_HOST = "localhost"  # Kafka's for a controller listener without a host (--standalone)


def reachable_host(host: str) -> str:
    """A listener's host as a voter's endpoint: Kafka's "localhost" for a listener that
    names none (which kraft's configuration reads as 0.0.0.0)."""
    return DEFAULT_HOST if host in ("", UNSPECIFIED_HOST) else host


class InitialControllersError(ValueError):
    """A flag or a configuration that cannot make the voter set; one line, before any write."""


@dataclass(frozen=True)
class InitialController:
    """One voter of --initial-controllers (Kafka's DynamicVoter)."""

    node_id: int
    host: str
    port: int
    directory_id: uuid.UUID

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{kafka_text(self.directory_id)}"


def parse_initial_controller(text: str) -> InitialController:
    """`id@host:port:directory_id`, the host in brackets if it has colons (IPv6), with
    Kafka's DynamicVoter.parse messages."""
    text = text.strip()
    at = text.find("@")
    if at < 0:
        raise ValueError("No @ found in dynamic voter string.")
    if at == 0:
        raise ValueError("Invalid @ at beginning of dynamic voter string.")
    try:
        node_id = int(text[:at])
    except ValueError:
        raise ValueError("Failed to parse node id in dynamic voter string.") from None
    if node_id < 0:
        raise ValueError(f"Invalid negative node id {node_id} in dynamic voter string.")
    rest = text[at + 1 :]
    if not rest:
        raise ValueError("No hostname found after node id.")
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise ValueError("Hostname began with left bracket, but no right bracket was found.")
        host, rest = rest[1:end], rest[end + 1 :]
    else:
        end = rest.find(":")
        if end < 0:
            raise ValueError("No colon following hostname could be found.")
        host, rest = rest[:end], rest[end:]
    if not rest.startswith(":"):
        raise ValueError("Port section must start with a colon.")
    port_text, separator, directory_text = rest[1:].partition(":")
    if not separator:
        raise ValueError("No colon following port could be found.")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError("Failed to parse port in dynamic voter string.") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"Invalid port {port} in dynamic voter string.")
    try:
        directory_id = uuid_from_kafka_text(directory_text)
    except ValueError as e:
        raise ValueError(f"Failed to parse directory ID in dynamic voter string: {e}") from None
    return InitialController(node_id, host, port, directory_id)


def parse_initial_controllers(text: str) -> tuple[InitialController, ...]:
    """The comma-separated list (Kafka's DynamicVoters.parse), in node id order;
    InitialControllersError naming what is wrong."""
    controllers: dict[int, InitialController] = {}
    for entry in (e for e in text.strip().split(",") if e):
        try:
            controller = parse_initial_controller(entry)
        except ValueError as e:
            raise InitialControllersError(f"--initial-controllers: {entry.strip()!r}: {e}") from None
        if controller.node_id in controllers:
            raise InitialControllersError(
                f"--initial-controllers: Node id {controller.node_id} was specified more than once.")
        if is_reserved_directory_id(controller.directory_id):
            raise InitialControllersError(
                f"--initial-controllers: {entry.strip()!r}: directory id {kafka_text(controller.directory_id)} is "
                "reserved (Kafka keeps ids below 100 for unassigned and lost directories); "
                "`kraft storage random-uuid` makes one")
        controllers[controller.node_id] = controller
    if not controllers:
        raise InitialControllersError("--initial-controllers: No voters given.")
    return tuple(controllers[n] for n in sorted(controllers))


@dataclass(frozen=True)
class DynamicQuorumFormat:
    """What the format command writes for a dynamic quorum: the voters (the bootstrap
    snapshot), this node's directory id (meta.properties), whether this node is a voter."""

    controllers: tuple[InitialController, ...]
    listener: str  # controller.listener.names' first: every voter's endpoint is under it
    directory_id: uuid.UUID
    is_voter: bool

    @property
    def description(self) -> str:
        """Kafka's words for the directory, in the "Formatting ..." line."""
        return "dynamic metadata voter directory" if self.is_voter else "dynamic metadata directory"

    def voters(self) -> tuple[Voter, ...]:
        low, high = KRAFT_VERSIONS_SUPPORTED
        return tuple(Voter(c.node_id, c.directory_id.bytes, (VoterEndpoint(self.listener, c.host, c.port),), low, high)
                     for c in self.controllers)


@dataclass(frozen=True)
class QuorumFlags:
    """The format command's quorum flags, checked on their own before the configuration is
    read (as Kafka's argument parser does): one at most, the list parsed."""

    standalone: bool = False
    initial_controllers: tuple[InitialController, ...] | None = None
    no_initial_controllers: bool = False

    @classmethod
    def parse(cls, standalone: bool = False, initial_controllers: str | None = None,
              no_initial_controllers: bool = False) -> "QuorumFlags":
        given = [name for name, present in (("--standalone", standalone),
                                            ("--initial-controllers", initial_controllers is not None),
                                            ("--no-initial-controllers", no_initial_controllers)) if present]
        if len(given) > 1:
            raise InitialControllersError(f"{' and '.join(given)} cannot be used together: give one of them")
        listed = parse_initial_controllers(initial_controllers) if initial_controllers is not None else None
        return cls(standalone, listed, no_initial_controllers)

    @property
    def dynamic(self) -> bool:
        """Whether a voter set is to be written."""
        return self.standalone or self.initial_controllers is not None

    @property
    def name(self) -> str:
        return "--standalone" if self.standalone else "--initial-controllers"


def _advertised_controller(config: ServerConfig) -> tuple[str, int]:
    """(host, port) this controller's controller listener is advertised at; the host is
    "" if the listener names none."""
    listener = config.controller_listener
    if listener is None:
        raise InitialControllersError(f"{config.source}: listeners: no listener named in controller.listener.names")
    endpoint = config.advertised(listener)
    return ("" if endpoint.host == UNSPECIFIED_HOST else endpoint.host), endpoint.port


def plan_dynamic_quorum(config: ServerConfig, flags: QuorumFlags) -> DynamicQuorumFormat | None:
    """The voter set to format `config`'s node with, None for none (a static quorum, or
    --no-initial-controllers); InitialControllersError for what the rules refuse."""
    static_voters = config.controller_quorum_voters
    bootstrap_servers = config.controller_quorum_bootstrap_servers
    if flags.dynamic and not config.is_voter:
        raise InitialControllersError(f"You can only use {flags.name} on a controller "
                                      f"({config.source}: process.roles={','.join(sorted(config.process_roles))})")
    if flags.dynamic and static_voters:
        raise InitialControllersError(
            f"{config.source} sets controller.quorum.voters, which makes the quorum static: {flags.name} formats a "
            "dynamic one, whose voters are in the log. Remove controller.quorum.voters and give "
            "controller.quorum.bootstrap.servers instead")
    if flags.dynamic and not bootstrap_servers:
        raise InitialControllersError(
            f"{config.source} does not set controller.quorum.bootstrap.servers, which a dynamic quorum's nodes find "
            f"its leader through: give it (host:port of one or more controllers) before formatting with {flags.name}")
    if not (flags.dynamic or flags.no_initial_controllers) and config.is_voter and not static_voters:
        raise InitialControllersError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the following: "
            "--standalone, --initial-controllers, or --no-initial-controllers.")
    if not flags.dynamic:
        return None
    host, port = _advertised_controller(config)
    if flags.standalone:
        if port == 0:
            raise InitialControllersError(
                f"--standalone: {config.source}'s controller listener has port 0, which no other node can be told; "
                "give it a fixed port")
        controllers: tuple[InitialController, ...] = (
            InitialController(config.node_id, reachable_host(host), port, random_directory_id()),)
    else:
        assert flags.initial_controllers is not None
        controllers = flags.initial_controllers
        own_entry = next((c for c in controllers if c.node_id == config.node_id), None)
        if own_entry is not None and (own_entry.port != port or host not in ("", own_entry.host)):
            raise InitialControllersError(
                f"--initial-controllers gives {own_entry} for node {config.node_id}, but its controller listener is "
                f"advertised at {host or '*'}:{port} ({config.source}): list the node where it listens")
    own = next((c for c in controllers if c.node_id == config.node_id), None)
    return DynamicQuorumFormat(controllers, config.controller_listener_name,
                               own.directory_id if own is not None else random_directory_id(), own is not None)
