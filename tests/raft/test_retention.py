"""Where the log may start (retention.py): Kafka's retention by bytes and age, KIP-630's
hold for live replicas bounded by metadata.start.offset.lag.time.max.ms, and followers
following the leader's log start."""

from kraft.raft import RaftConfig
from kraft.raft.accumulator import BatchAccumulator
from kraft.raft.leader import LeaderState
from kraft.raft.retention import LogStart, follower_target, leader_target, retention_target
from kraft.raft.roles import Follower, Leader, Unattached
from kraft.raft.snapshot_catalog import SnapshotCatalog
from kraft.raft.voters import Voters, VoterSet
from kraft.storage import MemoryLog, MemorySnapshotStore, SnapshotId

from .conftest import follower_batch

S = [SnapshotId(10, 1), SnapshotId(20, 1), SnapshotId(30, 2)]


def test_retention_moves_to_the_next_snapshot_while_the_oldest_breaches_a_limit_and_keeps_the_latest():
    sizes = {s: 100 for s in S}
    log_from = {10: 300, 20: 200, 30: 100}
    times = {S[0]: 1_000, S[1]: 2_000, S[2]: 3_000}
    assert retention_target(S, sizes, times, log_from, now=3_000, max_bytes=-1, max_ms=-1) is None, "both off"
    assert retention_target(S, sizes, times, log_from, now=3_000, max_bytes=1_000, max_ms=-1) is None
    assert retention_target(S, sizes, times, log_from, now=3_000, max_bytes=500, max_ms=-1) == S[1]
    assert retention_target(S, sizes, times, log_from, now=3_000, max_bytes=0, max_ms=-1) == S[2], "never past the latest"
    assert retention_target(S, sizes, times, log_from, now=2_500, max_bytes=-1, max_ms=1_000) == S[1], "by age"


def test_the_leader_waits_for_live_replicas_but_not_longer_than_the_lag_time():
    times = {s: 0 for s in S}
    assert leader_target(S[2], S, live_offsets=[35, 40], timestamps=times, now=10, lag_time_max_ms=100) == S[2]
    assert leader_target(S[2], S, live_offsets=[25, 40], timestamps=times, now=10, lag_time_max_ms=100) == S[1], \
        "as far as every live replica has replicated"
    assert leader_target(S[2], S, live_offsets=[5, 40], timestamps=times, now=10, lag_time_max_ms=100) is None
    assert leader_target(S[2], S, live_offsets=[5, 40], timestamps=times, now=100, lag_time_max_ms=100) == S[2], \
        "waited long enough"


def test_a_follower_follows_the_leaders_log_start_to_its_own_largest_snapshot_below_it():
    assert follower_target(S, 25) == S[1]
    assert follower_target(S, 9) is None


def log_start(max_bytes):
    log = MemoryLog()
    for base in range(0, 40, 5):
        log.append_as_follower(follower_batch(5, 1, base))
    store = MemorySnapshotStore()
    for end in (10, 20, 30):
        writer = store.create_writer(SnapshotId(end, 1), end)
        writer.append([(None, b"x")])
        writer.freeze()
    catalog = SnapshotCatalog(store, None)
    catalog.observe(None)
    config = RaftConfig(node_id=1, voters=(1, 2, 3), cluster_id="c", max_retention_bytes=max_bytes,
                        cleanup_interval_ms=1_000)
    return LogStart(config, Voters(VoterSet.static(config.voters)), log, store, catalog), log, store


def test_log_start_moves_in_roles_that_know_a_leader_at_most_once_per_cleanup_interval():
    keeper, log, store = log_start(max_bytes=0)
    keeper.maybe_clean(0, Unattached(election_deadline=5), high_watermark=40)
    assert log.start_offset == 0, "between leaders no one knows what the replicas need"
    keeper.maybe_clean(1, Follower(fetch_deadline=5, leader_start_offset=20), high_watermark=40)
    assert log.start_offset == 0, "the next cleanup is a second later"
    keeper.maybe_clean(1_000, Follower(fetch_deadline=5, leader_start_offset=20), high_watermark=40)
    assert log.start_offset == 30 and store.list() == [SnapshotId(30, 1)], "the leader's start, then retention"


def test_the_leader_holds_the_log_for_a_live_replica_behind_the_snapshot():
    keeper, log, store = log_start(max_bytes=0)
    progress = LeaderState(1, 1, (1, 2, 3), 0, started_ms=0)
    progress.record_fetch(2, 40, 40, now=900)
    progress.record_fetch(3, 15, 40, now=900)
    leader = Leader(progress, BatchAccumulator(1 << 20, 1 << 20, 0), fetch_timeout_ms=2_000)
    keeper.maybe_clean(1_000, leader, high_watermark=40)
    assert log.start_offset == 10, "voter 3 at 15 still needs 10..14"
    progress.record_fetch(3, 40, 40, now=1_900)
    keeper.maybe_clean(2_000, leader, high_watermark=40)
    assert log.start_offset == 30
