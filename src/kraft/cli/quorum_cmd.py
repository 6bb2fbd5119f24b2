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
        except (OSError, ConnectionError, asyncio.TimeoutError, ValueError) as e:
            last_error = e
    raise ConnectionError(f"no bootstrap server answered: {last_error}")


def status_lines(metadata: Any, quorum: Any) -> list[str]:
    leader = next(v for v in quorum.current_voters if v.replica_id == quorum.leader_id)
    followers = [v for v in quorum.current_voters if v.replica_id != quorum.leader_id]
    lag = max((leader.log_end_offset - v.log_end_offset for v in followers), default=0)
    caught_up = [v.last_caught_up_timestamp for v in followers]
    lag_ms = leader.last_caught_up_timestamp - min(caught_up) if caught_up and min(caught_up) >= 0 else -1
    rows = [
        ("ClusterId", metadata.cluster_id),
        ("LeaderId", quorum.leader_id),
        ("LeaderEpoch", quorum.leader_epoch),
        ("HighWatermark", quorum.high_watermark),
        ("MaxFollowerLag", lag),
        ("MaxFollowerLagTimeMs", lag_ms),
        ("CurrentVoters", "[" + ",".join(str(v.replica_id) for v in quorum.current_voters) + "]"),
        ("CurrentObservers", "[" + ",".join(str(o.replica_id) for o in quorum.observers) + "]"),
    ]
    return [f"{name + ':':<24}{value}" for name, value in rows]


def replication_lines(quorum: Any) -> list[str]:
    leader = next(v for v in quorum.current_voters if v.replica_id == quorum.leader_id)
    header = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    rows = []
    ordered = [leader] + [v for v in quorum.current_voters if v is not leader]
    for replica in ordered + list(quorum.observers):
        status = "Leader" if replica is leader else "Follower" if replica in quorum.current_voters else "Observer"
        rows.append([
            replica.replica_id, replica.log_end_offset, max(0, leader.log_end_offset - replica.log_end_offset),
            replica.last_fetch_timestamp, replica.last_caught_up_timestamp, status,
        ])
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]


def metadata_quorum(bootstrap: str, status: bool, replication: bool) -> int:
    try:
        metadata, quorum = asyncio.run(describe(bootstrap))
    except ConnectionError as e:
        print(f"kraft metadata-quorum: {e}", file=sys.stderr)
        return 1
    lines = status_lines(metadata, quorum) if status else replication_lines(quorum)
    print("\n".join(lines))
    return 0
