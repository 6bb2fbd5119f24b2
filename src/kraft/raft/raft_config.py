"""The Raft core's settings, with Kafka's names and defaults where Kafka has them."""

from dataclasses import dataclass

from kraft.raft.messages import METADATA, LogPartition
from kraft.records.control import VoterEndpoint


@dataclass(frozen=True)
class RaftConfig:
    node_id: int
    voters: tuple[int, ...]  # controller.quorum.voters; empty: the voter set is in the log (KIP-853)
    cluster_id: str | None = None
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 0  # controller.quorum.append.linger.ms (Kafka: 25)
    fetch_max_wait_ms: int = 500  # how long a leader parks a Fetch with nothing to return
    max_batch_bytes: int = 8 * 1024 * 1024  # KafkaRaftClient's MAX_BATCH_SIZE_BYTES; one append() must fit
    max_fetch_bytes: int = 8 * 1024 * 1024
    observer_expiry_ms: int = 5 * 60 * 1000  # an observer not heard from this long leaves DescribeQuorum
    # KIP-630 / KIP-876
    snapshot_response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    snapshot_partition_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.snapshot.max.bytes
    start_offset_lag_time_max_ms: int = 7 * 24 * 3600 * 1000  # metadata.start.offset.lag.time.max.ms
    max_retention_bytes: int = 100 * 1024 * 1024  # metadata.max.retention.bytes (-1: no limit)
    max_retention_ms: int = 7 * 24 * 3600 * 1000  # metadata.max.retention.ms (-1: no limit)
    cleanup_interval_ms: int = 1000  # how often the log start offset and retention are reconsidered
    # KIP-996: ask whether a majority would vote before campaigning. Kafka does whenever every
    # voter speaks Vote v2, as every kraft node does; off only to measure what it saves.
    pre_vote: bool = True
    # controller.quorum.bootstrap.servers: how many. A replica that knows no voter asks them
    # for the leader, as destinations -2, -3, ... (Kafka numbers them so too).
    bootstrap_servers: int = 0
    # KIP-853: this replica's log directory id and the controller endpoints it is reached at
    # (none: unknown, so it never asks its leader to update its entry in the voter set).
    directory_id: bytes | None = None
    endpoints: tuple[VoterEndpoint, ...] = ()
    # controller.quorum.auto.join.enable (KIP-1186): a controller that is not a voter of its
    # dynamic quorum asks the leader to add it.
    auto_join: bool = False
    # KIP-1166 (Kafka 4.1): a parked Fetch is answered as soon as the high watermark it carries
    # (Fetch v18) is behind the leader's: KRaft's rule, for the metadata partition. The offsets
    # partitions stand in for Kafka's ISR-replicated __consumer_offsets, whose followers' Fetches
    # wait for records (DelayedFetch), so their cores have it off.
    answer_behind_high_watermark: bool = True
    # The topic partition this core replicates: every RPC it sends or answers names it.
    # `__cluster_metadata-0` by default; a `__consumer_offsets` partition's core names its own.
    partition: LogPartition = METADATA

    def __post_init__(self) -> None:
        if len(set(self.voters)) != len(self.voters):
            raise ValueError(f"controller.quorum.voters: duplicate voter ids in {self.voters}")
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def bootstrap_ids(self) -> tuple[int, ...]:
        return tuple(-2 - i for i in range(self.bootstrap_servers))
