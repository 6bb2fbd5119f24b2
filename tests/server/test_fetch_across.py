"""One Fetch per pair of nodes (issue 28): a follower asks its leader for every partition it
follows there in one Fetch, and the leader answers it as one request, parked until any of its
partitions has something to say, as Kafka's replica fetcher and fetch purgatory do.

The leader's side is tested on a one-voter node in this process over real TCP; the follower's
batching against a stand-in for the peer connections that records what is sent; both
together in node processes, where followers of a 3-voter cluster replicate four partitions."""

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from kraft.cli.cluster_client import request, run_async, scrape, settled_coordinators
from kraft.cli.local_cluster import LocalCluster
from kraft.groups import OFFSETS_TOPIC
from kraft.protocol import ErrorCode
from kraft.protocol.connection import KafkaConnection
from kraft.raft import messages as m
from kraft.records import SimpleRecord, build_batch
from kraft.server.runtime.fetch_batch import FetchBatcher, combine, serve_across
from kraft.server.runtime.node import OFFSETS_TOPIC_ID

from .cluster_helpers import QUIET, wait_for
from .test_fetch_snapshot_sharing import commit, groups_of
from .test_listeners import OBSERVER_ID

OFFSETS = [m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, p) for p in range(3)]
UNKNOWN = m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, 7)


def fetch_of(parts: list[tuple[m.LogPartition, int, int]], cluster_id: str, wait_ms: int) -> m.FetchRequest:
    """An observer's Fetch of (partition, fetch offset, epoch) each."""
    return combine([m.fetch_request(cluster_id, OBSERVER_ID, epoch, offset, epoch, 0, wait_ms, 1 << 20, where)
                    for where, offset, epoch in parts])


def entries(response: m.FetchResponse) -> list[tuple[uuid.UUID, int, ErrorCode, bool]]:
    """(topic id, partition, error, whether it carries records) of each partition answered."""
    return [(t.topic_id, p.partition_index, p.error_code, bool(p.records)) for t in response.responses
            for p in t.partitions]


def parked_until_news(node, ask: m.FetchRequest, news_on: int) -> m.FetchResponse:  # noqa: ANN001
    """The answer to `ask` (a MaxWait far beyond the test's), which must still be parked half a
    second later, after a commit on offsets-<news_on>: answered in time means answered at that news."""
    async def run() -> m.FetchResponse:
        connection = await KafkaConnection.connect("127.0.0.1", node.controller_port)
        try:
            answer = asyncio.ensure_future(connection.request(ask, 120))
            await asyncio.sleep(0.5)
            assert not answer.done(), "nothing new anywhere: parked"
            await asyncio.to_thread(commit, node.client_port, next(groups_of(news_on)), "news")
            return await answer
        finally:
            connection.close()

    return run_async(run())


def test_the_leader_parks_a_fetch_of_several_partitions_until_one_has_news(node):
    drivers = [node.node.metadata, *(node.node.offsets[p] for p in range(3))]
    # The node's broker registered and unfenced: no more metadata records of its own until news.
    wait_for(lambda: node.node.image.unfenced_brokers() == [1] and all(
        d.core.is_leader and d.core.high_watermark == d.core.log.end_offset for d in drivers),
        timeout=60, what="every partition led and committed, the broker unfenced")
    at_end = [(d.partition, d.core.log.end_offset, d.core.epoch) for d in drivers]
    # MaxWait far beyond the wait below for its answer: answered in time means answered at the news.
    ask = fetch_of(at_end[1:2] + [(UNKNOWN, 0, 1)] + at_end[:1] + at_end[2:], node.node.cluster_id, 600_000)

    registry = node.node.metrics.registry
    count, small = (registry.get_sample_value("kraft_fetch_request_partitions_count") or 0,
                    registry.get_sample_value("kraft_fetch_request_partitions_bucket", {"le": "4.0"}) or 0)
    response = parked_until_news(node, ask, news_on=1)
    assert response.error_code == ErrorCode.none
    # One entry per topic, in the request's order; offsets-1's records, the others none.
    assert entries(response) == [
        (OFFSETS_TOPIC_ID, 0, ErrorCode.none, False), (OFFSETS_TOPIC_ID, 7, ErrorCode.unknown_topic_or_partition, False),
        (OFFSETS_TOPIC_ID, 1, ErrorCode.none, True), (OFFSETS_TOPIC_ID, 2, ErrorCode.none, False),
        (m.METADATA_TOPIC_ID, 0, ErrorCode.none, False)]
    # Served as one request naming five partitions.
    assert registry.get_sample_value("kraft_fetch_request_partitions_count") == count + 1
    assert registry.get_sample_value("kraft_fetch_request_partitions_bucket", {"le": "4.0"}) == small

    # Data already there: answered at once (well within its MaxWait), the partitions without any alongside.
    ask = fetch_of(at_end[:1] + [(OFFSETS[1], at_end[2][1], at_end[2][2])], node.node.cluster_id, 600_000)
    response = run_async(request(node.controller_port, ask, 120))
    assert entries(response) == [(m.METADATA_TOPIC_ID, 0, ErrorCode.none, False),
                                 (OFFSETS_TOPIC_ID, 1, ErrorCode.none, True)]


def observer_fetched_at(port: int, where: m.LogPartition) -> int:
    """When the leader of `where` last had the observer's Fetch stepped into its core (DescribeQuorum)."""
    p = run_async(request(port, m.describe_quorum_request(where), 30)).topics[0].partitions[0]
    return next(o.last_fetch_timestamp for o in p.observers if o.replica_id == OBSERVER_ID)


def test_a_partition_fetched_again_from_where_it_had_nothing_stays_out_of_its_core_until_news(node):
    drivers = [node.node.offsets[p] for p in range(2)]
    wait_for(lambda: all(d.core.is_leader and d.core.high_watermark == d.core.log.end_offset for d in drivers),
             timeout=60, what="the offsets partitions led and committed")

    def at_end() -> list[tuple[m.LogPartition, int, int]]:
        return [(d.partition, d.core.log.end_offset, d.core.epoch) for d in drivers]

    # Offsets-0 is stepped and answered with nothing, as offsets-1 has news.
    quiet = at_end()
    response = parked_until_news(node, fetch_of(quiet, node.node.cluster_id, 600_000), news_on=1)
    assert entries(response) == [(OFFSETS_TOPIC_ID, 0, ErrorCode.none, False), (OFFSETS_TOPIC_ID, 1, ErrorCode.none, True)]
    stepped_at = observer_fetched_at(node.controller_port, OFFSETS[0])
    # Asked again from there (within a quarter of its MaxWait): answered the same, but its core
    # never saw it (its observer's last fetch unchanged).
    again = fetch_of(quiet[:1] + at_end()[1:], node.node.cluster_id, 600_000)
    response = parked_until_news(node, again, news_on=1)
    assert entries(response) == [(OFFSETS_TOPIC_ID, 0, ErrorCode.none, False), (OFFSETS_TOPIC_ID, 1, ErrorCode.none, True)]
    part = response.responses[0].partitions[0]
    core = drivers[0].core
    assert (part.high_watermark, part.log_start_offset, part.current_leader.leader_id, part.current_leader.leader_epoch) == (
        core.high_watermark, core.log.start_offset, 1, core.epoch)
    assert observer_fetched_at(node.controller_port, OFFSETS[0]) == stepped_at
    # News for it while the request is parked on the other: it goes to its core and its records come.
    response = parked_until_news(node, fetch_of(quiet[:1] + at_end()[1:], node.node.cluster_id, 600_000), news_on=0)
    assert entries(response) == [(OFFSETS_TOPIC_ID, 0, ErrorCode.none, True), (OFFSETS_TOPIC_ID, 1, ErrorCode.none, False)]
    assert observer_fetched_at(node.controller_port, OFFSETS[0]) > stepped_at


def test_a_fetch_of_several_partitions_from_another_cluster_is_refused_whole(node):
    ask = fetch_of([(m.METADATA, 0, 1), (OFFSETS[0], 0, 1)], "another-cluster", 0)
    response = run_async(request(node.controller_port, ask, 30))
    assert response.error_code == ErrorCode.inconsistent_cluster_id and response.responses == ()


class StandInPartition:
    """A partition's driver as serve_across sees it, like a core: a Fetch is answered at once
    when there is news or no wait, else parked until completed; records what it was asked."""

    def __init__(self, where: m.LogPartition, news: bool, quiet: bool = False) -> None:
        self.where, self.has_records, self.quiet = where, news, quiet
        self.asked: list[str] = []
        self.parked: asyncio.Future | None = None
        self.next_news: asyncio.Future | None = None
        self.quietly: list[int] = []  # the replicas whose Fetch it was told came back with nothing new

    def has_news(self, fetch_offset: int, high_watermark: int) -> bool:
        return self.has_records

    def now(self) -> int:
        return 0

    def fetched_quietly(self, replica_id: int, part: object, at: int) -> None:
        self.quietly.append(replica_id)

    def still_quiet(self, replica_id: int, part: object, wait_ms: int) -> bool:
        return self.quiet

    def answer_at_end(self) -> object:
        self.asked.append("answered at the end, not stepped")
        return self.response(records=False).responses[0].partitions[0]

    def news(self) -> asyncio.Future:
        if self.next_news is None:
            self.next_news = asyncio.get_running_loop().create_future()
        return self.next_news

    def begin_request(self, request: m.FetchRequest) -> tuple[int, asyncio.Future]:
        wait = request.max_wait.total_seconds()
        self.asked.append(f"fetch, waiting {wait:g} s")
        answer = asyncio.get_running_loop().create_future()
        if self.has_records or wait == 0:
            answer.set_result(self.response(records=self.has_records))
        else:
            self.parked = answer
        return 1, answer

    def complete_fetch(self, handle: int) -> None:
        self.asked.append("completed")
        assert self.parked is not None
        self.parked.set_result(self.response(records=False))

    def response(self, records: bool) -> m.FetchResponse:
        part = m.fetch_partition(self.where.index, ErrorCode.none, leader_id=1, epoch=1)
        if records:
            part = replace(part, records=build_batch([SimpleRecord(None, b"news")]))
        return m.fetch_response_of([(self.where.topic_id, [part])])


def test_an_idle_partition_is_asked_once_with_no_wait_when_another_has_news():
    idle = [StandInPartition(OFFSETS[0], news=False), StandInPartition(m.METADATA, news=False)]
    busy = StandInPartition(OFFSETS[1], news=True)
    by_key = {(p.where.topic_id, p.where.index): p for p in [*idle, busy]}
    # The busy partition is named between the idle ones: it is asked first all the same.
    ask = fetch_of([(OFFSETS[0], 5, 1), (OFFSETS[1], 5, 1), (m.METADATA, 5, 1)], "c", 500)
    response = run_async(serve_across(ask, lambda topic, index: by_key.get((topic, index))))
    assert busy.asked == ["fetch, waiting 0.5 s"]
    assert [p.asked for p in idle] == [["fetch, waiting 0 s"], ["fetch, waiting 0 s"]]  # neither parked
    assert entries(response) == [(OFFSETS_TOPIC_ID, 0, ErrorCode.none, False), (OFFSETS_TOPIC_ID, 1, ErrorCode.none, True),
                                 (m.METADATA_TOPIC_ID, 0, ErrorCode.none, False)]


def test_with_no_news_anywhere_every_partition_parks_and_the_first_to_answer_completes_the_rest():
    parts = [StandInPartition(OFFSETS[0], news=False), StandInPartition(m.METADATA, news=False)]
    by_key = {(p.where.topic_id, p.where.index): p for p in parts}
    ask = fetch_of([(OFFSETS[0], 5, 1), (m.METADATA, 5, 1)], "c", 500)

    async def news_on_the_metadata_log() -> m.FetchResponse:
        answer = asyncio.ensure_future(serve_across(ask, lambda topic, index: by_key.get((topic, index))))
        await asyncio.sleep(0)
        assert [p.asked for p in parts] == [["fetch, waiting 0.5 s"]] * 2 and not answer.done()
        meta = parts[1]
        assert meta.parked is not None
        meta.parked.set_result(meta.response(records=True))
        return await answer

    response = run_async(news_on_the_metadata_log())
    assert parts[0].asked == ["fetch, waiting 0.5 s", "completed"]
    assert entries(response) == [(OFFSETS_TOPIC_ID, 0, ErrorCode.none, False), (m.METADATA_TOPIC_ID, 0, ErrorCode.none, True)]


def test_a_quiet_partition_is_answered_without_its_core_and_one_partition_always_parks_the_request():
    busy, quiet = StandInPartition(OFFSETS[0], news=True), StandInPartition(OFFSETS[1], news=False, quiet=True)
    by_key = {(p.where.topic_id, p.where.index): p for p in (busy, quiet)}
    ask = fetch_of([(OFFSETS[1], 5, 1), (OFFSETS[0], 5, 1)], "c", 500)
    response = run_async(serve_across(ask, lambda topic, index: by_key.get((topic, index))))
    assert busy.asked == ["fetch, waiting 0.5 s"] and quiet.asked == ["answered at the end, not stepped"]
    assert entries(response) == [(OFFSETS_TOPIC_ID, 1, ErrorCode.none, False), (OFFSETS_TOPIC_ID, 0, ErrorCode.none, True)]
    assert busy.quietly == [], "records: not a quiet answer"

    # Every partition quiet: the first still goes to its core, to park the request; the other is
    # woken by its news, and then its core answers it at once.
    first, second = (StandInPartition(w, news=False, quiet=True) for w in OFFSETS[:2])
    by_key = {(p.where.topic_id, p.where.index): p for p in (first, second)}

    async def news_on_the_second() -> m.FetchResponse:
        answer = asyncio.ensure_future(serve_across(fetch_of([(OFFSETS[0], 5, 1), (OFFSETS[1], 5, 1)], "c", 500),
                                                    lambda topic, index: by_key.get((topic, index))))
        await asyncio.sleep(0)
        assert first.asked == ["fetch, waiting 0.5 s"] and second.asked == [] and not answer.done()
        second.news().set_result(None)
        return await answer

    response = run_async(news_on_the_second())
    assert first.asked == ["fetch, waiting 0.5 s", "completed"] and second.asked == ["fetch, waiting 0 s"]
    assert first.quietly == [OBSERVER_ID], "answered with nothing new: it may stay out of its core next time"


# ---------------------------------------------------------------- the follower's batching


class RecordingPeers:
    """The network, as the batcher sees it: what was sent, and a way to answer it."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, m.FetchRequest, Callable, Callable]] = []

    def send(self, destination, request, on_response, on_failure, extra_timeout_ms=0):  # noqa: ANN001, ANN201
        self.sent.append((destination, request, on_response, on_failure))

    def named(self, i: int) -> list[tuple[int, int]]:
        """(partition, fetch offset) of each partition the i-th request asks for."""
        return [(p.partition, p.fetch_offset) for t in self.sent[i][1].topics for p in t.partitions]


PARTS = [m.LogPartition(OFFSETS_TOPIC, uuid.UUID(int=7), p) for p in range(4)]


def asked(where: m.LogPartition, offset: int) -> m.FetchRequest:
    return m.fetch_request("c", 4, 3, offset, 3, 0, 500, 1000, where)


def answer(parts: list[tuple[m.LogPartition, int]]) -> m.FetchResponse:
    """A leader's answer: `count` records for each partition (0: none)."""
    built = [(where, m.fetch_partition(where.index, ErrorCode.none, leader_id=1, epoch=3, high_watermark=5,
                                       records=build_batch([SimpleRecord(None, b"r")] * count) if count else None))
             for where, count in parts]
    return m.fetch_response_of([(PARTS[0].topic_id, [p for _, p in built])])


class Cores:
    """Four cores following leader 1: each, answered, asks again at once if it got nothing, or
    after its fsync (`flushed`) if it got records."""

    def __init__(self, batcher: FetchBatcher) -> None:
        self.batcher = batcher
        self.offsets = dict.fromkeys(PARTS, 0)
        self.answers: dict[m.LogPartition, list[m.FetchResponse]] = {w: [] for w in PARTS}
        self.fsyncing: set[m.LogPartition] = set()

    def ask(self, where: m.LogPartition) -> None:
        def answered(response: m.FetchResponse) -> None:
            self.answers[where].append(response)
            p = m.partition_of(response, where)
            if p is not None and p.records:
                self.offsets[where] += 1
                self.fsyncing.add(where)
            else:
                self.ask(where)

        self.batcher.send(1, asked(where, self.offsets[where]), answered, lambda: None)

    def flushed(self, where: m.LogPartition) -> None:
        self.fsyncing.discard(where)
        self.ask(where)


def test_a_follower_asks_for_every_partition_it_follows_on_a_leader_in_one_fetch():
    async def run() -> None:
        peers = RecordingPeers()
        cores = Cores(FetchBatcher(peers))  # type: ignore[arg-type]
        for where in PARTS[:3]:
            cores.ask(where)
        assert peers.sent == []
        await asyncio.sleep(0)  # the end of the turn: one request for the three
        assert peers.named(0) == [(0, 0), (1, 0), (2, 0)]
        assert peers.sent[0][1].max_bytes == 3000, "each partition's bytes, summed"

        # A partition that starts following while that one is parked goes alone at once.
        cores.ask(PARTS[3])
        await asyncio.sleep(0)
        assert peers.named(1) == [(3, 0)]

        # Records for partitions 0 and 2: each core gets its own partition; the next request
        # waits for both to fsync, and partition 1, answered with nothing, is not sent alone.
        peers.sent[0][2](answer([(PARTS[0], 2), (PARTS[1], 0), (PARTS[2], 1)]))
        assert [len(cores.answers[w]) for w in PARTS] == [1, 1, 1, 0]
        assert m.named(cores.answers[PARTS[1]][0]) == (PARTS[1].topic_id, 1)
        await asyncio.sleep(0)
        assert len(peers.sent) == 2
        cores.flushed(PARTS[0])
        await asyncio.sleep(0)
        assert len(peers.sent) == 2, "partition 2 still fsyncs"
        cores.flushed(PARTS[2])
        await asyncio.sleep(0)
        # All of them, partition 3 too: in flight alone, it rides along and is merged.
        assert peers.named(2) == [(3, 0), (1, 0), (0, 1), (2, 1)]

        # Partition 3's lone request is answered first: its core gets that answer, and the
        # combined request's part for it is dropped (one answer for one request).
        peers.sent[1][2](answer([(PARTS[3], 0)]))
        assert len(cores.answers[PARTS[3]]) == 1
        await asyncio.sleep(0)
        assert peers.named(3) == [(3, 0)], "asked again while the combined request is parked: alone"
        peers.sent[2][2](answer([(w, 0) for w in (PARTS[3], PARTS[1], PARTS[0], PARTS[2])]))
        assert [len(cores.answers[w]) for w in PARTS] == [2, 2, 2, 1]
        await asyncio.sleep(0)
        assert peers.named(4) == [(3, 0), (1, 0), (0, 1), (2, 1)]

    asyncio.run(run())


def asked_at(where: m.LogPartition, offset: int, high_watermark: int, wait_ms: int = 500) -> m.FetchRequest:
    return m.fetch_request("c", 4, 3, offset, 3, 0, wait_ms, 1000, where, high_watermark=high_watermark)


def test_a_partition_answered_with_nothing_new_rides_in_the_next_request_without_its_core_hearing():
    async def run() -> None:
        peers = RecordingPeers()
        batcher = FetchBatcher(peers)  # type: ignore[arg-type]
        heard: list[int] = []
        for where in PARTS[:2]:  # both know the leader's high watermark (5)
            batcher.send(1, asked_at(where, 0, 5), lambda r, w=where: heard.append(w.index), lambda: None)
        await asyncio.sleep(0.005)
        peers.sent[0][2](answer([(PARTS[0], 1), (PARTS[1], 0)]))
        assert heard == [0], "partition 1's part repeats what it asked from: its core does not step for it"
        batcher.send(1, asked_at(PARTS[0], 1, 5), lambda r: heard.append(0), lambda: None)  # after its fsync
        await asyncio.sleep(0)
        assert peers.named(1) == [(1, 0), (0, 1)], "partition 1's Fetch goes again as it was"
        assert peers.sent[1][1].max_wait <= timedelta(milliseconds=495), "waiting what is left of its MaxWait"

        # Nothing new anywhere (the leader's wait ran out): every core hears.
        peers.sent[1][2](answer([(PARTS[0], 0), (PARTS[1], 0)]))
        assert heard == [0, 1, 0]

        # A new high watermark is news to a core.
        batcher.send(1, asked_at(PARTS[0], 1, 5), lambda r: heard.append(0), lambda: None)
        batcher.send(1, asked_at(PARTS[1], 0, 4), lambda r: heard.append(1), lambda: None)
        await asyncio.sleep(0)
        peers.sent[2][2](answer([(PARTS[0], 1), (PARTS[1], 0)]))
        assert heard == [0, 1, 0, 0, 1]

        # A Fetch older than half its MaxWait is answered, whatever the answer: its core hears
        # no later than from a Fetch of its own parked that long.
        batcher.send(1, asked_at(PARTS[0], 2, 5), lambda r: heard.append(0), lambda: None)
        batcher.send(1, asked_at(PARTS[1], 0, 5, wait_ms=40), lambda r: heard.append(1), lambda: None)
        await asyncio.sleep(0.02)
        peers.sent[3][2](answer([(PARTS[0], 1), (PARTS[1], 0)]))
        assert heard == [0, 1, 0, 0, 1, 0, 1]

    asyncio.run(run())


def test_a_partition_that_will_not_ask_again_is_waited_for_no_more():
    async def run() -> None:
        peers = RecordingPeers()
        batcher = FetchBatcher(peers)  # type: ignore[arg-type]
        cores = Cores(batcher)
        cores.ask(PARTS[0])
        cores.ask(PARTS[1])
        await asyncio.sleep(0)
        peers.sent[0][2](answer([(PARTS[0], 1), (PARTS[1], 0)]))
        await asyncio.sleep(0.05)
        assert len(peers.sent) == 1, "partition 0 fsyncs what it got: no timer sends the others without it"
        batcher.settle((PARTS[0].topic_id, 0))  # its driver: a step left it neither fsyncing nor asking
        await asyncio.sleep(0)
        assert peers.named(1) == [(1, 0)]
        cores.flushed(PARTS[0])  # it asks after all: the two travel together again, partition 1's riding along
        await asyncio.sleep(0)
        assert peers.named(2) == [(1, 0), (0, 1)]

    asyncio.run(run())


def test_a_failed_combined_request_fails_for_every_core_in_it():
    async def run() -> None:
        peers = RecordingPeers()
        batcher = FetchBatcher(peers)  # type: ignore[arg-type]
        failed: list[int] = []
        for where in PARTS[:2]:
            batcher.send(1, asked(where, 0), lambda r: None, lambda w=where: failed.append(w.index))
        await asyncio.sleep(0)
        peers.sent[0][3]()
        assert failed == [0, 1]

    asyncio.run(run())


# ---------------------------------------------------------------- nodes


def fetched_by_every_voter(port: int, leader_id: int, partitions: list[m.LogPartition], since: float) -> bool:
    """Whether every voter has fetched each partition from `leader_id` since `since` (ms): a
    voter that has not learnt of the leader yet (its BeginQuorumEpoch late on a loaded machine)
    fetches the others alone until it does."""
    for where in partitions:
        p = run_async(request(port, m.describe_quorum_request(where), 10)).topics[0].partitions[0]
        if p.error_code != ErrorCode.none or p.leader_id != leader_id:
            return False
        if any(v.replica_id != leader_id and v.last_fetch_timestamp < since for v in p.current_voters):
            return False
    return True


def test_followers_replicate_every_partition_of_a_leader_in_one_fetch(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0,
                           overrides={**QUIET, "offsets.topic.num.partitions": "3"})
    try:
        cluster.start()
        groups = [next(groups_of(p)) for p in range(3)]
        metadata_leader, coordinators = settled_coordinators(cluster, groups)
        # The metadata leader hands the offsets partitions it leads to the other two voters
        # (leadership_balance.py), so one of them leads two or three.
        assert metadata_leader not in {c.node_id for c in coordinators}
        led = Counter(c.node_id for c in coordinators)
        busiest, partitions = led.most_common(1)[0]
        assert partitions >= 2
        led_there = ([m.METADATA] if metadata_leader == busiest else []) + [
            m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, p) for p, c in enumerate(coordinators) if c.node_id == busiest]
        since = time.time() * 1000
        wait_for(lambda: fetched_by_every_voter(cluster.nodes[busiest].controller_port, busiest, led_there, since),
                 what=f"every voter fetching {len(led_there)} partitions from node {busiest}")

        def served() -> tuple[float, float]:
            """(Fetches the busiest leader served naming one partition, all it served)."""
            samples = scrape(cluster, busiest)
            return (samples.get('kraft_fetch_request_partitions_bucket{le="1.0"}', 0.0),
                    samples.get("kraft_fetch_request_partitions_count", 0.0))

        single_before, every_before = served()
        for _ in range(10):
            for group, coordinator in zip(groups, coordinators, strict=True):
                if coordinator.node_id == busiest:
                    commit(coordinator.port, group, "m")
        single, every = served()
        single, every = single - single_before, every - every_before
        # Its followers asked for its partitions together, not one Fetch each.
        assert every - single > single, f"{single:.0f} of {every:.0f} Fetches named one partition"
    finally:
        cluster.stop()

