"""FetchSnapshot naming several partitions (KIP-630 "Request Handling"), served by a node
whose partitions are each a core of their own: the leader shares the response's bytes
between them (at least the average each when a partition has that much left, the rest to
the others), and a follower asks for every partition it lacks in one request.

The leader's split is tested on a one-voter node in this process, over real TCP; the
follower's batching against a stand-in for the peer connections that records what is sent;
both together in node processes, where a fresh observer catches up all four partitions by
snapshot."""

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kraft.cli.cluster_client import create_topic, metric, request, run_async, scrape
from kraft.cli.local_cluster import LocalCluster
from kraft.groups import OFFSETS_TOPIC, partition_for
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.raft import messages as m
from kraft.server.runtime.fetch_snapshot_batch import FetchSnapshotBatcher
from kraft.server.runtime.node import OFFSETS_TOPIC_ID
from kraft.storage import parse_snapshot_file_name
from kraft.storage.checkpoint import read_offset_checkpoint

from .cluster_helpers import QUIET, wait_for
from .test_listeners import OBSERVER_ID

METADATA = m.METADATA_TOPIC
NOT_YET = (ErrorCode.coordinator_not_available, ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)


def commit(port: int, group: str, metadata: str, deadline_s: float = 60) -> None:
    """A standalone commit (generation -1) of `group`'s offset in `__cluster_metadata-0`,
    retried while its partition has no leader yet."""
    req = build_request(8, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": METADATA, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                       "committed_leader_epoch": -1, "committed_metadata": metadata}]}],
    })
    deadline = time.monotonic() + deadline_s
    while True:
        error = run_async(request(port, req)).topics[0].partitions[0].error_code
        if error == ErrorCode.none:
            return
        assert error in NOT_YET and time.monotonic() < deadline, f"OffsetCommit of {group}: {error.name}"
        time.sleep(0.1)


def groups_of(partition: int, partitions: int = 3):  # noqa: ANN201
    """Group ids whose coordinator is `__consumer_offsets-<partition>`, endlessly."""
    i = 0
    while True:
        i += 1
        if partition_for(f"g{i}", partitions) == partition:
            yield f"g{i}"


def latest_snapshot(directory: Path) -> Path | None:
    found = sorted(directory.glob("*.checkpoint"), key=lambda p: parse_snapshot_file_name(p.name))
    return found[-1] if found else None


def at_rest(directories: list[Path]) -> bool:
    return all(not list(d.glob("*.checkpoint.part")) for d in directories)


def first_come(total: int, wants: list[int]) -> list[int]:
    """What a leader serving partitions in order until the bytes run out would send."""
    shares = []
    for want in wants:
        shares.append(min(want, total))
        total -= shares[-1]
    return shares


def test_the_leader_shares_a_multi_partition_fetch_snapshot_as_kip_630_says(node):
    data = node.partition_dir.parent
    offsets_dirs = {p: data / f"{OFFSETS_TOPIC}-{p}" for p in range(3)}
    # A snapshot in every partition: topics for the metadata one, commits with 1000 bytes of
    # metadata for the groups of each offsets partition, until its snapshot holds 2000 bytes.
    for i in range(200):
        if latest_snapshot(node.partition_dir):
            break
        assert create_topic(node.client_port, f"t{i}", 2).error_code == ErrorCode.none
    for p, directory in offsets_dirs.items():
        groups = groups_of(p)
        while (s := latest_snapshot(directory)) is None or s.stat().st_size < 2000:
            commit(node.client_port, next(groups), "x" * 1000)
    directories = [node.partition_dir, *offsets_dirs.values()]
    wait_for(lambda: at_rest(directories), what="snapshot jobs to finish")

    # Bytes left from the position asked: 1500 in offsets-1 and offsets-0, 100 in the
    # metadata partition, 400 in offsets-2; offsets-7 is no partition of this node's. The
    # request names __consumer_offsets twice, around the metadata partition.
    left = {(OFFSETS_TOPIC, 1): 1500, (OFFSETS_TOPIC, 7): 0, (METADATA, 0): 100, (OFFSETS_TOPIC, 0): 1500,
            (OFFSETS_TOPIC, 2): 400}
    keys = list(left)
    drivers = {(METADATA, 0): node.node.metadata, **{(OFFSETS_TOPIC, p): d for p, d in node.node.offsets.items()}}
    files = {(METADATA, 0): latest_snapshot(node.partition_dir),
             **{(OFFSETS_TOPIC, p): latest_snapshot(d) for p, d in offsets_dirs.items()}}
    content = {key: path.read_bytes() for key, path in files.items()}
    # A file is renamed into place before its store lists it (SNAPSHOT_NOT_FOUND meanwhile).
    wait_for(lambda: all(parse_snapshot_file_name(f.name) in drivers[k].core.snapshots.list() for k, f in files.items()),
             what="every snapshot listed by its store")

    def partition(key: tuple[str, int]) -> dict:
        if key not in files:
            return {"partition": key[1], "current_leader_epoch": 1, "snapshot_id": {"end_offset": 5, "epoch": 1},
                    "position": 0}
        sid = parse_snapshot_file_name(files[key].name)
        return {"partition": key[1], "current_leader_epoch": drivers[key].core.epoch,
                "snapshot_id": {"end_offset": sid.end_offset, "epoch": sid.epoch},
                "position": len(content[key]) - left[key]}

    asked = build_request(59, 0, {"cluster_id": node.node.cluster_id, "replica_id": OBSERVER_ID, "max_bytes": 2000,
                                  "topics": [{"name": name, "partitions": [partition(k) for k in run]}
                                             for name, run in [(OFFSETS_TOPIC, keys[:2]), (METADATA, keys[2:3]),
                                                               (OFFSETS_TOPIC, keys[3:])]]})
    registry = node.node.metrics.registry
    served_before = registry.get_sample_value("kraft_fetch_snapshot_bytes_served_total")

    def sent_for(response) -> list[int]:  # noqa: ANN001
        # One entry per topic, partitions in the request's order; each chunk the snapshot's bytes.
        assert response.error_code == ErrorCode.none
        assert [(t.name, [p.index for p in t.partitions]) for t in response.topics] == [
            (OFFSETS_TOPIC, [1, 7, 0, 2]), (METADATA, [0])]
        answers = {(t.name, p.index): p for t in response.topics for p in t.partitions}
        assert answers[(OFFSETS_TOPIC, 7)].error_code == ErrorCode.unknown_topic_or_partition
        for key in files:
            p, expected = answers[key], content[key]
            assert (p.error_code, p.size, p.position) == (ErrorCode.none, len(expected), len(expected) - left[key])
            chunk = bytes(p.unaligned_records)
            assert chunk == expected[p.position:p.position + len(chunk)]
        return [len(bytes(answers[k].unaligned_records)) for k in keys]

    # 2000 bytes, 400 the average of the four that want some: the metadata partition's 100
    # and offsets-2's 400 are all they have left, and the 1100 the others cannot use go in
    # equal halves to the two with 1500 left. Nothing to the partition answered with an error.
    sent = sent_for(run_async(request(node.controller_port, asked)))
    assert sent == [750, 0, 100, 750, 400]
    assert sent != first_come(2000, [left[k] for k in keys]) == [1500, 0, 100, 400, 0]
    # Each partition's chunk counted once, as it left its core; one request of 5 partitions.
    assert registry.get_sample_value("kraft_fetch_snapshot_bytes_served_total") - served_before == 2000
    assert registry.get_sample_value("kraft_fetch_snapshot_request_partitions_count") == 1
    assert registry.get_sample_value("kraft_fetch_snapshot_request_partitions_bucket", {"le": "4.0"}) == 0

    # replica.fetch.snapshot.max.bytes of 600 for offsets-1: it wants 600, and the rest of
    # what it cannot take goes to offsets-0.
    async def cap_offsets_1() -> None:
        core = drivers[(OFFSETS_TOPIC, 1)].core
        core.config = replace(core.config, snapshot_partition_max_bytes=600)

    node.call(cap_offsets_1())
    sent = sent_for(run_async(request(node.controller_port, asked)))
    assert sent == [600, 0, 100, 900, 400]
    assert sent != first_come(2000, [600, 0, 100, 1500, 400]) == [600, 0, 100, 1300, 0]


# ---------------------------------------------------------------- the follower's batching


class RecordingPeers:
    """The network, as the batcher sees it: what was sent, and a way to answer it."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, m.FetchSnapshotRequest, Callable, Callable]] = []

    def send(self, destination, request, on_response, on_failure, extra_timeout_ms=0):  # noqa: ANN001, ANN201
        self.sent.append((destination, request, on_response, on_failure))

    def named(self, i: int) -> list[tuple[str, int, int]]:
        """(topic, partition, position) of each partition the i-th request asks for."""
        return [(t.name, p.partition, p.position) for t in self.sent[i][1].topics for p in t.partitions]


def wants(where: m.LogPartition, position: int) -> m.FetchSnapshotRequest:
    return m.fetch_snapshot_request("c", 4, 3, (50, 2), position, 1000, where)


def chunk(where: m.LogPartition, position: int, data: bytes) -> tuple[str, list]:
    return where.topic, [m.fetch_snapshot_partition(where.index, ErrorCode.none, (50, 2), leader_id=1, epoch=3,
                                                    size=4000, position=position, records=data)]


OFFSETS = [m.LogPartition(OFFSETS_TOPIC, uuid.UUID(int=7), p) for p in range(3)]


def test_a_follower_asks_for_every_partition_it_lacks_in_one_fetch_snapshot():
    async def run() -> None:
        peers = RecordingPeers()
        batcher = FetchSnapshotBatcher(peers)  # type: ignore[arg-type]
        got: dict[m.LogPartition, list] = {w: [] for w in (m.METADATA, *OFFSETS)}
        failed: list[m.LogPartition] = []

        def ask(where: m.LogPartition, position: int, destination: int = 1) -> None:
            """A core's request; when answered, it asks for the next chunk in the same step."""
            def answered(response: m.FetchSnapshotResponse) -> None:
                got[where].append(response)
                p = m.partition_of(response, where)
                if p is not None:
                    ask(where, p.position + len(p.unaligned_records))

            batcher.send(destination, wants(where, position), answered, lambda: failed.append(where))

        # Three partitions ask their leader in one turn: one request, at the end of the turn.
        ask(m.METADATA, 0)
        ask(OFFSETS[0], 0)
        ask(OFFSETS[2], 0)
        ask(OFFSETS[1], 0, destination=2)  # another leader: a request of its own
        assert peers.sent == []
        await asyncio.sleep(0)
        assert [d for d, *_ in peers.sent] == [1, 2]
        assert peers.named(0) == [(METADATA, 0, 0), (OFFSETS_TOPIC, 0, 0), (OFFSETS_TOPIC, 2, 0)]
        assert (peers.sent[0][1].max_bytes, peers.sent[0][1].replica_id) == (1000, 4)

        # A request that fails fails for its core; the one asking again while a request is in
        # flight to that leader waits for its answer.
        peers.sent[1][3]()
        assert failed == [OFFSETS[1]]
        ask(OFFSETS[1], 0)
        await asyncio.sleep(0)
        assert len(peers.sent) == 2

        # Each core is answered with its own partition only, and the next requests of all four
        # go out as one in the turn of the answer.
        peers.sent[0][2](m.fetch_snapshot_response([
            chunk(m.METADATA, 0, b"m" * 300),
            (OFFSETS_TOPIC, chunk(OFFSETS[0], 0, b"a" * 400)[1] + chunk(OFFSETS[2], 0, b"c" * 300)[1])]))
        for where, data in [(m.METADATA, b"m" * 300), (OFFSETS[0], b"a" * 400), (OFFSETS[2], b"c" * 300)]:
            (response,) = got[where]
            assert m.named(response) == (where.topic, where.index)
            assert bytes(m.partition_of(response, where).unaligned_records) == data
        assert got[OFFSETS[1]] == []
        assert len(peers.sent) == 3
        assert peers.named(2) == [(OFFSETS_TOPIC, 1, 0), (OFFSETS_TOPIC, 0, 400), (OFFSETS_TOPIC, 2, 300),
                                  (METADATA, 0, 300)]

        # A partition the answer leaves out is answered with none (its core backs off).
        peers.sent[2][2](m.fetch_snapshot_response([chunk(OFFSETS[1], 0, b"b" * 10)]))
        assert [len(got[w]) for w in (m.METADATA, *OFFSETS)] == [2, 2, 1, 2]
        assert m.partition_of(got[m.METADATA][1], m.METADATA) is None
        assert peers.named(3) == [(OFFSETS_TOPIC, 1, 10)]

    asyncio.run(run())


def test_a_core_asking_again_replaces_its_waiting_request():
    async def run() -> None:
        peers = RecordingPeers()
        batcher = FetchSnapshotBatcher(peers)  # type: ignore[arg-type]
        answered: list[int] = []
        batcher.send(1, wants(OFFSETS[0], 0), lambda r: answered.append(0), lambda: None)
        await asyncio.sleep(0)
        # In flight; the core's deadline passes and it asks again, twice: only the last goes.
        batcher.send(1, wants(OFFSETS[1], 5), lambda r: answered.append(5), lambda: None)
        batcher.send(1, wants(OFFSETS[1], 9), lambda r: answered.append(9), lambda: None)
        peers.sent[0][3]()
        assert peers.named(1) == [(OFFSETS_TOPIC, 1, 9)]
        peers.sent[1][2](m.fetch_snapshot_response([chunk(OFFSETS[1], 9, b"x")]))
        assert answered == [9]
        await asyncio.sleep(0)
        assert len(peers.sent) == 2  # nothing more waits

    asyncio.run(run())


# ---------------------------------------------------------------- node processes


def log_start(directory: Path, topic: str, index: int) -> int:
    return read_offset_checkpoint(directory / "log-start-offset-checkpoint", topic, index) or 0


def partition_quorum(cluster: LocalCluster, where: m.LogPartition) -> Any:
    """DescribeQuorum of one partition, asked of node 1, its leader."""
    answer = run_async(request(cluster.nodes[1].controller_port, m.describe_quorum_request(where), timeout=5))
    return answer.topics[0].partitions[0]


def image_of(cluster: LocalCluster, node_id: int) -> str | None:
    """The metadata image a node has reached (offset and digest), from its metrics."""
    return next((k for k in scrape(cluster, node_id) if k.startswith("kraft_metadata_image_info{")), None)


def test_a_fresh_observer_fetches_the_snapshots_of_all_partitions_in_shared_requests(tmp_path):
    # One voter, which leads every partition; small snapshots, retention that moves each
    # log's start to its latest snapshot, and chunks small enough to need many rounds.
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=1, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "2000",
        "metadata.snapshot.min.changed_records.ratio": "0",
        "metadata.max.retention.bytes": "1",
        "replica.fetch.response.max.bytes": "1000",
        "replica.fetch.snapshot.max.bytes": "600",
        **QUIET,
    })
    leader, observer = cluster.nodes[1], cluster.nodes[2]
    where = [m.METADATA, *(m.LogPartition(OFFSETS_TOPIC, OFFSETS_TOPIC_ID, p) for p in range(3))]

    def directory(node: Any, w: m.LogPartition) -> Path:
        return node.data_dir / str(w)

    def checkpoint_dir(node: Any, w: m.LogPartition) -> Path:
        return node.data_dir if w == m.METADATA else directory(node, w)

    try:
        cluster.start(1)

        def moving(w: m.LogPartition) -> bool:
            """Retention will move the log start: a second snapshot (the latest is always
            kept, and the start moves up to it)."""
            return (log_start(checkpoint_dir(leader, w), w.topic, w.index) > 0
                    or len(list(directory(leader, w).glob("*.checkpoint"))) >= 2)

        topics = (f"t{i}" for i in range(1000))
        while not moving(m.METADATA):
            assert create_topic(leader.client_port, next(topics), 2).error_code == ErrorCode.none
        for w in where[1:]:
            groups = groups_of(w.index)
            while not moving(w):
                commit(leader.client_port, next(groups), "x" * 1000)
        for w in where:
            wait_for(lambda w=w: log_start(checkpoint_dir(leader, w), w.topic, w.index) > 0, timeout=60,
                     what=f"retention to move the start of {w}")
        wait_for(lambda: at_rest([directory(leader, w) for w in where]), timeout=60, what="snapshot jobs to finish")
        sizes = {w: latest_snapshot(directory(leader, w)).stat().st_size for w in where}  # type: ignore[union-attr]
        assert min(sizes.values()) > 1000, sizes  # more than one response's worth each

        cluster.start(2)

        def caught_up(w: m.LogPartition) -> bool:
            q = partition_quorum(cluster, w)
            return any(o.replica_id == 2 and o.log_end_offset >= q.high_watermark for o in q.observers)

        for w in where:
            wait_for(lambda w=w: caught_up(w), timeout=120, what=f"the observer to catch up {w}")

        # Every partition came by snapshot: the observer holds the leader's, byte for byte.
        for w in where:
            mine, theirs = latest_snapshot(directory(observer, w)), latest_snapshot(directory(leader, w))
            assert mine is not None and theirs is not None and mine.name == theirs.name, w
            assert mine.read_bytes() == theirs.read_bytes(), w
            assert log_start(checkpoint_dir(observer, w), w.topic, w.index) == parse_snapshot_file_name(
                mine.name).end_offset
        text = observer.log_path.read_text()
        assert text.count("loaded snapshot") >= len(where), text[-3000:]
        wait_for(lambda: image_of(cluster, 2) == image_of(cluster, 1), what="the observer's image to match")

        # The leader served FetchSnapshot requests naming several partitions, and the bytes
        # moved are counted once on each side.
        samples = scrape(cluster, 1)
        counts = {k: v for k, v in samples.items() if k.startswith("kraft_fetch_snapshot_request_partitions")}
        requests = samples["kraft_fetch_snapshot_request_partitions_count"]
        assert requests - samples['kraft_fetch_snapshot_request_partitions_bucket{le="1.0"}'] > 0, counts
        total = sum(sizes.values())
        assert samples["kraft_fetch_snapshot_bytes_served_total"] >= total
        assert metric(cluster, 2, "kraft_fetch_snapshot_bytes_fetched_total") >= total
    finally:
        cluster.stop()
