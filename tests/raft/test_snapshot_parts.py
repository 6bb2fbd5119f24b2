"""The snapshot catalogue (what a replica holds, which snapshot a fetcher needs) and both
ends of FetchSnapshot (snapshot_fetch.py): serving shared chunks, and a download that
starts over on anything unexpected."""

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import RaftConfig
from kraft.raft import messages as m
from kraft.raft.epochs import fence
from kraft.raft.snapshot_catalog import SnapshotCatalog
from kraft.raft.snapshot_fetch import DownloadFailed, SnapshotDownload, serve
from kraft.raft.snapshot_metrics import SnapshotMetrics
from kraft.storage import MemorySnapshotStore, SnapshotId


def store_with(*ids, values=(b"x" * 300,)):
    store = MemorySnapshotStore()
    for sid in ids:
        writer = store.create_writer(sid, 1_000 + sid.end_offset)
        writer.append([(None, v) for v in values])
        writer.freeze()
    return store


def test_the_catalog_sees_snapshots_come_and_go_and_feeds_the_metrics():
    store = store_with(SnapshotId(10, 1))
    ticks = iter([1.0, 1.25])
    metrics = SnapshotMetrics(clock=lambda: next(ticks))
    catalog = SnapshotCatalog(store, metrics)
    catalog.observe(high_watermark=15)
    assert catalog.timestamps == {SnapshotId(10, 1): 1_010}
    assert metrics.lag._value.get() == 5 and metrics.size_bytes._value.get() == catalog.sizes[SnapshotId(10, 1)]
    catalog.creating(SnapshotId(20, 1))
    store_with_20 = store.create_writer(SnapshotId(20, 1), 0)
    store_with_20.append([(None, b"y")])
    store_with_20.freeze()
    catalog.observe(high_watermark=25)
    assert metrics.gen_latency_ms._sum.get() == 250.0, "from create_snapshot() to the freeze"
    store.delete_before(20)
    catalog.observe(high_watermark=25)
    assert list(catalog.sizes) == [SnapshotId(20, 1)] and catalog.reader(SnapshotId(10, 1)) is None


@pytest.mark.parametrize("offset, last_epoch, expected", [
    (0, 0, SnapshotId(30, 3)),     # from nothing: the snapshot is the faster way in
    (15, 1, SnapshotId(30, 3)),    # below the log start
    (20, 1, SnapshotId(30, 3)),    # at the log start with another epoch than the earliest snapshot's
    (20, 2, None),                 # at the log start, in its history
    (25, 2, None),
    (25, 1, SnapshotId(30, 3)),    # an epoch older than the earliest snapshot's
])
def test_which_snapshot_a_fetcher_needs(offset, last_epoch, expected):
    catalog = SnapshotCatalog(store_with(SnapshotId(20, 2), SnapshotId(30, 3)), None)
    assert catalog.for_fetcher(offset, last_epoch, log_start=20) == expected


def test_the_empty_bootstrap_snapshot_is_never_sent():
    catalog = SnapshotCatalog(store_with(SnapshotId(0, 0)), None)
    assert catalog.for_fetcher(0, 0, log_start=0) is None


def fetch_snapshot(sid, position, epoch=1, max_bytes=1 << 20, partition=0):
    request = m.fetch_snapshot_request("c", 2, epoch, (sid.end_offset, sid.epoch), position, max_bytes)
    if partition:
        topic = request.topics[0]
        part = topic.partitions[0]
        other = type(part)(partition=partition, current_leader_epoch=epoch, snapshot_id=part.snapshot_id,
                           position=position)
        request = type(request)(cluster_id="c", replica_id=2, max_bytes=max_bytes,
                                topics=(type(topic)(name=topic.name, partitions=(part, other)),))
    return request


def serve_one(request, store, leading=True, epoch=1):
    config = RaftConfig(node_id=1, voters=(1, 2, 3), cluster_id="c", snapshot_response_max_bytes=1 << 20)

    def fencing(requested):
        return fence(requested, epoch, leading)

    catalog = SnapshotCatalog(store, None)
    return serve(request, fencing, catalog, config, leader_id=1, epoch=epoch)


def test_serving_checks_each_partition_and_shares_the_bytes():
    sid = SnapshotId(10, 1)
    store = store_with(sid)
    size = store.open_reader(sid).size
    response, served = serve_one(fetch_snapshot(sid, 0, max_bytes=100), store)
    (part,) = response.topics[0].partitions
    assert served and part.error_code == ErrorCode.none and (part.size, part.position) == (size, 0)
    assert len(bytes(part.unaligned_records)) == 100
    for request, error in [
        (fetch_snapshot(SnapshotId(11, 1), 0), ErrorCode.snapshot_not_found),
        (fetch_snapshot(sid, size + 1), ErrorCode.position_out_of_range),
        (fetch_snapshot(sid, 0, epoch=0), ErrorCode.fenced_leader_epoch),
    ]:
        response, served = serve_one(request, store)
        assert not served and response.topics[0].partitions[0].error_code == error
    response, served = serve_one(fetch_snapshot(sid, 0, partition=1), store)
    assert [p.error_code for p in response.topics[0].partitions] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]


def chunk(sid, position, data, size, error=ErrorCode.none):
    return m.fetch_snapshot_partition(0, error, (sid.end_offset, sid.epoch), leader_id=1, epoch=1, size=size,
                                      position=position, records=data)


def test_a_download_takes_chunks_in_order_and_freezes_a_valid_snapshot():
    sid = SnapshotId(10, 1)
    source = store_with(sid).open_reader(sid)
    data = bytes(source.read_chunk(0, source.size))
    target = MemorySnapshotStore()
    download = SnapshotDownload.start(target, sid, node_id=2, leader_id=1)
    half = len(data) // 2
    assert download.check_answer(chunk(sid, 0, data[:half], len(data)))
    assert not download.accept(chunk(sid, 0, data[:half], len(data)))
    assert not download.accept(chunk(sid, 0, data[:half], len(data))), "a repeated chunk is skipped"
    assert download.request("c", 1, 1 << 20).topics[0].partitions[0].position == half
    assert download.accept(chunk(sid, half, data[half:], len(data)))
    assert target.list() == [sid]


@pytest.mark.parametrize("answer, why", [
    (lambda sid, data: chunk(sid, 0, b"", 0, ErrorCode.snapshot_not_found), "snapshot_not_found"),
    (lambda sid, data: chunk(SnapshotId(11, 1), 0, data, len(data)), "asking it again"),
])
def test_a_download_starts_over_when_the_leader_no_longer_serves_it(answer, why):
    sid = SnapshotId(10, 1)
    data = b"z" * 50
    download = SnapshotDownload.start(MemorySnapshotStore(), sid, node_id=2, leader_id=1)
    with pytest.raises(DownloadFailed, match=why):
        download.check_answer(answer(sid, data))
    assert not download.check_answer(chunk(sid, 0, b"", 0, ErrorCode.unknown_server_error)), "retried, kept"


def test_a_download_that_does_not_validate_starts_over():
    sid = SnapshotId(10, 1)
    source = store_with(sid).open_reader(sid)
    data = bytearray(source.read_chunk(0, source.size))
    data[-3] ^= 0xFF
    download = SnapshotDownload.start(MemorySnapshotStore(), sid, node_id=2, leader_id=1)
    with pytest.raises(DownloadFailed, match="did not validate"):
        download.accept(chunk(sid, 0, bytes(data), len(data)))
    with pytest.raises(DownloadFailed, match="received"):
        SnapshotDownload.start(MemorySnapshotStore(), sid, 2, 1).accept(chunk(sid, 0, b"q" * 20, 10))
