"""`kraft metadata-quorum --bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT
[--command-config FILE] describe --status | --replication [--human-readable]`, printing
what Kafka's kafka-metadata-quorum prints.

DescribeQuorum is answered by the leader only; any other node answers NOT_LEADER with the
leader's id, and DescribeCluster says where that node listens: its client endpoint among
the brokers, or (asked on a controller listener, KIP-919) its controller endpoint.
"""

import asyncio
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft.cli.client_security import ClientConfigError, client_security
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import ClientLogin, KafkaConnection
from kraft.raft import messages as m

DESCRIBE_CLUSTER_VERSION = 1
BROKERS, CONTROLLERS = 1, 2  # DescribeCluster's endpoint types


class UsageError(ValueError):
    """A flag's value that cannot be used; said in one line with what to give instead."""


@dataclass(frozen=True)
class ClientSettings:
    """What the tool takes from --command-config (Kafka's admin client properties)."""

    client_id: str = "kraft-metadata-quorum"
    request_timeout_s: float = 10.0
    tls: ssl.SSLContext | None = None  # security.protocol SSL or SASL_SSL (cli/client_security.py)
    login: ClientLogin | None = None  # SASL_PLAINTEXT or SASL_SSL


def parse_addresses(flag: str, value: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]`, each checked, or UsageError naming the bad one."""
    addresses = []
    for entry in (e.strip() for e in value.split(",")):
        host, colon, port = entry.rpartition(":")
        if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UsageError(f"{flag} {value!r}: {entry!r} is not host:port with a port from 1 to 65535")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def read_command_config(path: str) -> ClientSettings:
    """The admin client properties kraft honours: the client id, the request timeout and the
    connection's security (client_security.py); the rest (Kafka's admin client has many) is
    left to Kafka's defaults."""
    from kraft.server.config import parse_properties

    try:
        entries = parse_properties(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--command-config {path}: cannot read it ({e})") from None
    try:
        tls, login = client_security(entries, f"--command-config {path}")
    except ClientConfigError as e:
        raise UsageError(str(e)) from None
    timeout = entries.get("request.timeout.ms", "10000")
    if not timeout.isdigit() or int(timeout) < 1:
        raise UsageError(f"--command-config {path}: request.timeout.ms={timeout!r} is not a positive number")
    return ClientSettings(entries.get("client.id", ClientSettings.client_id), int(timeout) / 1000, tls, login)


async def _ask(address: tuple[str, int], request: Any, settings: ClientSettings) -> Any:
    conn = await KafkaConnection.connect(*address, client_id=settings.client_id, timeout=settings.request_timeout_s,
                                         tls=settings.tls, login=settings.login)
    try:
        return await conn.request(request, settings.request_timeout_s)
    finally:
        conn.close()


async def describe(bootstrap: list[tuple[str, int]], endpoint_type: int,
                   settings: ClientSettings = ClientSettings()) -> tuple[str, Any]:
    """(cluster id, the leader's DescribeQuorum partition), asking the first bootstrap
    address that answers, then the leader it names."""
    last_error: Exception | None = None
    request = build_request(60, DESCRIBE_CLUSTER_VERSION, {"include_cluster_authorized_operations": False,
                                                          "endpoint_type": endpoint_type})
    for address in bootstrap:
        try:
            cluster = await _ask(address, request, settings)
            quorum = (await _ask(address, m.describe_quorum_request(), settings)).topics[0].partitions[0]
            if quorum.error_code == ErrorCode.not_leader_or_follower and quorum.leader_id >= 0:
                node = next((b for b in cluster.brokers if b.broker_id == quorum.leader_id), None)
                if node is None:
                    raise ConnectionError(f"the leader, node {quorum.leader_id}, is not among the "
                                          f"{'controllers' if endpoint_type == CONTROLLERS else 'brokers'}")
                leader = (node.host, node.port)
                quorum = (await _ask(leader, m.describe_quorum_request(), settings)).topics[0].partitions[0]
            if quorum.error_code != ErrorCode.none:
                raise ConnectionError(f"DescribeQuorum: {quorum.error_code.name}")
            return cluster.cluster_id, quorum
        except (TimeoutError, OSError, ConnectionError, ValueError) as e:
            last_error = e
    raise ConnectionError(f"no bootstrap {'controller' if endpoint_type == CONTROLLERS else 'server'} answered: "
                          f"{last_error}")


UNKNOWN = -1  # a timestamp the leader does not know (Kafka's admin client reads it as absent)


def _leader(quorum: Any) -> Any:
    return next(v for v in quorum.current_voters if v.replica_id == quorum.leader_id)


def status_lines(cluster_id: str, quorum: Any) -> list[str]:
    """`describe --status`, as kafka-metadata-quorum prints it (before KIP-853's voter
    endpoints and directory ids).

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
    rows = [
        ("ClusterId", cluster_id),
        ("LeaderId", quorum.leader_id),
        ("LeaderEpoch", quorum.leader_epoch),
        ("HighWatermark", quorum.high_watermark),
        ("MaxFollowerLag", leader.log_end_offset - most_behind.log_end_offset),
        ("MaxFollowerLagTimeMs", lag_ms),
        ("CurrentVoters", "[" + ",".join(str(v.replica_id) for v in quorum.current_voters) + "]"),
        ("CurrentObservers", "[" + ",".join(str(o.replica_id) for o in quorum.observers) + "]"),
    ]
    return [f"{name + ':':<24}{value}" for name, value in rows]


def _ago(timestamp: int, now_ms: int) -> str:
    """--human-readable's form of a timestamp, as Kafka prints it ("-1" when unknown)."""
    return "-1" if timestamp < 0 else f"{max(0, now_ms - timestamp)} ms ago"


def replication_lines(quorum: Any, human_readable: bool = False) -> list[str]:
    """`describe --replication`: the leader, the other voters, then the observers, each
    with its lag behind the leader's log end offset (negative if it is ahead)."""
    leader = _leader(quorum)
    now = int(time.time() * 1000)

    def when(timestamp: int) -> Any:
        return _ago(timestamp, now) if human_readable else timestamp

    header = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    rows: list[list[Any]] = []
    followers = [v for v in quorum.current_voters if v is not leader]
    for status, replicas in (("Leader", [leader]), ("Follower", followers), ("Observer", quorum.observers)):
        rows.extend(
            [r.replica_id, r.log_end_offset, leader.log_end_offset - r.log_end_offset, when(r.last_fetch_timestamp),
             when(r.last_caught_up_timestamp), status]
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
        if bootstrap_controller is not None:
            bootstrap, endpoint_type = parse_addresses("--bootstrap-controller", bootstrap_controller), CONTROLLERS
        else:
            bootstrap, endpoint_type = parse_addresses("--bootstrap-server", bootstrap_server or ""), BROKERS
        settings = read_command_config(command_config) if command_config else ClientSettings()
        cluster_id, quorum = asyncio.run(describe(bootstrap, endpoint_type, settings))
    except (UsageError, ConnectionError) as e:
        print(f"kraft metadata-quorum: {e}", file=sys.stderr)
        return 1
    lines = status_lines(cluster_id, quorum) if status else replication_lines(quorum, human_readable)
    print("\n".join(lines))
    return 0
