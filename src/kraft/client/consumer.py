"""A consumer for kraft's log that never reads past a truncation without saying so (KIP-320).

It keeps, for each assigned partition, the position to read from and the leader epoch of
the record before it (of the last record consumed, or as given to seek). When the
partition's leader changes (a newer epoch in Metadata, or FENCED_LEADER_EPOCH from a
fetch), the position is first validated with OffsetForLeaderEpoch; every fetch carries the
epoch too (LastFetchedEpoch), and the leader answers DivergingEpoch instead of records if
its log no longer holds it. Both answers go through one rule (`kraft.client.positions`:
`holds`, `diverged_at`), which never moves the consumer forward.

Then, auto_offset_reset="none": poll() raises LogTruncationError naming each partition and
that offset, position unchanged; "earliest" / "latest": the position moves back to it,
with the leader's epoch (Kafka's seekValidated), and a warning says so. UNKNOWN_LEADER_EPOCH,
FENCED_LEADER_EPOCH and unreachable leaders are retried after a metadata refresh,
retry_backoff_ms apart. The API is synchronous; the client runs its own event loop inside
each call. This module decides whom to ask and when; what each Fetch and FetchSnapshot
answer does to a partition, up to the records poll() returns, is `kraft.client.fetch_answers`.

A position below the log start (retention removed the records after it) is
OFFSET_OUT_OF_RANGE, handled by the reset policy as in Kafka, unless the consumer was made
with `snapshot_fallback=True`: then it goes on as a replica does (KIP-630). The leader's
answer names the snapshot the log starts at; the consumer downloads it with FetchSnapshot,
chunk by chunk into an unlinked temporary file (`kraft.client.fetched.SnapshotDownload`),
and hands it out whole (never part of a state): its records come first, each with the
snapshot's last contained offset (its end offset - 1) and epoch and marked with its id
(`ConsumerRecord.snapshot`, `FetchedBatches.snapshot`), then the log from the snapshot's end. A snapshot deleted or a
leader changed while it downloads starts the download again from the answer to a new fetch.

A consumer made with a `group_id` commits positions, each with the epoch of the record
before it, to that group and reads them back (Kafka's simple groups: assign, commitSync,
committed; it never joins; `kraft.client.group_offsets`). Starting again from a committed
position is seek(tp, offset, epoch): checked as above before anything is read, so a log
restored or recovered past it since the commit is a LogTruncationError (or a reset), never a
silent read of the new records at the committed offset.

A secured cluster is reached with Kafka's client settings (`security`: security.protocol,
ssl.*, sasl.*; see `kraft.client.security`), read when the consumer is made. A refused login
or TLS handshake raises AuthenticationError, and a topic the ACLs do not let it describe or
read AuthorizationError, at once: retrying cannot change either answer.
"""

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from kraft.client.client_errors import (
    NOT_AUTHORIZED,
    AuthenticationError,
    AuthorizationError,
    ConsumerError,
    LogTruncationError,
    error_for,
)
from kraft.client.fetch_answers import (
    LEADERSHIP,
    drain,
    fetch_request,
    fetch_snapshot_request,
    hold,
    on_truncation,
    read_partition,
    read_snapshot_chunk,
)
from kraft.client.fetched import ConsumerRecord, FetchedBatches
from kraft.client.group_offsets import (
    COORDINATOR_MOVED,
    commit_outcome,
    committed_of,
    coordinator_of,
    find_coordinator_request,
    offset_commit_request,
    offset_fetch_request,
)
from kraft.client.partition_state import PartitionState, Reset
from kraft.client.positions import OffsetAndEpoch, TopicPartition, diverged_at, holds
from kraft.client.security import client_security
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection, LoginRefused

log = logging.getLogger("kraft.client")

METADATA_V, LIST_OFFSETS_V, EPOCH_V = 12, 7, 4
EARLIEST, LATEST = -2, -1
RETRIABLE = LEADERSHIP | {ErrorCode.offset_not_available, ErrorCode.unknown_topic_or_partition}
UNREACHABLE = (OSError, ConnectionError, asyncio.TimeoutError)
_T = TypeVar("_T")


class _NoAnswer(ConsumerError):
    """No leader answered before the deadline: poll() returns nothing and tries again next
    time; the other calls raise it."""


@dataclass
class _Cluster:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    refreshed: float = 0.0


class Consumer:
    """An assign-only consumer. `retry_backoff_ms` and `default_api_timeout_ms` are Kafka's
    retry.backoff.ms and default.api.timeout.ms, with their defaults: the pause before
    retrying after a leadership error or an unreachable leader, and how long calls other
    than poll() keep retrying before they raise. `snapshot_fallback`: a position below the
    log start goes on from the snapshot the log starts at (see the module docstring) instead
    of being OFFSET_OUT_OF_RANGE. `group_id`: Kafka's group.id, the group commit() and
    committed() use (the consumer never joins it). `security`: Kafka's client security
    settings by their names (security.protocol, ssl.*, sasl.*; `kraft.client.security`); a
    bad one is a ClientConfigError (a ValueError) naming it."""

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
        retry_backoff_ms: int = 100,
        default_api_timeout_ms: int = 60_000,
        include_control: bool = False,
        snapshot_fallback: bool = False,
        group_id: str | None = None,
        security: Mapping[str, str] | None = None,
    ) -> None:
        if auto_offset_reset not in ("none", "earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be none, earliest or latest, not {auto_offset_reset!r}")
        servers = bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        self.bootstrap = [(h, int(p)) for h, _, p in (s.strip().rpartition(":") for s in servers if s.strip())]
        if not self.bootstrap:
            raise ValueError("bootstrap_servers is empty")
        if group_id is not None and not group_id:
            raise ValueError("group_id is empty: give the group's name, or None for a consumer that commits nothing")
        self.auto_offset_reset = auto_offset_reset
        self.client_id = client_id
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.timeout = request_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.api_timeout = default_api_timeout_ms / 1000
        self.include_control = include_control
        self.snapshot_fallback = snapshot_fallback
        self.group_id = group_id
        self._coordinator: tuple[str, int] | None = None
        self._tls, self._login = client_security(security or {}, "kraft consumer", strict=True)
        self._loop = asyncio.new_event_loop()
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._cluster = _Cluster()
        self._closed = False

    # ---------------------------------------------------------------- the public, synchronous API

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._partitions = {tp: self._partitions.get(tp) or self._new_partition() for tp in partitions}

    def assignment(self) -> set[TopicPartition]:
        return set(self._partitions)

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        """Position at `offset`; with the epoch of the record before it (from next_offsets()),
        the next poll first checks that the log still holds what was read up to there."""
        self._state(tp).seek(offset, leader_epoch)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._partitions):
            self._state(tp).reset_to("earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._partitions):
            self._state(tp).reset_to("latest")

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll() returns."""
        state = self._state(tp)
        if state.position is None:
            self._run(self._resets(self._api_deadline()))
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
        return self._run(self._list_offsets(list(partitions), EARLIEST, self._api_deadline()))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndEpoch]:
        return self._run(self._list_offsets(list(partitions), LATEST, self._api_deadline()))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, OffsetAndEpoch | None]:
        """Kafka's offsetsForTimes: per partition, the first offset whose record's timestamp
        (ms) is at or after the one given, with that record's epoch; None where there is none."""
        found = {}
        for tp, timestamp in timestamps.items():
            if timestamp < 0:
                raise ValueError(f"{tp}: timestamp {timestamp} is negative")
            found[tp] = self._run(self._list_offsets([tp], timestamp, self._api_deadline()))[tp]
        return {tp: at if at.offset >= 0 else None for tp, at in found.items()}

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the positions on, in offset order per partition (empty at the timeout).
        With `max_records`, the positions move past the records returned only; the rest of
        what was fetched stays buffered for the next poll."""
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be at least 1, not {max_records}")
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if not any(s.buffered for s in self._partitions.values()):
                for fetched in self._run(self._poll_once(deadline)):
                    hold(self._state(fetched.tp), fetched, self.include_control)
            records = drain(self._partitions.values(), max_records)
            if records or time.monotonic() >= deadline:
                return records

    def poll_batches(self, timeout_ms: int = 1000) -> list[FetchedBatches]:
        """Like poll(), as whole record batches (control batches included): for readers that
        turn batches into columns and have no use for a Python object per record. Records
        of the first batch below `FetchedBatches.start` were consumed before. A partition
        with records poll() buffered is left out until poll() has returned them."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            fetched = self._run(self._poll_once(deadline))
            for f in fetched:
                self._state(f.tp).advance(f.end)
            if fetched or time.monotonic() >= deadline:
                return fetched

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, from a Metadata request (empty if the topic is unknown)."""
        return self._run(self._partitions_for(topic))

    def validate_position(self, tp: TopicPartition, offset: int, leader_epoch: int) -> None:
        """Raises LogTruncationError, as poll() would with auto_offset_reset="none", unless
        the log still holds, unchanged, everything before `offset` as it was when the record
        before it had `leader_epoch`. Asks OffsetForLeaderEpoch; no position changes."""
        self._partitions.setdefault(tp, self._new_partition())
        end_offset, end_epoch = self._run(self._end_of_epoch(tp, leader_epoch, self._api_deadline()))
        if not holds(offset, leader_epoch, end_offset, end_epoch):
            raise LogTruncationError({tp: diverged_at(offset, end_offset, end_epoch)})

    def epoch_at(self, tp: TopicPartition, offset: int) -> int | None:
        """The leader epoch of the record at `offset` (None if the log has none there),
        found by walking the leader's epochs down from its newest with OffsetForLeaderEpoch:
        one request per epoch that began after `offset`."""
        self._partitions.setdefault(tp, self._new_partition())
        return self._run(self._epoch_at(tp, offset))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndEpoch] | None = None) -> None:
        """Commits `offsets` to the consumer's group (default: next_offsets(), where each
        partition would go on, with the epoch of the record before it), retrying through a
        coordinator that moves until default_api_timeout_ms."""
        group_id = self._group("commit()")
        at = self.next_offsets() if offsets is None else dict(offsets)
        if at:
            self._run(self._coordinator_call("OffsetCommit", offset_commit_request(group_id, at), commit_outcome))

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndEpoch | None]:
        """The group's committed position of each partition (None if none was committed):
        seek() to it with its epoch and the next poll checks the log still holds it."""
        request = offset_fetch_request(self._group("committed()"), partitions)
        return self._run(self._coordinator_call("OffsetFetch", request, committed_of))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for state in self._partitions.values():
                state.drop_download()
            for conn in self._connections.values():
                conn.close()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- plumbing

    def _new_partition(self) -> PartitionState:
        return PartitionState(reset=self._policy())

    def _policy(self) -> Reset | None:
        return None if self.auto_offset_reset == "none" else self.auto_offset_reset

    def _api_deadline(self) -> float:
        return time.monotonic() + self.api_timeout

    def _group(self, call: str) -> str:
        if self.group_id is None:
            raise ConsumerError(f"{call} needs a group: make the Consumer with group_id=...")
        return self.group_id

    def _state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._partitions[tp]
        except KeyError:
            raise ConsumerError(f"{tp} is not assigned") from None

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        if self._closed:
            coroutine.close()
            raise ConsumerError("the consumer is closed")
        return self._loop.run_until_complete(coroutine)

    async def _request(self, address: tuple[str, int], request: Any) -> Any:
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = await self._connect(address)
            self._connections[address] = conn
        try:
            return await conn.request(request, self.timeout)
        except (TimeoutError, ConnectionError):
            conn.close()
            raise

    async def _connect(self, address: tuple[str, int]) -> KafkaConnection:
        """A connection over the configured TLS, logged in; a refused login or handshake is
        AuthenticationError (a TLS connection closed during its handshake is not: a node
        stopping does that, and it is retried as any unreachable node is)."""
        host, port = address
        try:
            return await KafkaConnection.connect(host, port, client_id=self.client_id, timeout=self.timeout,
                                                 tls=self._tls, login=self._login)
        except LoginRefused as e:
            raise AuthenticationError(f"{host}:{port}: {e}; check sasl.mechanism, sasl.username and "
                                      "sasl.password") from None
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
            raise
        except ssl.SSLError as e:
            reason = getattr(e, "verify_message", None) or e.reason or str(e)
            raise AuthenticationError(f"{host}:{port}: TLS handshake failed ({reason}); check the ssl.* settings: "
                                      "the CA that signed the server's certificate, the client certificate "
                                      "if the server asks for one, ssl.endpoint.identification.algorithm"
                                      ) from None

    async def _to_leader(self, tp: TopicPartition, request: Any) -> Any:
        state = self._state(tp)
        if state.leader is None or state.leader not in self._cluster.brokers:
            await self._refresh_metadata()
        if state.leader is None or state.leader not in self._cluster.brokers:
            raise ConnectionError(f"no leader known for {tp}")
        return await self._request(self._cluster.brokers[state.leader], request)

    async def _backoff(self, deadline: float) -> None:
        """retry.backoff.ms (never past `deadline`), then fresh metadata: leadership moved
        or a node is unreachable. A failed refresh is left for the next attempt to meet."""
        await asyncio.sleep(max(0.0, min(self.retry_backoff, deadline - time.monotonic())))
        try:
            await self._refresh_metadata()
        except UNREACHABLE:
            pass

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
        response = await self._any_broker(request, "Metadata")
        self._cluster = _Cluster({b.node_id: (b.host, b.port) for b in response.brokers}, time.monotonic())
        for topic in response.topics:
            if topic.error_code in NOT_AUTHORIZED:
                raise AuthorizationError(f"Metadata {topic.name}: {topic.error_code.name.upper()}: the cluster's ACLs do not "
                                         "let this consumer's principal DESCRIBE the topic")
            for p in topic.partitions:
                state = self._partitions.get(TopicPartition(topic.name, p.partition_index))
                if state is None:
                    continue
                state.leader = p.leader_id if p.error_code == ErrorCode.none and p.leader_id >= 0 else None
                if p.leader_epoch > state.leader_epoch:
                    state.leader_epoch = p.leader_epoch
        return response

    async def _any_broker(self, request: Any, what: str) -> Any:
        """The answer to `request` of the first broker that gives one: those the last Metadata
        named, then the bootstrap servers."""
        last: Exception | None = None
        for address in list(self._cluster.brokers.values()) + self.bootstrap:
            try:
                return await self._request(address, request)
            except UNREACHABLE as e:
                last = e
        raise ConnectionError(f"no broker answered {what}: {last}")

    async def _coordinator_call(self, what: str, request: Any, read: Callable[[Any], tuple[ErrorCode, _T]]) -> _T:
        """What `read` takes from the group coordinator's answer to `request`, asked again
        (retry.backoff.ms apart) while the coordinator is unknown, moved, loading or
        unreachable, until default_api_timeout_ms; another error is raised at once."""
        deadline = self._api_deadline()
        while True:
            try:
                if self._coordinator is None:
                    error, self._coordinator = coordinator_of(
                        await self._any_broker(find_coordinator_request(self._group(what)), "FindCoordinator"))
                if self._coordinator is not None:
                    error, value = read(await self._request(self._coordinator, request))
                    if error == ErrorCode.none:
                        return value
                if error not in COORDINATOR_MOVED:
                    raise error_for(f"{what} (group {self.group_id})", error)
                why = error.name
            except UNREACHABLE as e:
                why = str(e) or type(e).__name__
            self._coordinator = None
            if time.monotonic() >= deadline:
                raise _NoAnswer(f"{what} (group {self.group_id}): no answer from its coordinator ({why})")
            await asyncio.sleep(max(0.0, min(self.retry_backoff, deadline - time.monotonic())))

    # ---------------------------------------------------------------- offsets and validation

    async def _ask_leader(self, tp: TopicPartition, what: str, request_for: Callable[[int], Any],
                          deadline: float) -> Any:
        """The partition's entry in its leader's answer to `request_for(current leader
        epoch)`, asked again (retry.backoff.ms apart) through leadership errors and
        unreachable leaders until `deadline`, then _NoAnswer."""
        while True:
            try:
                p = (await self._to_leader(tp, request_for(self._state(tp).leader_epoch))).topics[0].partitions[0]
                if p.error_code == ErrorCode.none:
                    return p
                if p.error_code not in RETRIABLE:
                    raise error_for(f"{what} {tp}", p.error_code)
                why = p.error_code.name
            except UNREACHABLE as e:
                why = str(e) or type(e).__name__
            if time.monotonic() >= deadline:
                raise _NoAnswer(f"{what} {tp}: no answer from its leader ({why})")
            await self._backoff(deadline)

    async def _list_offsets(self, partitions: list[TopicPartition], timestamp: int,
                            deadline: float) -> dict[TopicPartition, OffsetAndEpoch]:
        out = {}
        for tp in partitions:
            self._partitions.setdefault(tp, self._new_partition())
            p = await self._ask_leader(tp, "ListOffsets", partial(_list_offsets_request, tp, timestamp), deadline)
            out[tp] = OffsetAndEpoch(p.offset, p.leader_epoch if p.leader_epoch >= 0 else None)
        return out

    async def _end_of_epoch(self, tp: TopicPartition, epoch: int, deadline: float) -> tuple[int, int]:
        """The leader's answer to OffsetForLeaderEpoch: (end offset, largest epoch <= `epoch`)."""
        p = await self._ask_leader(tp, "OffsetForLeaderEpoch", lambda current: build_request(23, EPOCH_V, {
            "replica_id": -1, "topics": [{"topic": tp.topic, "partitions": [{
                "partition": tp.partition, "current_leader_epoch": current, "leader_epoch": epoch}]}],
        }), deadline)
        return p.end_offset, p.leader_epoch

    async def _epoch_at(self, tp: TopicPartition, offset: int) -> int | None:
        await self._refresh_metadata()
        deadline = self._api_deadline()
        epoch, found = self._state(tp).leader_epoch, None
        while epoch >= 0:
            end, epoch = await self._end_of_epoch(tp, epoch, deadline)
            if epoch < 0 or end <= offset:
                return found
            found, epoch = epoch, epoch - 1
        return found

    async def _resets(self, deadline: float) -> None:
        for tp, state in self._partitions.items():
            if state.position is not None:
                continue
            if state.reset is None:
                raise ConsumerError(f"{tp} has no position and auto_offset_reset is 'none': seek() it first")
            found = (await self._list_offsets([tp], EARLIEST if state.reset == "earliest" else LATEST, deadline))[tp]
            state.seek(found.offset, found.leader_epoch, validated_epoch=state.leader_epoch)

    async def _validate(self, deadline: float) -> None:
        """Checks positions whose leader epoch changed since they were last checked."""
        truncated: dict[TopicPartition, OffsetAndEpoch | None] = {}
        for tp, state in self._partitions.items():
            if not state.awaits_validation:
                continue
            assert state.position is not None and state.last_epoch is not None
            end_offset, end_epoch = await self._end_of_epoch(tp, state.last_epoch, deadline)
            if holds(state.position, state.last_epoch, end_offset, end_epoch):
                state.validated_epoch = state.leader_epoch
            else:
                truncated[tp] = diverged_at(state.position, end_offset, end_epoch)
        if truncated:
            on_truncation(truncated, self._partitions, self._policy())

    # ---------------------------------------------------------------- fetching

    async def _poll_once(self, deadline: float) -> list[FetchedBatches]:
        """One round: resets, validation, then a Fetch to each leader. A partition's error
        is raised only if no other partition brought records: those are returned first, and
        the failing partition, whose position did not move, fails again on the next round."""
        if not self._partitions:
            raise ConsumerError("no partitions are assigned: assign() some first")
        try:
            if not self._cluster.brokers:
                await self._refresh_metadata()
            await self._resets(deadline)
            await self._validate(deadline)
        except (_NoAnswer, *UNREACHABLE):
            await self._backoff(deadline)
            return []
        by_leader: dict[int | None, list[tuple[TopicPartition, PartitionState]]] = {}
        out: list[FetchedBatches] = []
        error: ConsumerError | None = None
        retry = False
        for tp, state in self._partitions.items():
            if state.position is None or state.buffered or state.awaits_validation:
                continue
            if state.download is None:
                by_leader.setdefault(state.leader, []).append((tp, state))
                continue
            try:
                snapshot = await self._download(tp, state)
            except UNREACHABLE:
                retry = True
                continue
            except ConsumerError as e:
                error = error or e
                continue
            if snapshot is not None:
                out.append(snapshot)
        if out:
            return out  # a whole snapshot is a poll's worth; the log after it comes next
        wait_s = max(0.0, deadline - time.monotonic())
        retry = retry or None in by_leader
        for leader, partitions in by_leader.items():
            address = self._cluster.brokers.get(leader) if leader is not None else None
            if address is None:
                retry = True
                continue
            try:
                response = await self._request(address, fetch_request(
                    partitions, min(self.fetch_max_wait_ms, int(wait_s * 1000)), self.max_partition_fetch_bytes,
                    self.fetch_max_bytes))
            except UNREACHABLE:
                retry = True
                continue
            for topic in response.responses:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition_index)
                    try:
                        fetched = read_partition(tp, self._state(tp), p, self._policy(), self.snapshot_fallback)
                    except ConsumerError as e:
                        error = error or e
                        continue
                    if fetched is not None:
                        out.append(fetched)
                    retry = retry or p.error_code in LEADERSHIP
        if error is not None and not out:
            raise error
        if retry and not out:
            await self._backoff(deadline)
        return out

    async def _download(self, tp: TopicPartition, state: PartitionState) -> FetchedBatches | None:
        """One FetchSnapshot round of `state.download` at its leader (`read_snapshot_chunk`)."""
        if state.leader is None or state.leader not in self._cluster.brokers:
            await self._refresh_metadata()
        address = self._cluster.brokers.get(state.leader) if state.leader is not None else None
        if address is None:
            raise ConnectionError(f"no leader known for {tp}")
        response = await self._request(address, fetch_snapshot_request(tp, state, self.fetch_max_bytes))
        return read_snapshot_chunk(tp, state, response)


def _list_offsets_request(tp: TopicPartition, timestamp: int, current_leader_epoch: int) -> Any:
    return build_request(2, LIST_OFFSETS_V, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": tp.topic, "partitions": [{
            "partition_index": tp.partition, "current_leader_epoch": current_leader_epoch, "timestamp": timestamp}]}],
    })
