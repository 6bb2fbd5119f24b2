"""KIP-630 in the core, one rule per test: creating snapshots, Fetch answering SnapshotId,
FetchSnapshot on both sides, elections, the log start offset, retention, metrics."""

import threading
from dataclasses import replace

import pytest

from kraft.protocol import ErrorCode
from kraft.raft import Role
from kraft.raft import messages as m
from kraft.raft.snapshot_metrics import SnapshotMetrics
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage import ElectionState, FileLog, FileSnapshotStore, SnapshotError, SnapshotId

from .conftest import Node, Send, elect, follower_batch, leader_node, leader_of_epoch_2, partition, records


def fetch(epoch=1, offset=0, last_epoch=0, replica=2, wait=0):
    return m.fetch_request("c", replica, epoch, offset, last_epoch, 0, wait, 1 << 20)


def committed_leader(batches=4, **config):
    """Leader of epoch 1: LeaderChange at 0, then `batches` batches of 2 records, all committed."""
    leader = leader_node(**config)
    for i in range(batches):
        leader.core.append(records(2, b"b%d-" % i), leader.now)
        leader.advance(0)
    leader.flush()
    leader.request(fetch(offset=leader.log.end_offset, last_epoch=1, replica=2))
    assert leader.core.high_watermark == leader.log.end_offset == 1 + 2 * batches
    return leader


def take_snapshot(node, end, values=(b"state",)):
    """The state machine snapshots offsets below `end`, just committed (so as of now)."""
    writer = node.core.create_snapshot(node.core.snapshot_id_at(end), node.now)
    writer.append([(None, v) for v in values])
    sid = writer.freeze()
    node.advance(0)  # the core notices it
    return sid


# ---------------------------------------------------------------- 1. the state machine side


def test_create_snapshot_is_refused_unless_it_is_a_committed_prefix_of_this_log():
    leader = committed_leader()
    with pytest.raises(SnapshotError, match="high watermark"):
        leader.core.create_snapshot(SnapshotId(10, 1), 0)
    with pytest.raises(SnapshotError, match="epoch at offset 4 is 1"):
        leader.core.create_snapshot(SnapshotId(5, 3), 0)
    with pytest.raises(SnapshotError, match="inside a batch"):
        leader.core.create_snapshot(SnapshotId(4, 1), 0)
    with pytest.raises(SnapshotError, match="at least one record"):
        leader.core.create_snapshot(SnapshotId(0, 0), 0)
    assert take_snapshot(leader, 5) == SnapshotId(5, 1)
    leader.core.log_start.move_to(SnapshotId(5, 1), "test")
    with pytest.raises(SnapshotError, match="log starts at 5"):
        leader.core.create_snapshot(SnapshotId(3, 1), 0)


def test_the_latest_snapshot_is_loaded_at_boot_and_commits_resume_after_it():
    node = committed_leader()
    take_snapshot(node, 3, (b"old",))
    take_snapshot(node, 7, (b"new",))
    node.listener.loaded.clear()
    node.restart()
    assert node.listener.loaded == [(SnapshotId(7, 1), [b"new"])]
    assert node.core.applied_offset == 7


# ---------------------------------------------------------------- 2. Fetch answers SnapshotId


def snapshotted_leader_of_epoch_2():
    """Leader of epoch 2; offsets 0..8 of epoch 1, 9 (its LeaderChange) and 10..11 of epoch
    2, all committed; snapshots (5, 1) and (12, 2); the log starts at 5."""
    leader = leader_of_epoch_2()
    leader.core.append(records(2), leader.now)
    leader.advance(0)
    leader.flush()
    leader.request(fetch(epoch=2, offset=12, last_epoch=2, replica=2))
    assert leader.core.high_watermark == 12
    take_snapshot(leader, 5)
    take_snapshot(leader, 12)
    leader.core.log_start.move_to(SnapshotId(5, 1), "test")
    return leader


def assert_snapshot_answer(p, latest=(12, 2)):
    assert p is not None, "answered at once, never parked"
    assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == latest
    assert p.records is None and p.diverging_epoch.end_offset == -1


# Each case meets exactly one of KIP-630's conditions, so each fails if that one is lost.
@pytest.mark.parametrize(
    "offset,last_epoch",
    [
        pytest.param(3, 1, id="below the log start offset"),
        pytest.param(5, 2, id="at the log start offset with an epoch other than the earliest snapshot's"),
        pytest.param(8, 0, id="last fetched epoch below the earliest snapshot's"),
    ],
)
def test_fetch_answers_the_latest_snapshot(offset, last_epoch):
    leader = snapshotted_leader_of_epoch_2()
    p = partition(leader.request(fetch(epoch=2, offset=offset, last_epoch=last_epoch, wait=500)))
    assert_snapshot_answer(p)
    assert p.log_start_offset == 5


def test_a_fetch_from_offset_0_gets_the_snapshot_even_while_the_log_starts_at_0():
    leader = committed_leader()
    take_snapshot(leader, 5)
    assert leader.log.start_offset == 0
    p = partition(leader.request(fetch(offset=0, last_epoch=1)))
    assert_snapshot_answer(p, latest=(5, 1))


def test_a_snapshot_answer_at_the_log_end_is_not_parked():
    """A fetch at the log end waits for records; one that needs the snapshot does not."""
    leader = snapshotted_leader_of_epoch_2()
    assert leader.request(fetch(epoch=2, offset=12, last_epoch=2, replica=7, wait=500)) is None, "parked"
    p = partition(leader.request(fetch(epoch=2, offset=12, last_epoch=0, replica=8, wait=500)))
    assert_snapshot_answer(p)


def test_the_empty_snapshot_0_0_is_never_sent_to_a_fetcher():
    """A fetcher at offset 0 sent to it would load it and fetch from 0 again, forever."""
    leader = committed_leader()
    writer = leader.snapshots.create_writer(SnapshotId(0, 0), 0)  # a bootstrap snapshot, as on disk
    writer.freeze()
    leader.advance(0)
    p = partition(leader.request(fetch(offset=0, last_epoch=0)))
    assert p.snapshot_id.end_offset == -1 and p.records, "the log from offset 0 instead"


def test_a_fetch_at_the_log_start_with_the_snapshots_epoch_reads_the_log():
    leader = committed_leader()
    take_snapshot(leader, 5)
    leader.core.log_start.move_to(SnapshotId(5, 1), "test")
    p = partition(leader.request(fetch(offset=5, last_epoch=1)))
    assert p.snapshot_id.end_offset == -1 and p.records


# ---------------------------------------------------------------- 3. FetchSnapshot, leader side


def fetch_snapshot(sid=(7, 1), position=0, epoch=1, max_bytes=1 << 20, topic=m.METADATA_TOPIC, partition_index=0):
    request = m.fetch_snapshot_request("c", 2, epoch, sid, position, max_bytes)
    topic_entry = request.topics[0]
    p = replace(topic_entry.partitions[0], partition=partition_index)
    return replace(request, topics=(replace(topic_entry, name=topic, partitions=(p,)),))


def snapshot_leader():
    leader = committed_leader()
    take_snapshot(leader, 7, [b"x" * 100] * 50)
    return leader, leader.snapshots.open_reader(SnapshotId(7, 1))


def test_fetch_snapshot_sends_bytes_from_the_position_with_the_size():
    leader, reader = snapshot_leader()
    p = leader.request(fetch_snapshot(position=100, max_bytes=1000)).topics[0].partitions[0]
    assert (p.error_code, p.size, p.position) == (ErrorCode.none, reader.size, 100)
    assert bytes(p.unaligned_records) == bytes(reader.read_chunk(100, 1000))


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"sid": (6, 1)}, ErrorCode.snapshot_not_found),
        ({"position": 10**9}, ErrorCode.position_out_of_range),
        ({"epoch": 0}, ErrorCode.fenced_leader_epoch),
        ({"epoch": 2}, ErrorCode.unknown_leader_epoch),
        ({"topic": "other"}, ErrorCode.unknown_topic_or_partition),
        ({"partition_index": 3}, ErrorCode.unknown_topic_or_partition),
    ],
)
def test_fetch_snapshot_errors(kwargs, error):
    leader, _ = snapshot_leader()
    response = leader.request(fetch_snapshot(**kwargs))
    assert response.topics[0].partitions[0].error_code == error


def test_fetch_snapshot_on_a_follower_is_not_leader():
    follower = Node(2, state=ElectionState(1, 1, None, (1, 2, 3)))
    response = follower.request(fetch_snapshot())
    p = response.topics[0].partitions[0]
    assert p.error_code == ErrorCode.not_leader_or_follower and p.current_leader.leader_id == 1


def test_fetch_snapshot_bytes_are_capped_by_request_config_and_partition():
    leader, reader = snapshot_leader()
    assert reader.size > 3000
    sizes = {}
    for name, max_bytes, config in [("request", 1000, {}), ("response config", 1 << 20, {"snapshot_response_max_bytes": 700}),
                                     ("partition config", 1 << 20, {"snapshot_partition_max_bytes": 500})]:
        leader.core.config = replace(leader.core.config, **config)
        p = leader.request(fetch_snapshot(max_bytes=max_bytes)).topics[0].partitions[0]
        sizes[name] = len(bytes(p.unaligned_records))
    assert sizes == {"request": 1000, "response config": 700, "partition config": 500}


def test_bytes_are_shared_fairly_between_partitions():
    # (a) each gets at least the average if it has that much left;
    assert m.share_bytes(300, [500, 500, 500]) == [100, 100, 100]
    # (b) what one cannot use goes to the others.
    assert m.share_bytes(300, [20, 500, 500]) == [20, 140, 140]
    assert m.share_bytes(300, [20, 30, 500]) == [20, 30, 250]
    assert m.share_bytes(300, [0, 0, 0]) == [0, 0, 0]
    assert sum(m.share_bytes(301, [500, 500, 500])) == 301


def test_fetch_snapshot_from_a_voter_counts_toward_check_quorum():
    leader, _ = snapshot_leader()
    for _ in range(4):
        leader.advance(leader.config.fetch_timeout_ms // 2)
        leader.request(fetch_snapshot())
    assert leader.core.role == Role.LEADER
    leader.advance(leader.config.fetch_timeout_ms * 3 // 2)
    assert leader.core.role == Role.RESIGNED


def test_a_fetch_snapshot_answered_with_an_error_does_not_count_toward_check_quorum():
    leader, _ = snapshot_leader()
    for _ in range(4):
        leader.advance(leader.config.fetch_timeout_ms // 2 - 1)
        if leader.core.role != Role.LEADER:
            break
        p = leader.request(fetch_snapshot(sid=(6, 1))).topics[0].partitions[0]
        assert p.error_code == ErrorCode.snapshot_not_found
    assert leader.core.role == Role.RESIGNED


def test_a_fetch_answered_with_the_snapshot_id_counts_toward_check_quorum():
    leader, _ = snapshot_leader()
    for _ in range(4):
        leader.advance(leader.config.fetch_timeout_ms // 2)
        assert partition(leader.request(fetch(offset=0, last_epoch=0))).snapshot_id.end_offset == 7
    assert leader.core.role == Role.LEADER


# ---------------------------------------------------------------- 4. the follower's download


def follower_of(leader_id=1, epoch=1, **kw):
    return Node(2, state=ElectionState(epoch, leader_id, None, (1, 2, 3)), **kw)


def answer(node, response):
    (send,) = [o for o in node.outbox() if isinstance(o, Send)]
    node.core.handle_response(send.request_id, response, node.now)
    return send.request


def test_a_follower_downloads_validates_freezes_truncates_and_loads():
    leader, reader = snapshot_leader()
    follower = follower_of()
    follower.log.append_as_follower(follower_batch(2, 1, 0))  # an old log, soon replaced
    follower.advance(1)
    request = answer(follower, leader.request(fetch(offset=2, last_epoch=0)))
    assert isinstance(request, m.FetchRequest)
    chunks = 0
    while follower.core.state.download is not None or chunks == 0:
        follower.advance(0)
        sends = follower.sends()
        (send,) = sends
        assert isinstance(send.request, m.FetchSnapshotRequest)
        assert partition(send.request).position == (follower.core.state.download.writer.size if follower.core.state.download else 0)
        response = leader.request(replace(send.request, max_bytes=1000))
        follower.core.handle_response(send.request_id, response, follower.now)
        chunks += 1
    assert chunks >= 4
    assert follower.snapshots.list() == [SnapshotId(7, 1)]
    assert (follower.log.start_offset, follower.log.end_offset) == (7, 7)
    assert follower.listener.loaded == [(SnapshotId(7, 1), [b"x" * 100] * 50)]
    follower.advance(0)
    (send,) = follower.sends(m.FetchRequest)
    p = partition(send.request)
    assert (p.fetch_offset, p.last_fetched_epoch) == (7, 1), "resumes at the snapshot's end and epoch"


@pytest.mark.parametrize("error", [ErrorCode.snapshot_not_found, ErrorCode.position_out_of_range,
                                   ErrorCode.not_leader_or_follower])
def test_a_download_that_the_leader_refuses_is_dropped_and_rediscovered(error):
    follower = follower_of()
    follower.advance(1)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, snapshot_id=(7, 1)))
    follower.advance(0)
    refusal = m.fetch_snapshot_response(
        [(m.METADATA_TOPIC, [m.fetch_snapshot_partition(0, error, (7, 1), leader_id=1, epoch=1)])]
    )
    answer(follower, refusal)
    assert follower.core.state.download is None and follower.snapshots.list() == []
    follower.advance(follower.config.retry_backoff_ms)
    (send,) = follower.sends()
    assert isinstance(send.request, m.FetchRequest)


def download(follower, leader, chunk=1000):
    """Serves the follower's requests from the leader until it has loaded a snapshot;
    returns the positions its FetchSnapshot requests asked for."""
    positions = []
    while not follower.listener.loaded:
        follower.advance(1)
        for send in follower.sends():
            if isinstance(send.request, m.FetchSnapshotRequest):
                positions.append(partition(send.request).position)
                response = leader.request(replace(send.request, max_bytes=chunk))
            else:
                response = leader.request(send.request)
            follower.core.handle_response(send.request_id, response, follower.now)
        assert len(positions) < 100, "the download does not progress"
    return positions


def test_a_restart_in_the_middle_of_a_download_starts_over_cleanly_and_finishes(tmp_path):
    leader, reader = snapshot_leader()
    directory = tmp_path / "__cluster_metadata-0"
    follower = follower_of(log=FileLog(directory), snapshots=FileSnapshotStore(directory))
    follower.advance(1)
    answer(follower, leader.request(fetch(offset=0)))
    follower.advance(0)
    (send,) = follower.sends()
    follower.core.handle_response(send.request_id, leader.request(replace(send.request, max_bytes=500)), follower.now)
    assert follower.core.state.download.writer.size == 500 and list(directory.glob("*.part")), "half downloaded"
    # kill -9: the process is gone; the directory is opened again by a new core.
    follower.log = FileLog(directory)
    follower.snapshots = FileSnapshotStore(directory)
    assert not list(directory.glob("*.part")) and follower.snapshots.list() == []
    follower.restart()
    positions = download(follower, leader)
    assert positions[0] == 0 and positions == sorted(positions), "from the start, in order"
    assert follower.snapshots.list() == [SnapshotId(7, 1)]
    assert (follower.log.start_offset, follower.log.end_offset) == (7, 7)
    assert follower.listener.loaded == [(SnapshotId(7, 1), [b"x" * 100] * 50)]
    assert not list(directory.glob("*.part"))


def test_a_snapshot_named_below_the_high_watermark_keeps_the_committed_log():
    """The leader names a snapshot this follower holds, ending before its high watermark: the
    log past it is committed and stays (Kafka's follower truncates only to a snapshot past
    its log end); installing it would drop committed records and append them again below
    the high watermark."""
    follower = follower_of()
    for base, n in ((0, 3), (3, 2), (5, 4)):
        follower.log.append_as_follower(follower_batch(n, 1, base))
    follower.log.flush()
    follower.advance(1)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9))
    assert follower.core.applied_offset == 9
    take_snapshot(follower, 5)
    follower.listener.batches.clear()
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9, snapshot_id=(5, 1)))
    assert follower.listener.loaded == []
    assert follower.core.applied_offset == 9 and follower.log.end_offset == 9
    assert follower.core.high_watermark == 9
    follower.advance(1)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=10,
                                      records=follower_batch(1, 1, 9)))
    assert [(b.base_offset, b.last_offset) for b in follower.listener.batches] == [(9, 9)]


# ---------------------------------------------------------------- 5. elections


def test_a_vote_request_carries_the_snapshot_when_it_is_newer_than_the_log():
    node = Node(1, state=ElectionState(3, None, None, (1, 2, 3)))
    writer = node.snapshots.create_writer(SnapshotId(40, 2), 0)
    writer.append([(None, b"s")])
    writer.freeze()
    node.restart()  # validation at open: the log restarts at the snapshot's end
    assert (node.log.start_offset, node.log.end_offset) == (40, 40)
    node.advance(3000)
    votes = node.sends(m.VoteRequest)
    p = partition(votes[0].request)
    assert (p.last_offset_epoch, p.last_offset) == (2, 40)


def test_votes_are_granted_against_the_snapshot_when_the_log_is_empty():
    node = Node(1, state=ElectionState(3, None, None, (1, 2, 3)))
    writer = node.snapshots.create_writer(SnapshotId(40, 2), 0)
    writer.append([(None, b"s")])
    writer.freeze()
    node.restart()
    older = m.vote_request("c", 4, 2, 1, 100)
    assert not partition(node.request(older)).vote_granted
    newer = m.vote_request("c", 5, 3, 2, 40)
    assert partition(node.request(newer)).vote_granted


# ---------------------------------------------------------------- 6. log start offset and deletion


# Retention asks for a move (at 0 bytes every snapshot but the latest breaches it); the
# leader then waits for the replicas that still need the records it would remove.
RETAIN_NOTHING = {"cleanup_interval_ms": 1, "max_retention_bytes": 0, "max_retention_ms": -1}


def test_the_start_does_not_move_just_because_every_replica_has_a_snapshot():
    """Readers (consumers, Spark streams) are not replicas: the log keeps their history until
    retention says otherwise, as Kafka's does."""
    leader = committed_leader(cleanup_interval_ms=1)
    leader.request(fetch(offset=9, last_epoch=1, replica=3))
    for end in (5, 7):
        take_snapshot(leader, end)
    leader.advance(1000)
    assert leader.log.start_offset == 0 and leader.snapshots.list() == [SnapshotId(5, 1), SnapshotId(7, 1)]


def test_the_leader_waits_for_every_live_replica_before_retention_moves_the_start():
    leader = committed_leader(**RETAIN_NOTHING)
    leader.request(fetch(offset=3, last_epoch=1, replica=3))  # voter 3 is behind, at 3
    for end in (5, 7):
        take_snapshot(leader, end)
    leader.advance(1)
    assert leader.log.start_offset == 0, "voter 3 is live and lacks offsets 3..6"
    leader.request(fetch(offset=6, last_epoch=1, replica=3))
    leader.advance(1)
    assert leader.log.start_offset == 5, "as far as every live replica has replicated"
    leader.request(fetch(offset=9, last_epoch=1, replica=3))
    leader.advance(1)
    assert leader.log.start_offset == 7 and leader.snapshots.list() == [SnapshotId(7, 1)]


def test_a_dead_replica_does_not_hold_the_start_back():
    leader = committed_leader(**RETAIN_NOTHING, fetch_timeout_ms=200)
    leader.request(fetch(offset=3, last_epoch=1, replica=4))  # an observer at 3
    for end in (5, 7):
        take_snapshot(leader, end)
    leader.advance(1)
    assert leader.log.start_offset == 0
    for _ in range(3):  # voters 2 and 3 keep fetching; observer 4 goes quiet
        leader.advance(100)
        leader.request(fetch(offset=9, last_epoch=1, replica=2))
        leader.request(fetch(offset=9, last_epoch=1, replica=3))
    assert leader.log.start_offset == 7


def test_the_wait_for_replicas_ends_after_the_lag_time():
    """Voter 3 lags and is live, but offset 7 has waited metadata.start.offset.lag.time.max.ms
    since the record before it was appended (the snapshot's last contained log time)."""
    leader = committed_leader(**RETAIN_NOTHING, start_offset_lag_time_max_ms=1000)
    leader.request(fetch(offset=3, last_epoch=1, replica=3))
    for end in (5, 7):
        take_snapshot(leader, end)
    leader.advance(999)
    leader.request(fetch(offset=3, last_epoch=1, replica=3))
    assert leader.log.start_offset == 0
    leader.advance(1)
    assert leader.log.start_offset == 7


def test_the_lag_time_is_counted_from_the_snapshot_so_a_restart_does_not_restart_it():
    leader = committed_leader(**RETAIN_NOTHING, start_offset_lag_time_max_ms=10_000)
    leader.request(fetch(offset=3, last_epoch=1, replica=3))  # voter 3 lags
    written = leader.now
    for end in (5, 7):
        take_snapshot(leader, end)
    leader.advance(1500)
    leader.restart()  # resigned: it cannot lead its old epoch again
    elect(leader)
    assert leader.core.epoch == 2

    def voters_fetch():
        end = leader.log.end_offset
        leader.request(fetch(epoch=2, offset=end, last_epoch=2, replica=2))
        leader.request(fetch(epoch=2, offset=3, last_epoch=1, replica=3))  # still lagging, still live

    voters_fetch()
    assert leader.core.high_watermark == leader.log.end_offset
    while leader.now < written + 9_999:
        leader.advance(min(500, written + 9_999 - leader.now))
        voters_fetch()
    assert leader.core.role == Role.LEADER and leader.log.start_offset == 0
    leader.advance(1)
    assert leader.log.start_offset == 7, "10 s after the snapshot's records, not 10 s after the restart"


def test_snapshots_below_the_start_are_deleted():
    leader = committed_leader(**RETAIN_NOTHING)
    leader.request(fetch(offset=9, last_epoch=1, replica=3))
    for end in (3, 5, 7):
        take_snapshot(leader, end)
    leader.advance(1)
    assert leader.log.start_offset == 7 and leader.snapshots.list() == [SnapshotId(7, 1)]


def follower_with_nine_records(**config):
    """A follower holding offsets 0-8 in four epoch-1 batches, all committed (the leader
    says high watermark 9, log start 0)."""
    follower = follower_of(**config)
    for base, n in ((0, 3), (3, 2), (5, 2), (7, 2)):
        follower.log.append_as_follower(follower_batch(n, 1, base))
    follower.log.flush()
    follower.advance(1)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9, log_start_offset=0))
    return follower


def test_followers_follow_the_leaders_start_with_a_local_snapshot_at_or_below_it():
    follower = follower_with_nine_records(cleanup_interval_ms=1)
    for end in (3, 7):
        take_snapshot(follower, end)
    follower.advance(1)
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9, log_start_offset=6))
    follower.advance(1)
    assert follower.log.start_offset == 3, "the leader starts at 6: the largest local snapshot not past it is 3"
    answer(follower, m.fetch_response(ErrorCode.none, leader_id=1, epoch=1, high_watermark=9, log_start_offset=9))
    follower.advance(1)
    assert follower.log.start_offset == 7 and follower.snapshots.list() == [SnapshotId(7, 1)]


def test_retention_by_bytes_always_keeps_the_latest_snapshot():
    leader = committed_leader(cleanup_interval_ms=1, max_retention_bytes=1, max_retention_ms=-1,
                              start_offset_lag_time_max_ms=10**9)
    leader.request(fetch(offset=9, last_epoch=1, replica=3))
    for end in (3, 5, 7):
        take_snapshot(leader, end)
    leader.advance(1)
    assert leader.snapshots.list() == [SnapshotId(7, 1)] and leader.log.start_offset == 7


def test_retention_by_time_always_keeps_the_latest_snapshot():
    leader = committed_leader(cleanup_interval_ms=1, max_retention_bytes=-1, max_retention_ms=1000,
                              start_offset_lag_time_max_ms=10**9)
    leader.request(fetch(offset=9, last_epoch=1, replica=3))
    for end in (3, 5):
        take_snapshot(leader, end)
    leader.advance(1000)
    assert leader.log.start_offset == 0, "not older than 1000 ms yet"
    leader.advance(1)
    assert leader.snapshots.list() == [SnapshotId(5, 1)] and leader.log.start_offset == 5


def test_retention_cleans_followers_too():
    """Kafka cleans in every replica's poll loop: a follower whose leader keeps its whole log
    still drops what retention allows."""
    follower = follower_with_nine_records(cleanup_interval_ms=1, max_retention_bytes=1)
    for end in (3, 7):
        take_snapshot(follower, end)
    follower.advance(1)
    assert follower.log.start_offset == 7 and follower.snapshots.list() == [SnapshotId(7, 1)]


# ---------------------------------------------------------------- 7. when to snapshot


def test_policy_needs_bytes_and_ratio_or_time_and_resets_for_any_reason():
    from kraft.raft import CommittedBatch

    policy = SnapshotPolicy(max_bytes_between=1000, min_changed_ratio=0.5, max_interval_ms=60_000)
    batch = CommittedBatch(0, 9, 1, append_timestamp=5_000, size_in_bytes=600, records=[])
    policy.record_commit(batch)
    assert policy.due(10_000, changed_ratio=0.9) is None, "600 bytes < 1000"
    policy.record_commit(batch)
    assert policy.due(10_000, changed_ratio=0.4) is None, "bytes, but the ratio is short"
    assert "bytes" in policy.due(10_000, changed_ratio=0.5)
    assert "ms old" in policy.due(65_000, changed_ratio=0.0), "time alone is enough"
    policy.reset()
    assert policy.due(10**9, changed_ratio=1.0) is None
    disabled = SnapshotPolicy(max_interval_ms=0)
    disabled.record_commit(batch)
    assert disabled.due(10**12, 0.0) is None
    with pytest.raises(ValueError, match="ratio"):
        SnapshotPolicy(min_changed_ratio=1.5)


# ---------------------------------------------------------------- 8. never stop the leader


def test_commits_keep_flowing_while_a_large_snapshot_is_written(tmp_path):
    directory = tmp_path / "__cluster_metadata-0"
    leader = Node(1, voters=(1,), log=FileLog(directory), snapshots=FileSnapshotStore(directory))
    leader.advance(2000)
    leader.flush()
    leader.core.append(records(1), leader.now)
    leader.advance(0)
    leader.flush()
    writer = leader.core.create_snapshot(leader.core.snapshot_id_at(leader.log.end_offset), 0)
    started, committed = threading.Event(), threading.Event()
    chunks = [0]

    def write_big_snapshot():
        # Writes on until the leader has committed, and at least 100 MB in all.
        while chunks[0] < 200 or not committed.is_set():
            writer.append([(None, b"y" * 1000)] * 500)
            chunks[0] += 1
            started.set()
        writer.freeze()

    thread = threading.Thread(target=write_big_snapshot)
    thread.start()
    assert started.wait(timeout=60)
    start, chunks_before = leader.core.high_watermark, chunks[0]
    for _ in range(25):
        leader.core.append(records(1), leader.now)
        leader.advance(1)
        leader.flush()
    commits_during, chunks_during = leader.core.high_watermark - start, chunks[0] - chunks_before
    committed.set()
    thread.join()
    assert commits_during == 25, f"only {commits_during} commits while the snapshot was written"
    assert chunks_during > 0, "the snapshot was not being written while the leader committed"
    assert leader.snapshots.latest() == writer.snapshot_id
    assert leader.core.high_watermark == leader.log.end_offset


# ---------------------------------------------------------------- 9. metrics


def test_snapshot_metrics():
    metrics = SnapshotMetrics()
    leader = committed_leader(metrics=metrics)
    take_snapshot(leader, 5, [b"z" * 100] * 10)
    registry = metrics.registry
    assert registry.get_sample_value("kraft_gen_snapshot_latency_ms_count") == 1
    assert registry.get_sample_value("kraft_snapshot_size_bytes") == leader.snapshots.open_reader(SnapshotId(5, 1)).size
    assert registry.get_sample_value("kraft_snapshot_lag") == 4
    leader.restart()
    assert registry.get_sample_value("kraft_load_snapshot_latency_ms_count") == 1
