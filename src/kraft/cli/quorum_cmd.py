"""`kraft metadata-quorum`, Kafka's kafka-metadata-quorum: flags, what it prints, one line
for every error.

    --bootstrap-server HOST:PORT[,...] | --bootstrap-controller HOST:PORT[,...]
    [--command-config FILE]
        describe --status | --replication [--human-readable]
        add-controller [--dry-run]                  (--command-config: the new controller's own file)
        remove-controller --controller-id N --controller-directory-id UUID [--dry-run]

`describe` prints Kafka's pre-KIP-853 layout for a static quorum (no directory ids: voters as
`[1,2,3]`) and Kafka's KIP-853 layout once the leader names directory ids (DescribeQuorum v2,
a dynamic quorum): voters and observers as `{"id": .., "directoryId": .., "endpoints": [..]}`,
and a DirectoryId column. `add-controller` reads, as Kafka's tool does, the new controller's
server.properties given as --command-config: its node.id, the directory id its `kraft storage
format` wrote in meta.properties, and the endpoints its controller listeners advertise; it
sends AddRaftVoter to the active controller. `remove-controller` sends RemoveRaftVoter. The
network side is `quorum_client.py`.
"""

import asyncio
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft.cli.admin_connection import (
    ToolError,
    UsageError,
    client_settings,
    parse_addresses,
    read_command_config,
    read_properties,
)
from kraft.cli.initial_controllers import reachable_host
from kraft.cli.quorum_client import BROKERS, CONTROLLERS, QUORUM_SETTINGS, change_voters, describe
from kraft.raft.membership_messages import NO_DIRECTORY, add_raft_voter_request, remove_raft_voter_request
from kraft.records import VoterEndpoint
from kraft.server.settings.server_config import default_of, parse_value
from kraft.storage.meta_properties import (
    StorageNotFormattedError,
    kafka_text,
    read_directory_id,
    uuid_from_kafka_text,
)

UNKNOWN = -1  # a timestamp the leader does not know (Kafka's admin client reads it as absent)


def _bootstrap(bootstrap_server: str | None, bootstrap_controller: str | None) -> tuple[list[tuple[str, int]], int]:
    if bootstrap_controller is not None:
        return parse_addresses("--bootstrap-controller", bootstrap_controller), CONTROLLERS
    return parse_addresses("--bootstrap-server", bootstrap_server or ""), BROKERS


# ---------------------------------------------------------------- describe


def _leader(quorum: Any) -> Any:
    return next(v for v in quorum.current_voters if v.replica_id == quorum.leader_id)


def _directory(replica: Any) -> uuid.UUID:
    """A replica's directory id; the zero id where the answer has none (DescribeQuorum v0-1,
    or a static quorum's replicas)."""
    return getattr(replica, "replica_directory_id", None) or NO_DIRECTORY


def names_directories(quorum: Any) -> bool:
    """Whether the leader named any directory id: then Kafka's KIP-853 layout is printed."""
    return any(_directory(r) != NO_DIRECTORY for r in (*quorum.current_voters, *quorum.observers))


def endpoint_text(name: str, host: str, port: int) -> str:
    """Kafka's RaftVoterEndpoint: NAME://host:port, an IPv6 host in brackets."""
    return f"{name}://{f'[{host}]' if ':' in host else host}:{port}"


def _replicas_json(replicas: Sequence[Any], nodes: Sequence[Any]) -> str:
    """Kafka's CurrentVoters / CurrentObservers once directory ids exist: one object per
    replica, directoryId null for the zero id, endpoints only where the answer lists some."""
    endpoints = {n.node_id: [endpoint_text(x.name, x.host, x.port) for x in n.listeners] for n in nodes}
    items = []
    for r in replicas:
        directory = _directory(r)
        text = f'{{"id": {r.replica_id}, "directoryId": ' + (
            "null" if directory == NO_DIRECTORY else f'"{kafka_text(directory)}"')
        if endpoints.get(r.replica_id):
            text += ", \"endpoints\": [" + ", ".join(f'"{e}"' for e in endpoints[r.replica_id]) + "]"
        items.append(text + "}")
    return "[" + ", ".join(items) + "]"


def status_lines(cluster_id: str, quorum: Any, nodes: Sequence[Any] = ()) -> list[str]:
    """`describe --status`, as kafka-metadata-quorum prints it.

    The follower that lags most is the voter with the lowest log end offset (the first
    of equals, in the leader's order), which may be the leader itself: its lag in time is
    then 0, and -1 if either of the two caught-up timestamps is unknown.
    """
    leader = _leader(quorum)
    most_behind = min(quorum.current_voters, key=lambda v: v.log_end_offset)
    if most_behind is leader:
        lag_ms = 0
    elif UNKNOWN in (leader.last_caught_up_timestamp, most_behind.last_caught_up_timestamp):
        lag_ms = UNKNOWN
    else:
        lag_ms = leader.last_caught_up_timestamp - most_behind.last_caught_up_timestamp
    if names_directories(quorum):
        voters, observers = _replicas_json(quorum.current_voters, nodes), _replicas_json(quorum.observers, nodes)
    else:
        voters = "[" + ",".join(str(v.replica_id) for v in quorum.current_voters) + "]"
        observers = "[" + ",".join(str(o.replica_id) for o in quorum.observers) + "]"
    rows = [
        ("ClusterId", cluster_id),
        ("LeaderId", quorum.leader_id),
        ("LeaderEpoch", quorum.leader_epoch),
        ("HighWatermark", quorum.high_watermark),
        ("MaxFollowerLag", leader.log_end_offset - most_behind.log_end_offset),
        ("MaxFollowerLagTimeMs", lag_ms),
        ("CurrentVoters", voters),
        ("CurrentObservers", observers),
    ]
    return [f"{name + ':':<24}{value}" for name, value in rows]


def _ago(timestamp: int, now_ms: int) -> str:
    """--human-readable's form of a timestamp, as Kafka prints it ("-1" when unknown)."""
    return "-1" if timestamp < 0 else f"{max(0, now_ms - timestamp)} ms ago"


def replication_lines(quorum: Any, human_readable: bool = False) -> list[str]:
    """`describe --replication`: the leader, the other voters, then the observers, each
    with its lag behind the leader's log end offset (negative if it is ahead); with a
    DirectoryId column once the leader names directory ids."""
    leader = _leader(quorum)
    now = int(time.time() * 1000)
    directories = names_directories(quorum)

    def when(timestamp: int) -> Any:
        return _ago(timestamp, now) if human_readable else timestamp

    header = ["NodeId", *(["DirectoryId"] if directories else []), "LogEndOffset", "Lag", "LastFetchTimestamp",
              "LastCaughtUpTimestamp", "Status"]
    rows: list[list[Any]] = []
    followers = [v for v in quorum.current_voters if v is not leader]
    for status, replicas in (("Leader", [leader]), ("Follower", followers), ("Observer", quorum.observers)):
        rows.extend(
            [r.replica_id, *([kafka_text(_directory(r))] if directories else []), r.log_end_offset,
             leader.log_end_offset - r.log_end_offset, when(r.last_fetch_timestamp), when(r.last_caught_up_timestamp),
             status]
            for r in replicas
        )
    return pretty_table(header, rows)


def pretty_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Kafka's tools' table layout: every cell left-aligned to its column's widest value
    and followed by a tab, the last one included."""
    cells = [[str(x) for x in line] for line in [header, *rows]]
    widths = [max(len(x) for x in column) for column in zip(*cells)]
    return ["".join(x.ljust(w) + "\t" for x, w in zip(line, widths)) for line in cells]


def metadata_quorum(bootstrap_server: str | None, bootstrap_controller: str | None, command_config: str | None,
                    status: bool, replication: bool, human_readable: bool) -> int:
    try:
        if human_readable and not replication:
            raise UsageError("The option --human-readable is only supported along with --replication")
        bootstrap, endpoint_type = _bootstrap(bootstrap_server, bootstrap_controller)
        settings = read_command_config(command_config, QUORUM_SETTINGS)
        cluster_id, quorum, nodes = asyncio.run(describe(bootstrap, endpoint_type, settings))
    except (UsageError, ToolError) as e:
        print(f"kraft metadata-quorum: {e}", file=sys.stderr)
        return 1
    lines = status_lines(cluster_id, quorum, nodes) if status else replication_lines(quorum, human_readable)
    print("\n".join(lines))
    return 0


# ---------------------------------------------------------------- add-controller, remove-controller


@dataclass(frozen=True)
class NewController:
    """The controller add-controller makes a voter, as its own files describe it."""

    node_id: int
    directory_id: uuid.UUID
    endpoints: tuple[VoterEndpoint, ...]

    def __str__(self) -> str:
        endpoints = ", ".join(endpoint_text(e.name, e.host, e.port) for e in self.endpoints)
        return f"controller {self.node_id} with directory id {kafka_text(self.directory_id)} and endpoints: {endpoints}"


def _parsed(entries: dict[str, str], key: str, path: str) -> Any:
    """`key` read by server.properties' own parser, or UsageError naming file and key."""
    if key not in entries:
        return default_of(key)
    try:
        return parse_value(key, entries[key])
    except ValueError as e:
        raise UsageError(f"--command-config {path}: invalid value for {key}: {e}") from None


def new_controller(entries: dict[str, str], path: str) -> NewController:
    """What Kafka's tool reads of the new controller's configuration, with its checks: a
    node.id, the controller role, the metadata log directory's directory.id (so it must be
    formatted: `kraft storage format --no-initial-controllers`), and for each of
    controller.listener.names its advertised.listeners entry, else its listeners entry."""
    hint = "Is this a valid controller configuration file?"
    if "node.id" not in entries:
        raise UsageError(f"node.id not found in configuration file {path}. {hint}")
    node_id = _parsed(entries, "node.id", path)
    if "controller" not in entries.get("process.roles", ""):
        raise UsageError(f"process.roles did not contain 'controller' in configuration file {path}. {hint}")
    log_dirs = [d.strip() for d in entries.get("log.dirs", "").split(",") if d.strip()]
    metadata_dir = entries.get("metadata.log.dir", "").strip() or (log_dirs[0] if log_dirs else "")
    if not metadata_dir:
        raise UsageError(f"Neither metadata.log.dir nor log.dirs were found in {path}. {hint}")
    try:
        directory_id = read_directory_id(Path(metadata_dir))
    except StorageNotFormattedError as e:
        raise UsageError(f"Unable to read meta.properties from {metadata_dir}: {e}") from None
    if directory_id is None:
        raise UsageError(f"No directory id found in {metadata_dir}: format it with this build's `kraft storage "
                         "format --no-initial-controllers`, which writes one")
    if "controller.listener.names" not in entries:
        raise UsageError(f"controller.listener.names was not found in {path}. {hint}")
    listeners = {lst.name: lst.endpoint for lst in _parsed(entries, "listeners", path) or ()}
    listeners.update({lst.name: lst.endpoint for lst in _parsed(entries, "advertised.listeners", path)})
    endpoints = []
    for name in _parsed(entries, "controller.listener.names", path):
        endpoint = listeners.get(name)
        if endpoint is None:
            raise UsageError(f"Cannot find information about controller listener name: {name} (in {path})")
        endpoints.append(VoterEndpoint(name, reachable_host(endpoint.host), endpoint.port))
    return NewController(node_id, directory_id, tuple(endpoints))


def _fail(e: Exception) -> int:
    print(f"kraft metadata-quorum: {e}", file=sys.stderr)
    return 1


def add_controller(bootstrap_server: str | None, bootstrap_controller: str | None, command_config: str | None,
                   dry_run: bool = False) -> int:
    """`add-controller`: AddRaftVoter for the controller whose configuration is
    `command_config` (also the admin client's properties, as in Kafka's tool)."""
    try:
        if command_config is None:
            raise UsageError("You must supply the configuration file of the controller you are adding when using "
                             "add-controller (--command-config FILE).")
        bootstrap, endpoint_type = _bootstrap(bootstrap_server, bootstrap_controller)
        entries = read_properties(command_config)
        settings = client_settings(entries, command_config, QUORUM_SETTINGS)
        controller = new_controller(entries, command_config)
        if not dry_run:
            request = add_raft_voter_request(None, int(settings.request_timeout_s * 1000), controller.node_id,
                                             controller.directory_id, controller.endpoints)
            asyncio.run(change_voters(bootstrap, endpoint_type, request, settings))
    except (UsageError, ToolError) as e:
        return _fail(e)
    print(f"{'DRY RUN of adding' if dry_run else 'Added'} {controller}")
    return 0


def remove_controller(bootstrap_server: str | None, bootstrap_controller: str | None, command_config: str | None,
                      controller_id: str, controller_directory_id: str, dry_run: bool = False) -> int:
    """`remove-controller`: RemoveRaftVoter for (--controller-id, --controller-directory-id)."""
    try:
        try:
            node_id = int(controller_id)
        except ValueError:
            raise UsageError(f"--controller-id {controller_id!r} is not a node id (an integer)") from None
        if node_id < 0:
            raise UsageError(f"Invalid negative --controller-id: {node_id}")
        try:
            directory_id = uuid_from_kafka_text(controller_directory_id)
        except ValueError as e:
            raise UsageError(f"Failed to parse --controller-directory-id: {e}") from None
        bootstrap, endpoint_type = _bootstrap(bootstrap_server, bootstrap_controller)
        settings = read_command_config(command_config, QUORUM_SETTINGS)
        if not dry_run:
            asyncio.run(change_voters(bootstrap, endpoint_type,
                                      remove_raft_voter_request(None, node_id, directory_id), settings))
    except (UsageError, ToolError) as e:
        return _fail(e)
    print(f"{'DRY RUN of removing' if dry_run else 'Removed'} KRaft controller {node_id} with directory id "
          f"{kafka_text(directory_id)}")
    return 0
