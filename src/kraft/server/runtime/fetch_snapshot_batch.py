"""FetchSnapshot naming several partitions, at the node: KIP-630's "Request Handling".

A RaftCore knows only its own partition, and a node replicates several (`__cluster_metadata-0`
and the `__consumer_offsets` partitions), so what KIP-630 says of a FetchSnapshot naming
several partitions happens here, around the cores.

Leader (`serve_across`), in two steps through the cores of the partitions named. First each
says how many bytes its partition wants (`snapshot_fetch.wanted`: what is left of the
snapshot from the position, at most replica.fetch.snapshot.max.bytes; 0 for a partition that
will be answered with an error). The response's bytes (the request's MaxBytes, at most
replica.fetch.response.max.bytes) are shared by `messages.share_bytes`: at least the average
each when a partition has that much left, what one cannot use to the others. Then each core
serves its partition alone, with its share as the MaxBytes, and the answers are merged into
one response: one entry per topic, partitions in the request's order. A partition this node
does not replicate is answered UNKNOWN_TOPIC_OR_PARTITION in its place. A core answers
FetchSnapshot in the step that receives it, so both steps happen in one turn of the loop and
nothing moves between the shares and the chunks. The bytes served are counted per partition
as each core's answer leaves its driver, as for a request naming one.

Follower (`FetchSnapshotBatcher`): the FetchSnapshot requests of several partitions to one
leader go out as one. Those issued in the same turn of the loop are sent together at its
end; while a FetchSnapshot is in flight to a peer, new ones to it wait for its answer and go
with the next. The answer is handed to each core as a response naming only its partition,
all in one turn, so their next requests come out together: partitions that began
downloading at different moments travel together after one round trip, and stay so. A
core that gave up on a request that is still waiting (its deadline passed) asks again, and
the new request replaces the old.
"""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, cast

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from kraft.raft import RaftCore, snapshot_fetch
from kraft.raft import messages as m
from kraft.raft.epochs import fence
from kraft.server.runtime.peers import Peers

T = TypeVar("T")
PartitionKey = tuple[str, int]  # (topic name, partition index), as FetchSnapshot names them


class SnapshotPartition(Protocol):
    """What the leader's split needs of a partition's driver (a PartitionDriver)."""

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None: ...

    async def handle_request(self, request: Any) -> Any: ...


def partitions_named(request: m.FetchSnapshotRequest) -> int:
    return sum(len(topic.partitions) for topic in request.topics)


async def serve_across(
    request: m.FetchSnapshotRequest,
    partition_of: Callable[[str, int], SnapshotPartition | None],
    response_max_bytes: int,
) -> m.FetchSnapshotResponse:
    """The answer to a FetchSnapshot naming several partitions, each served by its own core."""
    asked = [(topic, part, partition_of(topic.name, part.partition))
             for topic in request.topics for part in topic.partitions]
    wants = [_wanted(driver, topic, part) if driver is not None else 0 for topic, part, driver in asked]
    shares = m.share_bytes(min(request.max_bytes, response_max_bytes), wants)
    answers: list[tuple[str, m.FetchSnapshotResponsePartition]] = []
    for (topic, part, driver), share in zip(asked, shares, strict=True):
        if driver is None:
            answers.append((topic.name, m.fetch_snapshot_partition(
                part.partition, ErrorCode.unknown_topic_or_partition,
                (part.snapshot_id.end_offset, part.snapshot_id.epoch), leader_id=m.NO_LEADER, epoch=-1)))
            continue
        alone = replace(request, max_bytes=cast(i32, share), topics=(replace(topic, partitions=(part,)),))
        response = await driver.handle_request(alone)
        if response.error_code != ErrorCode.none:  # the request's own error (another cluster): every core's
            return m.fetch_snapshot_response([], response.error_code)
        answers.append((topic.name, response.topics[0].partitions[0]))
    return m.fetch_snapshot_response(by_topic(answers))


def _wanted(driver: SnapshotPartition, topic: Any, part: Any) -> int:
    def ask(core: RaftCore, _now: int) -> int:
        return snapshot_fetch.wanted(topic, part, lambda epoch: fence(epoch, core.epoch, core.is_leader),
                                     core.catalog, core.config)

    return driver.step(ask) or 0


def by_topic(entries: Sequence[tuple[Any, Any]]) -> list[tuple[Any, list[Any]]]:
    """Partitions grouped under their topic (its name, or its id in Fetch), topics in order of
    first appearance."""
    topics: dict[Any, list[Any]] = {}
    for name, partition in entries:
        topics.setdefault(name, []).append(partition)
    return list(topics.items())


def merged_topics(requests: Sequence[Any], key: Callable[[Any], Any]) -> tuple[Any, ...]:
    """The topics of several requests as one request names them: each topic once, as the first
    request named it (`key`: its name, or its id in Fetch), with every partition asked of it."""
    templates: dict[Any, Any] = {}
    entries = []
    for request in requests:
        for topic in request.topics:
            templates.setdefault(key(topic), topic)
            entries += [(key(topic), part) for part in topic.partitions]
    return tuple(replace(templates[k], partitions=tuple(parts)) for k, parts in by_topic(entries))


def combine(requests: Sequence[m.FetchSnapshotRequest]) -> m.FetchSnapshotRequest:
    """One FetchSnapshot asking for every partition the requests (one node's cores') ask for."""
    return replace(requests[0], max_bytes=max(r.max_bytes for r in requests),
                   topics=merged_topics(requests, lambda topic: topic.name))


def answer_for(response: m.FetchSnapshotResponse, key: PartitionKey) -> m.FetchSnapshotResponse:
    """The part of a response naming one partition, as its core would have been answered
    alone (no partition if the leader left it out: the core backs off and asks again)."""
    name, index = key
    found = [p for topic in response.topics if topic.name == name for p in topic.partitions if p.index == index]
    return m.fetch_snapshot_response([(name, found[:1])] if found else [], response.error_code)


@dataclass(slots=True)
class _Waiting:
    request: m.FetchSnapshotRequest
    on_response: Callable[[Any], None]
    on_failure: Callable[[], None]


class FetchSnapshotBatcher:
    """The follower's side: sends the cores' FetchSnapshot requests through the peers, one
    request per leader for all the partitions downloading from it (see the module's doc)."""

    def __init__(self, peers: Peers) -> None:
        self.peers = peers
        self._waiting: dict[int, dict[PartitionKey, _Waiting]] = {}
        self._busy: set[int] = set()  # peers with a FetchSnapshot in flight, or one sent at the end of this turn

    def send(self, destination: int, request: Any, on_response: Callable[[Any], None],
             on_failure: Callable[[], None], extra_timeout_ms: int = 0) -> None:
        """As Peers.send."""
        key = m.named(request)
        if key is None or not isinstance(request, m.FetchSnapshotRequest):  # a core's names its one partition
            self.peers.send(destination, request, on_response, on_failure, extra_timeout_ms)
            return
        self._waiting.setdefault(destination, {})[key] = _Waiting(request, on_response, on_failure)
        if destination not in self._busy:
            self._busy.add(destination)
            asyncio.get_running_loop().call_soon(self._flush, destination)

    def _flush(self, destination: int) -> None:
        waiting = self._waiting.pop(destination, None)
        if not waiting:
            self._busy.discard(destination)
            return
        parts = list(waiting.items())
        request = parts[0][1].request if len(parts) == 1 else combine([w.request for _, w in parts])
        self.peers.send(destination, request, lambda response: self._answered(destination, parts, response),
                        lambda: self._failed(destination, parts))

    def _answered(self, destination: int, parts: list[tuple[PartitionKey, _Waiting]], response: Any) -> None:
        try:
            for key, waiting in parts:
                waiting.on_response(answer_for(response, key))
        finally:
            self._flush(destination)

    def _failed(self, destination: int, parts: list[tuple[PartitionKey, _Waiting]]) -> None:
        try:
            for _, waiting in parts:
                waiting.on_failure()
        finally:
            self._flush(destination)
