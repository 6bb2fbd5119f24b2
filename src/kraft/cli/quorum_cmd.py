"""`kraft metadata-quorum --bootstrap-server HOST:PORT describe --status | --replication`,
printing what Kafka's kafka-metadata-quorum prints.

DescribeQuorum is answered by the leader only; any other node answers NOT_LEADER with the
leader's id, and Metadata says where that node listens.
"""

import asyncio
import sys
from typing import Any

from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m

METADATA_VERSION = 12


async def _ask(host: str, port: int, request: Any) -> Any:
    conn = await KafkaConnection.connect(host, port, client_id="kraft-metadata-quorum")
    try:
        return await conn.request(request, 10.0)
    finally:
        conn.close()


async def describe(bootstrap: str) -> tuple[Any, Any]:
    """(Metadata response, the leader's DescribeQuorum partition)."""
    last_error: Exception | None = None
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            metadata = await _ask(host, int(port), build_request(3, METADATA_VERSION, {
                "topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
            }))
            quorum = (await _ask(host, int(port), m.describe_quorum_request())).topics[0].partitions[0]
            if quorum.error_code == ErrorCode.not_leader_or_follower and quorum.leader_id >= 0:
                broker = next((b for b in metadata.brokers if b.node_id == quorum.leader_id), None)
                if broker is None:
                    raise ConnectionError(f"the leader, node {quorum.leader_id}, is not among the brokers")
                quorum = (await _ask(broker.host, broker.port, m.describe_quorum_request())).topics[0].partitions[0]
            if quorum.error_code != ErrorCode.none:
                raise ConnectionError(f"DescribeQuorum: {quorum.error_code.name}")
            return metadata, quorum
        except (TimeoutError, OSError, ConnectionError, ValueError) as e:
            last_error = e
    raise ConnectionError(f"no bootstrap server answered: {last_error}")


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


def replication_lines(quorum: Any) -> list[str]:
    """`describe --replication`: the leader, the other voters, then the observers, each
    with its lag behind the leader's log end offset (negative if it is ahead)."""
    leader = _leader(quorum)
    header = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    rows = []
    followers = [v for v in quorum.current_voters if v is not leader]
    for status, replicas in (("Leader", [leader]), ("Follower", followers), ("Observer", quorum.observers)):
        rows.extend(
            [r.replica_id, r.log_end_offset, leader.log_end_offset - r.log_end_offset, r.last_fetch_timestamp,
             r.last_caught_up_timestamp, status]
            for r in replicas
        )
    return pretty_table(header, rows)


def pretty_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Kafka's tools' table layout: every cell left-aligned to its column's widest value
    and followed by a tab, the last one included."""
    cells = [[str(x) for x in line] for line in [header, *rows]]
    widths = [max(len(x) for x in column) for column in zip(*cells)]
    return ["".join(x.ljust(w) + "\t" for x, w in zip(line, widths)) for line in cells]


def metadata_quorum(bootstrap: str, status: bool, replication: bool) -> int:
    try:
        metadata, quorum = asyncio.run(describe(bootstrap))
    except ConnectionError as e:
        print(f"kraft metadata-quorum: {e}", file=sys.stderr)
        return 1
    lines = status_lines(metadata.cluster_id, quorum) if status else replication_lines(quorum)
    print("\n".join(lines))
    return 0
