"""One Fetch per pair of nodes: the replica fetcher of Kafka's brokers, around the cores.

A RaftCore replicates one partition and sends a Fetch naming only it; a node replicates
several (`__cluster_metadata-0` and the `__consumer_offsets` partitions), usually from the same
leader. Kafka's replica fetcher sends one Fetch per pair of brokers for all the partitions they
share, and the leader answers it as one request, parked until any of its partitions has
something to say (KIP-74's semantics; full requests, no KIP-227 session). This module does the
same for kraft's cores, on both ends.

Leader (`serve_across`): each partition the Fetch names is handed to its core as a Fetch of its
own, all in one turn of the loop; each answers at once or parks it as it would any Fetch
(records, a moved high watermark, an error answer at once; otherwise up to MaxWait). When the
first answers, the others are completed then and there with what they have
(`RaftCore.complete_fetch`), and the answers go back merged: one entry per topic, partitions in
the request's order, a partition this node does not replicate UNKNOWN_TOPIC_OR_PARTITION in
place, a request-level error (another cluster) alone. A partition's bytes are bounded by its
PartitionMaxBytes, so the response by the request's MaxBytes, their sum. Partitions that look
like they have news (records past the fetch offset, a high watermark past the fetcher's) are
handed over first, and once one has answered the rest are asked with no wait: an idle partition
then costs its core one step, not a park and a completion (a follower's Fetch that reports its
position names every partition it follows here, and usually only one has moved).

Follower (`FetchBatcher`), per leader: the Fetches its cores issue in one turn go out together
at its end, as one request on the peer's replication connection. While that request is in
flight, one more Fetch to the leader goes alone at once on its partition's own connection (a
joiner: a partition that started following this leader, or one whose core gave up waiting),
never waiting behind a parked request. When the combined request is answered, each core gets
the part naming its partition, all in the same turn, and the next combined request waits until
every one of them has asked again or `settle`d: a core that appended records asks only once
they are fsynced (its next Fetch reports the new position, which is what the leader's high
watermark waits for), and its driver settles it after any step that leaves it neither fsyncing
nor asking (records refused, a role given up). So partitions that replicate at once keep
travelling together, however long their fsyncs take. Partitions sent alone since join the next
combined request: each core's Fetch is delivered one answer, whichever comes first, and the
other is dropped, so a joiner merges after one round trip.
"""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol, cast

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from kraft.raft import messages as m
from kraft.server.runtime.fetch_snapshot_batch import by_topic, merged_topics
from kraft.server.runtime.peers import Peers

PartitionKey = tuple[Any, int]  # (topic id, partition index), as Fetch v13 names them

# How long, as a share of its MaxWait, a partition's Fetch may go again unanswered (follower)
# or unstepped (leader) after its core last saw it: ample at a hundred writes a second, and
# short beside the fetch timeout and check quorum, which count from that sight.
QUIET_SHARE_OF_WAIT = 0.25


class FetchPartition(Protocol):
    """What the leader's side needs of a partition's driver (a PartitionDriver)."""

    def begin_request(self, request: Any) -> tuple[Any, asyncio.Future]: ...

    def complete_fetch(self, handle: Any) -> None: ...

    def has_news(self, fetch_offset: int, high_watermark: int) -> bool:
        """Whether a Fetch from this position would likely be answered at once (a hint: only the
        order of the work depends on it)."""
        ...

    def now(self) -> int: ...

    def fetched_quietly(self, replica_id: int, part: Any, at: int) -> None: ...

    def still_quiet(self, replica_id: int, part: Any, wait_ms: int) -> bool: ...

    def answer_at_end(self) -> Any: ...

    def news(self) -> asyncio.Future: ...


@dataclass(slots=True)
class _Started:
    """One partition's part of a Fetch, handed to its core."""

    driver: FetchPartition
    handle: Any
    answer: asyncio.Future
    at: int  # the node's clock when it was handed over


def partitions_named(request: m.FetchRequest) -> int:
    return sum(len(topic.partitions) for topic in request.topics)


async def serve_across(request: m.FetchRequest,
                       partition_of: Callable[[Any, int], FetchPartition | None]) -> m.FetchResponse:
    """The answer to a Fetch naming several partitions, each served by its own core."""
    asked: list[tuple[Any, Any, FetchPartition | None]] = [
        (topic, part, partition_of(topic.topic_id, part.partition))
        for topic in request.topics for part in topic.partitions]
    replica = request.replica_state.replica_id
    wait_ms = int(request.max_wait.total_seconds() * 1000)
    started_for: dict[int, _Started] = {}
    quiet: dict[int, asyncio.Future] = {}  # left out of their cores: each one's next news
    answered = False
    still = [replica >= 0 and driver is not None and driver.still_quiet(replica, part, wait_ms)
             for _, part, driver in asked]
    # Those with news first, quiet ones last; one partition at least goes to its core, to park the request.
    for i in sorted(range(len(asked)), key=lambda i: (not _news(asked[i]), still[i])):
        topic, part, driver = asked[i]
        if driver is None:
            continue
        if still[i] and started_for:
            quiet[i] = driver.news()
            continue
        started = started_for[i] = _begin(request, topic, part, driver, answered)
        answered = answered or started.answer.done()
    # Awaited only when needed: asyncio.wait and gather take turns of the loop even for answers
    # already there, which they are when one partition had news (the rest were asked with no wait).
    if started_for and not answered:
        await asyncio.wait([started.answer for started in started_for.values()] + list(quiet.values()),
                           return_when=asyncio.FIRST_COMPLETED)
    for started in started_for.values():
        if not started.answer.done():
            started.driver.complete_fetch(started.handle)  # answered in this step, with what it has
    for i, news in quiet.items():
        if news.done():  # news for a quiet one meanwhile: its core answers it after all, at once
            topic, part, driver = asked[i]
            assert driver is not None
            started_for[i] = _begin(request, topic, part, driver, no_wait=True)
    unanswered = [started.answer for started in started_for.values() if not started.answer.done()]
    if unanswered:  # only if the node stopped meanwhile: its replies fail
        await asyncio.gather(*unanswered)
    entries: list[tuple[Any, Any]] = []
    for i, (topic, part, driver) in enumerate(asked):
        done = started_for.get(i)
        if done is None:
            entries.append((topic.topic_id, m.fetch_partition(part.partition, ErrorCode.unknown_topic_or_partition,
                                                              leader_id=m.NO_LEADER, epoch=-1)
                            if driver is None else driver.answer_at_end()))
            continue
        response = done.answer.result()
        if response.error_code != ErrorCode.none:  # the request's own error (another cluster): every core's
            return m.FetchResponse(throttle_time=response.throttle_time, error_code=response.error_code, responses=())
        answer = response.responses[0].partitions[0]
        if replica >= 0 and _plain(answer) and not answer.records:
            done.driver.fetched_quietly(replica, part, done.at)
        entries.append((topic.topic_id, answer))
    return m.fetch_response_of(by_topic(entries))


def _begin(request: m.FetchRequest, topic: Any, part: Any, driver: FetchPartition, no_wait: bool) -> _Started:
    """One partition's part of the request handed to its core as a Fetch of its own."""
    alone = replace(request, max_bytes=part.partition_max_bytes, topics=(replace(topic, partitions=(part,)),))
    if no_wait:
        alone = replace(alone, max_wait=_NO_WAIT)
    at = driver.now()
    return _Started(driver, *driver.begin_request(alone), at)


def _plain(answer: Any) -> bool:
    """An answer with no error, divergence or snapshot to fetch."""
    return (answer.error_code == ErrorCode.none and answer.diverging_epoch.end_offset == -1
            and answer.snapshot_id.end_offset == -1)


_NO_WAIT = cast(i32Timedelta, timedelta(0))


def _news(asked: tuple[Any, Any, FetchPartition | None]) -> bool:
    _, part, driver = asked
    return driver is not None and driver.has_news(part.fetch_offset, part.high_watermark)


def combine(requests: Sequence[m.FetchRequest]) -> m.FetchRequest:
    """One Fetch asking for every partition the requests (one node's cores') ask for."""
    topics = merged_topics(requests, lambda topic: topic.topic_id)
    total = sum(part.partition_max_bytes for topic in topics for part in topic.partitions)
    return replace(requests[0], max_bytes=cast(i32, min(total, 2**31 - 1)), topics=topics)


def answer_for(response: m.FetchResponse, key: PartitionKey) -> m.FetchResponse:
    """The part of a response naming one partition, as its core would have been answered alone
    (no partition if the leader left it out: the core backs off and asks again)."""
    topic_id, index = key
    found = [p for topic in response.responses if topic.topic_id == topic_id
             for p in topic.partitions if p.partition_index == index]
    return m.fetch_response_of([(topic_id, found[:1])] if found else [], response.error_code)


@dataclass(eq=False, slots=True)
class _Fetch:
    """One core's Fetch: delivered one outcome, an answer or a failure, whichever comes first."""

    request: m.FetchRequest
    on_response: Callable[[Any], None]
    on_failure: Callable[[], None]
    extra_timeout_ms: int
    asked_at: float  # the loop's clock when its core issued it
    done: bool = False

    def answer(self, response: Any) -> None:
        if not self.done:
            self.done = True
            self.on_response(response)

    def fail(self) -> None:
        if not self.done:
            self.done = True
            self.on_failure()


def _nothing_new(fetch: _Fetch, answer: m.FetchResponse, now: float) -> bool:
    """Whether a partition's part of a combined answer only repeats what its core asked from,
    so that the core's Fetch may go again as it is, unanswered, rather than step the core to ask
    the same: no error, no records, no divergence or snapshot, the same leader epoch and high
    watermark (KIP-1166's, which the request carries), and the Fetch younger than
    QUIET_SHARE_OF_WAIT of its MaxWait. A part the leader completed only because another had
    news would otherwise cost its core a step a write (decision 0040). Sent again, it waits
    only what is left of its MaxWait (`_send_combined`): its core hears within that MaxWait,
    as from a Fetch of its own."""
    if answer.error_code != ErrorCode.none or not answer.responses or now - fetch.asked_at >= _quiet_for(fetch):
        return False
    asked = fetch.request.topics[0].partitions[0]
    p = answer.responses[0].partitions[0]
    return (_plain(p) and not p.records and p.high_watermark == asked.high_watermark
            and p.current_leader.leader_epoch == asked.current_leader_epoch)


def _quiet_for(fetch: _Fetch) -> float:
    return fetch.request.max_wait.total_seconds() * QUIET_SHARE_OF_WAIT


@dataclass(eq=False)
class _Leader:
    """The follower's fetcher for one leader."""

    asked: dict[PartitionKey, _Fetch] = field(default_factory=dict)  # issued, not yet sent
    combined: dict[PartitionKey, _Fetch] | None = None  # in the combined request in flight
    alone: dict[PartitionKey, _Fetch] = field(default_factory=dict)  # sent alone, in flight
    expected: set[PartitionKey] = field(default_factory=set)  # answered, neither asked again nor settled
    scheduled: bool = False


class FetchBatcher:
    """The follower's side: sends the cores' Fetches through the peers, one combined request per
    leader for all the partitions following it (see the module's doc)."""

    def __init__(self, peers: Peers) -> None:
        self.peers = peers
        self._leaders: dict[int, _Leader] = {}

    def send(self, destination: int, request: Any, on_response: Callable[[Any], None],
             on_failure: Callable[[], None], extra_timeout_ms: int = 0) -> None:
        """As Peers.send."""
        key = m.named(request)
        if key is None or not isinstance(request, m.FetchRequest):
            self.peers.send(destination, request, on_response, on_failure, extra_timeout_ms)
            return
        leader = self._leaders.setdefault(destination, _Leader())
        leader.asked[key] = _Fetch(request, on_response, on_failure, extra_timeout_ms,
                                   asyncio.get_running_loop().time())
        leader.expected.discard(key)
        self._schedule(destination, leader)

    def settle(self, key: PartitionKey) -> None:
        """The partition's core is not about to ask again (its driver says so after a step that
        left it neither fsyncing nor asking): the next combined request waits for it no more."""
        for destination, leader in self._leaders.items():
            if key in leader.expected:
                leader.expected.discard(key)
                self._schedule(destination, leader)

    def _schedule(self, destination: int, leader: _Leader) -> None:
        if not leader.scheduled:
            leader.scheduled = True
            asyncio.get_running_loop().call_soon(self._flush, destination)

    def _flush(self, destination: int) -> None:
        leader = self._leaders[destination]
        leader.scheduled = False
        if not leader.asked:
            return
        if leader.combined is not None:  # joiners go alone, never behind a parked request
            for key, fetch in leader.asked.items():
                self._send_alone(destination, leader, key, fetch)
            leader.asked = {}
            return
        if not leader.expected:  # else wait for those fsyncing what they got
            self._send_combined(destination, leader)

    def _send_combined(self, destination: int, leader: _Leader) -> None:
        # Partitions in flight alone ride along: the first answer either way is theirs.
        parts = {**{k: f for k, f in leader.alone.items() if not f.done}, **leader.asked}
        leader.asked = {}
        leader.alone = {}
        if len(parts) == 1:  # one partition: a Fetch of its own, as its core made it
            ((key, fetch),) = parts.items()
            self._send_alone(destination, leader, key, fetch)
            return
        leader.combined = parts
        fetches = list(parts.items())
        request = combine([f.request for _, f in fetches])
        # A Fetch going again unanswered (`_nothing_new`) waits only what is left of its MaxWait:
        # its core hears within that, as from a Fetch of its own, and never nears the fetch timeout.
        now = asyncio.get_running_loop().time()
        left_ms = int(min(f.request.max_wait.total_seconds() - (now - f.asked_at) for _, f in fetches) * 1000)
        if left_ms < request.max_wait.total_seconds() * 1000:
            request = replace(request, max_wait=cast(i32Timedelta, timedelta(milliseconds=max(0, left_ms))))
        extra = max(f.extra_timeout_ms for _, f in fetches)
        self.peers.send(destination, request, lambda response: self._answered(destination, fetches, response),
                        lambda: self._failed(destination, fetches), extra)

    def _send_alone(self, destination: int, leader: _Leader, key: PartitionKey, fetch: _Fetch) -> None:
        leader.alone[key] = fetch

        def answered(response: Any) -> None:
            if leader.alone.get(key) is fetch:
                del leader.alone[key]
            fetch.answer(response)

        def failed() -> None:
            if leader.alone.get(key) is fetch:
                del leader.alone[key]
            fetch.fail()

        self.peers.send(destination, fetch.request, answered, failed, fetch.extra_timeout_ms)

    def _answered(self, destination: int, fetches: list[tuple[PartitionKey, _Fetch]], response: Any) -> None:
        leader = self._leaders[destination]
        leader.combined = None
        try:
            now = asyncio.get_running_loop().time()
            answers = [(key, fetch, answer_for(response, key)) for key, fetch in fetches]
            held = {key for key, fetch, answer in answers
                    if not fetch.done and key not in leader.asked and _nothing_new(fetch, answer, now)}
            if len(held) == len(answers):  # nothing new anywhere (the leader's wait ran out): every core hears
                held = set()
            for key, fetch, answer in answers:
                if key in held:
                    leader.asked[key] = fetch  # rides in the next request, its core none the wiser
                    continue
                if not fetch.done:
                    leader.expected.add(key)  # until it asks again or its driver settles it
                fetch.answer(answer)
        finally:
            self._flush(destination)

    def _failed(self, destination: int, fetches: list[tuple[PartitionKey, _Fetch]]) -> None:
        leader = self._leaders[destination]
        leader.combined = None
        try:
            for _, fetch in fetches:
                fetch.fail()
        finally:
            self._flush(destination)
