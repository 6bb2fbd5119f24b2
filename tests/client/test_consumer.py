"""kraft.client.Consumer against a real three-voter cluster: positions carry epochs, an
ordinary failover is not a truncation, a stale (offset, epoch) is one, and the reset
policies do what Kafka's consumer does."""

import logging
from datetime import timedelta
from typing import Any

import pytest

from kraft.cli.cluster_client import leader, request, run_async
from kraft.cli.local_cluster import LocalCluster
from kraft.client import (
    Consumer,
    ConsumerError,
    ConsumerRecord,
    LogTruncationError,
    OffsetAndEpoch,
    OffsetOutOfRangeError,
    TopicPartition,
)
from kraft.client.positions import diverged_at, holds
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from tests.server.cluster_helpers import create_topics, wait_for

TP = TopicPartition("__cluster_metadata", 0)


def read_to(consumer: Consumer, hw: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    wait_for(lambda: bool(out.extend(consumer.poll(200)) or consumer.position(TP) >= hw), what=f"offset {hw}")
    return out


@pytest.fixture(scope="module")
def failed_over(tmp_path_factory):
    """A cluster that has lived through one leader failover, and a full read of its log."""
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster"), voters=3, observers=0)
    cluster.start()
    try:
        first_hw = create_topics(cluster, "before", 5)
        with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                      fetch_max_wait_ms=100) as consumer:
            consumer.assign([TP])
            before = read_to(consumer, first_hw)
            old_leader, old_epoch = leader(cluster)
            cluster.kill(old_leader)
            new_leader, new_epoch = leader(cluster, exclude=(old_leader,))
            assert new_epoch > old_epoch
            hw = create_topics(cluster, "after", 5)
            after = read_to(consumer, hw)  # raises if the failover looked like a truncation
            stored = consumer.next_offsets()[TP]
        yield cluster, before, after, old_epoch, new_epoch, stored
    finally:
        cluster.stop()


def test_a_failover_is_read_through_without_gaps_duplicates_or_errors(failed_over):
    _, before, after, old_epoch, new_epoch, stored = failed_over
    records = before + after
    offsets = [r.offset for r in records]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    epochs = [r.leader_epoch for r in records]
    assert epochs == sorted(epochs) and old_epoch in epochs and new_epoch in epochs
    assert stored == OffsetAndEpoch(offsets[-1] + 1, epochs[-1])


def test_resuming_from_stored_offsets_continues_exactly_there(failed_over):
    cluster, _, after, _, _, stored = failed_over
    hw = create_topics(cluster, "resumed", 2)
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, stored.offset, stored.leader_epoch)
        more = read_to(consumer, hw)
    assert more[0].offset == stored.offset and more[-1].offset == hw - 1


def test_a_position_committed_to_a_group_comes_back_with_its_epoch_and_resumes_exactly_there(failed_over):
    """commit() and committed() through the group coordinator of a cluster that lost a node
    (the group's coordinator may have been on it: found again), as Kafka's simple groups."""
    cluster, _, after, _, _, stored = failed_over
    middle = after[len(after) // 2]
    position = OffsetAndEpoch(middle.offset + 1, middle.leader_epoch)
    with Consumer(cluster.bootstrap_servers(), group_id="simple", fetch_max_wait_ms=100) as first:
        first.assign([TP])
        assert first.committed([TP]) == {TP: None}
        first.seek(TP, position.offset, position.leader_epoch)
        first.commit()  # where it would go on: its position, with the epoch of the record before it
    with Consumer(cluster.bootstrap_servers(), group_id="simple", auto_offset_reset="none", include_control=True,
                  fetch_max_wait_ms=100) as second:
        second.assign([TP])
        committed = second.committed([TP])[TP]
        assert committed == position
        second.seek(TP, committed.offset, committed.leader_epoch)
        resumed = read_to(second, stored.offset)
        second.commit({TP: stored})
        assert second.committed([TP]) == {TP: stored}
    # Other tests of the module may have written past `stored`: compare up to it.
    assert [r.offset for r in resumed if r.offset < stored.offset] == [r.offset for r in after if r.offset > middle.offset]


def epoch_start(records: list[ConsumerRecord], epoch: int) -> int:
    return next(r.offset for r in records if r.leader_epoch == epoch)


def test_a_position_past_the_end_of_its_epoch_is_a_truncation(failed_over):
    cluster, before, after, old_epoch, new_epoch, _ = failed_over
    end_of_old = epoch_start(before + after, new_epoch)  # where the new leader's epoch begins
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, end_of_old + 3, old_epoch)  # as if we had read 3 records the new leader never had
        with pytest.raises(LogTruncationError) as raised:
            consumer.poll(2000)
        assert raised.value.divergent_offsets == {TP: OffsetAndEpoch(end_of_old, old_epoch)}
        assert f"first diverging offset {end_of_old}" in str(raised.value)


def test_a_position_inside_its_epoch_is_not_a_truncation(failed_over):
    cluster, before, after, old_epoch, new_epoch, _ = failed_over
    end_of_old = epoch_start(before + after, new_epoch)
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, end_of_old, old_epoch)
        records = consumer.poll(2000)
    assert records and records[0].offset == end_of_old and records[0].leader_epoch == new_epoch


@pytest.mark.parametrize("policy", ["earliest", "latest"])
def test_with_a_reset_policy_a_truncation_resumes_at_the_divergence_and_says_so(failed_over, policy, caplog):
    """KIP-320: both policies move to the first diverging offset, not to either end of the
    log, and log a warning."""
    cluster, before, after, old_epoch, new_epoch, _ = failed_over
    end_of_old = epoch_start(before + after, new_epoch)
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset=policy, include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, end_of_old + 3, old_epoch)
        records: list[ConsumerRecord] = []
        with caplog.at_level(logging.WARNING, logger="kraft.client"):
            wait_for(lambda: bool(records.extend(consumer.poll(200)) or records), what="records after the reset")
    assert records[0].offset == end_of_old
    assert [r.offset for r in records] == list(range(end_of_old, end_of_old + len(records)))
    warnings = [r.getMessage() for r in caplog.records if r.name == "kraft.client" and r.levelno == logging.WARNING]
    assert warnings == [f"log truncation detected for {TP} at position {end_of_old + 3}: resetting to the first "
                        f"diverging offset {end_of_old} (leader epoch {old_epoch})"]


def test_the_rule_for_an_epoch_end_never_moves_a_consumer_forward():
    """One rule for OffsetForLeaderEpoch and DivergingEpoch answers. At 151, having read
    offset 150 in epoch 5, a leader whose largest epoch <= 5 is 3, ending at 200: offset 150
    is not what we read (this log has no epoch 5), and 151-199 were never read, so the
    divergence is reported at 151, never at 200."""
    assert not holds(151, 5, 200, 3)
    assert diverged_at(151, 200, 3) == OffsetAndEpoch(151, 3)
    assert not holds(151, 5, 100, 5) and diverged_at(151, 100, 5) == OffsetAndEpoch(100, 5)
    assert holds(151, 5, 151, 5) and holds(151, 5, 300, 5)
    assert not holds(151, 5, -1, -1) and diverged_at(151, -1, -1) is None


def test_an_epoch_the_log_never_had_diverges_at_the_position_not_past_it(failed_over):
    """A position read in an epoch newer than any in the log (a cluster restored into an
    older epoch than its clients saw): the leader answers its latest epoch, ending at its
    log end, past the position. The consumer must neither skip to that end nor report it."""
    cluster, *_ = failed_over
    latest = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP]
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 10, latest.leader_epoch + 5)
        with pytest.raises(LogTruncationError) as raised:
            consumer.poll(2000)
        assert raised.value.divergent_offsets == {TP: OffsetAndEpoch(10, latest.leader_epoch)}
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 10, latest.leader_epoch + 5)
        records = read_to(consumer, latest.offset)
    assert [r.offset for r in records] == list(range(10, 10 + len(records)))


def test_after_a_reset_to_the_divergence_the_position_keeps_the_leaders_epoch(failed_over):
    """Kafka's seekValidated: the epoch of the answer stays with the new position, so the
    next fetch is checked too and next_offsets() can be stored with it."""
    cluster, *_ = failed_over
    latest = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP]
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="latest", fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, latest.offset + 3, latest.leader_epoch + 5)  # past the end, in an epoch the log never had
        consumer.poll(0)
        stored = consumer.next_offsets()[TP]
    assert latest.offset <= stored.offset < latest.offset + 3 and stored.leader_epoch == latest.leader_epoch


def test_poll_with_max_records_returns_every_record_once(failed_over):
    cluster, before, after, *_ = failed_over
    hw = after[-1].offset + 1
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        got: list[ConsumerRecord] = []

        def three_more() -> bool:
            records = consumer.poll(200, max_records=3)
            assert len(records) <= 3
            got.extend(records)
            if records:  # the position is past what was returned, not past what was fetched
                assert consumer.next_offsets()[TP] == OffsetAndEpoch(records[-1].offset + 1, records[-1].leader_epoch)
            return consumer.position(TP) >= hw

        wait_for(three_more, what=f"offset {hw} three records at a time")
    assert [r for r in got if r.offset < hw] == before + after


def test_records_of_one_partition_are_returned_before_another_partitions_error(failed_over):
    """A topic of the metadata image has no data on any node: its fetch fails. The records
    fetched for the log in the same poll come first; the error comes on a poll that has
    nothing else to return."""
    cluster, before, *_ = failed_over
    other = TopicPartition(served_topic(cluster), 0)
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP, other])
        consumer.seek(TP, 0)
        consumer.seek(other, 0)
        records = consumer.poll(2000)
        assert records and records[: len(before)] == before[: len(records)]
        with pytest.raises(ConsumerError, match=f"Fetch {other}: unknown_topic_or_partition"):
            for _ in range(20):  # records committed meanwhile (broker heartbeats) come first too
                records += consumer.poll(2000)
        assert [r.offset for r in records] == list(range(len(records)))
        assert consumer.position(TP) == records[-1].offset + 1


def served_topic(cluster: LocalCluster) -> str:
    """A topic of the image whose partition 0 is led by a running broker clients are told of."""
    response = run_async(request(cluster.nodes[leader(cluster)[0]].client_port, build_request(3, 12, {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})))
    reachable = {b.node_id for b in response.brokers if cluster.nodes[b.node_id].running}
    return next(t.name for t in response.topics if not t.is_internal and t.partitions[0].error_code == ErrorCode.none
                and t.partitions[0].leader_id in reachable)


def test_the_leader_answers_diverging_epoch_before_out_of_range(failed_over):
    """Kafka's leader checks LastFetchedEpoch before the fetch offset against its log end:
    a fetcher past the end of a log that lost its history learns where it diverged."""
    cluster, *_ = failed_over
    leader_id, _ = leader(cluster)
    latest = Consumer(cluster.bootstrap_servers()).end_offsets([TP])[TP]

    def fetch(offset: int, last_epoch: int) -> Any:
        return run_async(request(cluster.nodes[leader_id].client_port, build_request(1, 12, {
            "replica_id": -1, "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TP.topic, "topic_id": None, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": last_epoch,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))).responses[0].partitions[0]

    far = latest.offset + 1000
    assert fetch(far, -1).error_code == ErrorCode.offset_out_of_range
    p = fetch(far, latest.leader_epoch + 5)
    assert p.error_code == ErrorCode.none and p.diverging_epoch.epoch == latest.leader_epoch
    assert latest.offset <= p.diverging_epoch.end_offset < far


def test_leadership_errors_are_retried_retry_backoff_ms_apart(tmp_path):
    """One voter of three up: no leader. Each retry (a Metadata refresh, and a Fetch
    or ListOffsets attempt) waits retry.backoff.ms first, so a poll of 1 s sends at most
    two requests per backoff; without the pause it sends them as fast as they return."""
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0)
    try:
        cluster.start(1)

        class Counting(Consumer):
            sent = 0

            async def _request(self, address: tuple[str, int], request_: Any) -> Any:
                self.sent += 1
                return await super()._request(address, request_)

        with Counting(cluster.bootstrap_servers(), auto_offset_reset="earliest", retry_backoff_ms=200) as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 0)
            assert consumer.poll(1000) == []
            assert 0 < consumer.sent <= 2 * (1000 // 200 + 2)
    finally:
        cluster.stop()


@pytest.mark.parametrize("policy", ["none", "earliest", "latest"])
def test_an_offset_out_of_range_follows_auto_offset_reset(failed_over, policy):
    cluster, before, *_ = failed_over
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset=policy, fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        end = consumer.end_offsets([TP])[TP].offset
        consumer.seek(TP, end + 1000)
        if policy == "none":
            with pytest.raises(OffsetOutOfRangeError):
                consumer.poll(2000)
            return
        records: list[ConsumerRecord] = []
        wait_for(lambda: bool(records.extend(consumer.poll(100)) or records or consumer.position(TP) != end + 1000),
                 what="a reset")
        if policy == "earliest":
            assert records[0].offset == next(r.offset for r in before if not r.is_control)
        else:  # a fenced-broker record may land meanwhile; never the old offset, never the start
            assert end <= (records[0].offset if records else consumer.position(TP)) < end + 10


def test_bad_configuration_and_use_are_clear_errors():
    with pytest.raises(ValueError, match="auto_offset_reset"):
        Consumer("127.0.0.1:9092", auto_offset_reset="smallest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bootstrap_servers"):
        Consumer(" , ")
    with pytest.raises(ValueError, match="group_id is empty"):
        Consumer("127.0.0.1:9092", group_id="")
    consumer = Consumer("127.0.0.1:9")
    with pytest.raises(ConsumerError, match="not assigned"):
        consumer.position(TP)
    with pytest.raises(ConsumerError, match=r"commit\(\) needs a group"):
        consumer.commit({TP: OffsetAndEpoch(1, 1)})
    consumer.close()
    with pytest.raises(ConsumerError, match="closed"):
        consumer.poll(0)
