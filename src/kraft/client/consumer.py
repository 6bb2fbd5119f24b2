"""A consumer for kraft's log that never reads past a truncation without saying so (KIP-320).

It keeps, for each assigned partition, the position to fetch from and the leader epoch of
the last record consumed. When the partition's leader changes (a newer epoch in Metadata,
or FENCED_LEADER_EPOCH from a fetch), the position is first validated with
OffsetForLeaderEpoch: if the leader's history of that epoch ends before the position, the
records the consumer already read are no longer in the log. Then:

* auto_offset_reset="none": poll() raises LogTruncationError, naming each partition and
  the first offset known to diverge; the caller decides (seek and go on, or stop);
* "earliest" / "latest": the position moves back to that first diverging offset (as
  precisely as the leader's epochs allow) and a warning says so.

A Fetch answered with DivergingEpoch is handled the same way. UNKNOWN_LEADER_EPOCH and
FENCED_LEADER_EPOCH are retried after a metadata refresh. The API is synchronous; the
client runs its own event loop inside each call.
"""

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection
from kraft.records import Record, RecordBatch, RecordError, read_batches

log = logging.getLogger("kraft.client")

METADATA_V, LIST_OFFSETS_V, FETCH_V, EPOCH_V = 12, 7, 12, 4
EARLIEST, LATEST = -2, -1
NO_EPOCH = -1
RETRIABLE = {ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
             ErrorCode.leader_not_available, ErrorCode.offset_not_available, ErrorCode.unknown_topic_or_partition}


class ConsumerError(Exception):
    pass


class LogTruncationError(ConsumerError):
    """The log lost records this consumer had read: `divergent_offsets[tp]` is the first
    offset that diverges (None if the leader could not say)."""

    def __init__(self, divergent_offsets: dict["TopicPartition", int | None]) -> None:
        detail = ", ".join(f"{tp}: first diverging offset {o}" for tp, o in divergent_offsets.items())
        super().__init__(f"log truncation detected ({detail})")
        self.divergent_offsets = divergent_offsets


class OffsetOutOfRangeError(ConsumerError):
    def __init__(self, partitions: dict["TopicPartition", int]) -> None:
        super().__init__(f"offsets out of range: {partitions}")
        self.partitions = partitions


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class OffsetAndEpoch:
    """A position to store externally: the next offset, and the epoch of the record before it."""

    offset: int
    leader_epoch: int | None


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    is_control: bool = False


@dataclass
class _Partition:
    position: int | None = None  # None: to be reset by the policy
    last_epoch: int | None = None  # epoch of the last record consumed (or given to seek)
    leader: int | None = None
    leader_epoch: int = NO_EPOCH  # the partition leader's epoch as of our metadata
    validated_epoch: int = NO_EPOCH  # the leader epoch our position was checked against
    high_watermark: int = -1
    reset: Literal["earliest", "latest"] | None = None


@dataclass
class _Cluster:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    refreshed: float = 0.0


class Consumer:
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        auto_offset_reset: Literal["none", "earliest", "latest"] = "latest",
        client_id: str = "kraft-consumer",
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 8 * 1024 * 1024,
        fetch_max_wait_ms: int = 500,
        request_timeout_ms: int = 30_000,
        include_control: bool = False,
    ) -> None:
        if auto_offset_reset not in ("none", "earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be none, earliest or latest, not {auto_offset_reset!r}")
        servers = bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        self.bootstrap = [(h, int(p)) for h, _, p in (s.strip().rpartition(":") for s in servers if s.strip())]
        if not self.bootstrap:
            raise ValueError("bootstrap_servers is empty")
        self.auto_offset_reset = auto_offset_reset
        self.client_id = client_id
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.timeout = request_timeout_ms / 1000
        self.include_control = include_control
        self._loop = asyncio.new_event_loop()
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._cluster = _Cluster()
        self._closed = False

    # ---------------------------------------------------------------- the public, synchronous API

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._partitions = {tp: self._partitions.get(tp, _Partition(reset=self._default_reset())) for tp in partitions}

    def assignment(self) -> set[TopicPartition]:
        return set(self._partitions)

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        """Position at `offset`; with the epoch of the record before it (from next_offsets()),
        the next poll first checks that the log still holds what was read up to there."""
        state = self._state(tp)
        state.position, state.last_epoch, state.reset = offset, leader_epoch, None
        state.validated_epoch = NO_EPOCH

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._partitions):
            self._state(tp).reset, self._state(tp).position = "earliest", None

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._partitions):
            self._state(tp).reset, self._state(tp).position = "latest", None

    def position(self, tp: TopicPartition) -> int:
        state = self._state(tp)
        if state.position is None:
            self._run(self._resets())
        assert state.position is not None
        return state.position

    def next_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        """Where each partition would go on: store these, and seek() to them later."""
        return {tp: OffsetAndEpoch(s.position, s.last_epoch) for tp, s in self._partitions.items()
                if s.position is not None}

    def high_watermark(self, tp: TopicPartition) -> int:
        """The high watermark of the last fetch response (-1 before one)."""
        return self._state(tp).high_watermark

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndEpoch]:
        return self._run(self._list_offsets(list(partitions), EARLIEST))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndEpoch]:
        return self._run(self._list_offsets(list(partitions), LATEST))

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the positions on, in offset order per partition (empty at the timeout)."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            fetched = self._run(self._poll_once(max(0.0, deadline - time.monotonic())))
            records = [r for f in fetched for r in self._records(f)]
            if records or time.monotonic() >= deadline:
                return records[:max_records] if max_records else records

    def poll_batches(self, timeout_ms: int = 1000) -> list["FetchedBatches"]:
        """Like poll(), as whole record batches (control batches included): for readers that
        turn batches into columns and have no use for a Python object per record. Records
        of the first batch below `FetchedBatches.start` were consumed before."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            fetched = self._run(self._poll_once(max(0.0, deadline - time.monotonic())))
            if fetched or time.monotonic() >= deadline:
                return fetched

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, from a Metadata request (empty if the topic is unknown)."""
        return self._run(self._partitions_for(topic))

    def diverging_offset(self, tp: TopicPartition, offset: int, leader_epoch: int) -> int | None:
        """None if the log still holds, unchanged, everything before `offset` as it was when
        the record before it had `leader_epoch`; otherwise the first offset that diverges
        (-1 if the leader cannot say). Asks OffsetForLeaderEpoch; the position stays."""
        self._partitions.setdefault(tp, _Partition(reset=self._default_reset()))
        diverges = _diverges(offset, *self._run(self._end_of_epoch(tp, leader_epoch)))
        return None if diverges is False else (-1 if diverges is None else diverges)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for conn in self._connections.values():
                conn.close()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def epoch_at(self, tp: TopicPartition, offset: int) -> int | None:
        """The leader epoch of the record at `offset` (None if the log has none there),
        found by walking the leader's epochs down from its newest with OffsetForLeaderEpoch:
        one request per epoch that began after `offset`."""
        self._partitions.setdefault(tp, _Partition(reset=self._default_reset()))
        return self._run(self._epoch_at(tp, offset))

    # ---------------------------------------------------------------- plumbing

    def _default_reset(self) -> Literal["earliest", "latest"] | None:
        return None if self.auto_offset_reset == "none" else self.auto_offset_reset  # type: ignore[return-value]

    def _state(self, tp: TopicPartition) -> _Partition:
        try:
            return self._partitions[tp]
        except KeyError:
            raise ConsumerError(f"{tp} is not assigned") from None

    def _run(self, coroutine: Any) -> Any:
        if self._closed:
            coroutine.close()
            raise ConsumerError("the consumer is closed")
        return self._loop.run_until_complete(coroutine)

    async def _request(self, address: tuple[str, int], request: Any) -> Any:
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = await KafkaConnection.connect(*address, client_id=self.client_id, timeout=self.timeout)
            self._connections[address] = conn
        try:
            return await conn.request(request, self.timeout)
        except (ConnectionError, asyncio.TimeoutError):
            conn.close()
            raise

    async def _to_leader(self, tp: TopicPartition, request: Any) -> Any:
        state = self._state(tp)
        if state.leader is None or state.leader not in self._cluster.brokers:
            await self._refresh_metadata()
        if state.leader is None or state.leader not in self._cluster.brokers:
            raise ConnectionError(f"no leader known for {tp}")
        return await self._request(self._cluster.brokers[state.leader], request)

    async def _refresh_metadata(self) -> None:
        await self._metadata(sorted({tp.topic for tp in self._partitions}))

    async def _partitions_for(self, topic: str) -> list[int]:
        response = await self._metadata([topic])
        return sorted(p.partition_index for t in response.topics if t.name == topic and t.error_code == ErrorCode.none
                      for p in t.partitions)

    async def _metadata(self, topics: list[str]) -> Any:
        """A Metadata answer for `topics`; what it says of brokers and assigned partitions is kept."""
        request = build_request(3, METADATA_V, {
            "topics": [{"topic_id": None, "name": t} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        })
        addresses = list(self._cluster.brokers.values()) + self.bootstrap
        last: Exception | None = None
        for address in addresses:
            try:
                response = await self._request(address, request)
                break
            except (OSError, ConnectionError, asyncio.TimeoutError) as e:
                last = e
        else:
            raise ConnectionError(f"no broker answered Metadata: {last}")
        self._cluster = _Cluster({b.node_id: (b.host, b.port) for b in response.brokers}, time.monotonic())
        for topic in response.topics:
            for p in topic.partitions:
                state = self._partitions.get(TopicPartition(topic.name, p.partition_index))
                if state is None:
                    continue
                state.leader = p.leader_id if p.error_code == ErrorCode.none and p.leader_id >= 0 else None
                if p.leader_epoch > state.leader_epoch:
                    state.leader_epoch = p.leader_epoch
        return response

    # ---------------------------------------------------------------- offsets and validation

    async def _list_offsets(self, partitions: list[TopicPartition], timestamp: int) -> dict[TopicPartition, OffsetAndEpoch]:
        out = {}
        for tp in partitions:
            self._partitions.setdefault(tp, _Partition(reset=self._default_reset()))
            for _ in range(20):
                state = self._state(tp)
                request = build_request(2, LIST_OFFSETS_V, {
                    "replica_id": -1, "isolation_level": 0,
                    "topics": [{"name": tp.topic, "partitions": [{
                        "partition_index": tp.partition, "current_leader_epoch": state.leader_epoch,
                        "timestamp": timestamp}]}],
                })
                try:
                    p = (await self._to_leader(tp, request)).topics[0].partitions[0]
                except (OSError, ConnectionError, asyncio.TimeoutError):
                    await self._backoff()
                    continue
                if p.error_code == ErrorCode.none:
                    out[tp] = OffsetAndEpoch(p.offset, p.leader_epoch if p.leader_epoch >= 0 else None)
                    break
                if p.error_code not in RETRIABLE:
                    raise ConsumerError(f"ListOffsets {tp}: {p.error_code.name}")
                await self._backoff()
            else:
                raise ConsumerError(f"ListOffsets {tp}: no answer from its leader")
        return out

    async def _backoff(self) -> None:
        await asyncio.sleep(0.1)
        await self._refresh_metadata()

    async def _resets(self) -> None:
        for tp, state in self._partitions.items():
            if state.position is not None:
                continue
            if state.reset is None:
                raise OffsetOutOfRangeError({tp: -1})
            found = (await self._list_offsets([tp], EARLIEST if state.reset == "earliest" else LATEST))[tp]
            state.position, state.last_epoch, state.reset = found.offset, found.leader_epoch, None
            state.validated_epoch = state.leader_epoch

    async def _end_of_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        """The leader's answer to OffsetForLeaderEpoch: (end offset, largest epoch <= `epoch`)."""
        for _ in range(20):
            state = self._state(tp)
            request = build_request(23, EPOCH_V, {"replica_id": -1, "topics": [{"topic": tp.topic, "partitions": [{
                "partition": tp.partition, "current_leader_epoch": state.leader_epoch, "leader_epoch": epoch}]}]})
            try:
                p = (await self._to_leader(tp, request)).topics[0].partitions[0]
            except (OSError, ConnectionError, asyncio.TimeoutError):
                await self._backoff()
                continue
            if p.error_code in RETRIABLE:
                await self._backoff()
                continue
            if p.error_code != ErrorCode.none:
                raise ConsumerError(f"OffsetForLeaderEpoch {tp}: {p.error_code.name}")
            return p.end_offset, p.leader_epoch
        raise ConsumerError(f"OffsetForLeaderEpoch {tp}: no answer from its leader")

    async def _epoch_at(self, tp: TopicPartition, offset: int) -> int | None:
        await self._refresh_metadata()
        epoch, found = self._state(tp).leader_epoch, None
        while epoch >= 0:
            end, epoch = await self._end_of_epoch(tp, epoch)
            if epoch < 0 or end <= offset:
                return found
            found, epoch = epoch, epoch - 1
        return found

    async def _validate(self) -> None:
        """Checks positions whose leader epoch changed since they were last checked."""
        truncated: dict[TopicPartition, int | None] = {}
        for tp, state in self._partitions.items():
            if state.position is None or state.last_epoch is None or state.validated_epoch == state.leader_epoch:
                continue
            checked_against = state.leader_epoch
            diverges = _diverges(state.position, *(await self._end_of_epoch(tp, state.last_epoch)))
            if diverges is not False:
                truncated[tp] = diverges
            else:
                state.validated_epoch = checked_against
        if truncated:
            self._truncated(truncated)

    def _truncated(self, truncated: dict[TopicPartition, int | None]) -> None:
        if self.auto_offset_reset == "none":
            raise LogTruncationError(truncated)
        for tp, offset in truncated.items():
            state = self._state(tp)
            if offset is None:
                log.warning("log truncation detected for %s at position %s; the leader cannot say where: "
                            "resetting to the %s offset", tp, state.position, self.auto_offset_reset)
                state.position, state.reset = None, self._default_reset()
            else:
                log.warning("log truncation detected for %s at position %s: resetting to the first diverging "
                            "offset %d", tp, state.position, offset)
                state.position = offset
            state.last_epoch = None
            state.validated_epoch = state.leader_epoch

    # ---------------------------------------------------------------- fetching

    async def _poll_once(self, wait_s: float) -> list["FetchedBatches"]:
        if not self._partitions:
            return []
        if not self._cluster.brokers:
            await self._refresh_metadata()
        await self._resets()
        await self._validate()
        by_leader: dict[int | None, list[TopicPartition]] = {}
        for tp, state in self._partitions.items():
            if state.validated_epoch == state.leader_epoch or state.last_epoch is None:
                by_leader.setdefault(state.leader, []).append(tp)
        if None in by_leader:
            await self._refresh_metadata()
            return []
        out: list[FetchedBatches] = []
        for leader, tps in by_leader.items():
            try:
                response = await self._request(self._cluster.brokers[leader], self._fetch_request(tps, wait_s))
            except (OSError, ConnectionError, asyncio.TimeoutError, KeyError):
                await self._refresh_metadata()
                continue
            for topic in response.responses:
                for p in topic.partitions:
                    fetched = self._handle_partition(TopicPartition(topic.topic, p.partition_index), p)
                    if fetched is not None:
                        out.append(fetched)
        return out

    def _fetch_request(self, tps: list[TopicPartition], wait_s: float) -> Any:
        topics: dict[str, list[dict]] = {}
        for tp in tps:
            s = self._state(tp)
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": s.leader_epoch, "fetch_offset": s.position,
                "last_fetched_epoch": s.last_epoch if s.last_epoch is not None else NO_EPOCH,
                "log_start_offset": -1, "partition_max_bytes": self.max_partition_fetch_bytes,
            })
        return build_request(1, FETCH_V, {
            "replica_id": -1, "max_wait": timedelta(milliseconds=min(self.fetch_max_wait_ms, int(wait_s * 1000))),
            "min_bytes": 1, "max_bytes": self.fetch_max_bytes, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": t, "topic_id": None, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": "",
        })

    def _handle_partition(self, tp: TopicPartition, p: Any) -> "FetchedBatches | None":
        state = self._state(tp)
        if p.error_code in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower,
                            ErrorCode.unknown_leader_epoch, ErrorCode.leader_not_available):
            state.leader = None  # refresh, and (FENCED) validate against the new leader's epoch
            if p.current_leader.leader_epoch > state.leader_epoch:
                state.leader, state.leader_epoch = p.current_leader.leader_id, p.current_leader.leader_epoch
            return None
        if p.error_code == ErrorCode.offset_out_of_range:
            if self.auto_offset_reset == "none":
                raise OffsetOutOfRangeError({tp: state.position or -1})
            log.warning("%s: offset %s is out of range; resetting to the %s offset", tp, state.position,
                        self.auto_offset_reset)
            state.position, state.reset = None, self._default_reset()
            return None
        if p.error_code != ErrorCode.none:
            raise ConsumerError(f"Fetch {tp}: {p.error_code.name}")
        state.high_watermark = p.high_watermark
        # This leader took our position and LastFetchedEpoch without DivergingEpoch: checked.
        state.validated_epoch = state.leader_epoch
        if p.diverging_epoch.end_offset >= 0:
            assert state.position is not None
            diverges = _diverges(state.position, p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
            self._truncated({tp: diverges if diverges is not False else p.diverging_epoch.end_offset})
            return None
        if not p.records:
            return None
        return self._take(tp, state, p.records)

    def _take(self, tp: TopicPartition, state: _Partition, data: bytes) -> "FetchedBatches | None":
        """The fetched batches from the position on; the position moves past them."""
        assert state.position is not None
        start = state.position
        try:
            batches = [b for b in read_batches(data) if b.header.next_offset > start]
        except RecordError as e:
            raise ConsumerError(f"{tp}: corrupt data at offset {start}: {e}") from None
        if not batches:
            return None
        last = batches[-1].header
        state.position, state.last_epoch = last.next_offset, last.partition_leader_epoch
        return FetchedBatches(tp, start, batches)

    def _records(self, fetched: "FetchedBatches") -> list[ConsumerRecord]:
        tp, out = fetched.tp, []
        for batch in fetched.batches:
            h = batch.header
            if h.is_control and not self.include_control:
                continue
            try:
                records: list[Record] = batch.records()
            except RecordError as e:
                raise ConsumerError(f"{tp}: corrupt batch at offset {h.base_offset}: {e}") from None
            out += [ConsumerRecord(tp.topic, tp.partition, r.offset, h.partition_leader_epoch, r.timestamp, r.key,
                                   r.value, r.headers, h.is_control) for r in records if r.offset >= fetched.start]
        return out


@dataclass(frozen=True)
class FetchedBatches:
    """Whole record batches fetched for one partition, in offset order; records below
    `start` (in the first batch) had been consumed before."""

    tp: TopicPartition
    start: int
    batches: list[RecordBatch]


def _diverges(position: int, end_offset: int, epoch: int) -> int | None | bool:
    """False if a leader whose history of our last epoch ends at `end_offset` (its largest
    epoch <= ours being `epoch`) still holds our position; else the first diverging offset
    (None when the leader cannot say)."""
    if end_offset < 0 or epoch < 0:
        return None
    return end_offset if end_offset < position else False
