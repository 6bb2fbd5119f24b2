"""kraft.client.Consumer against a real three-voter cluster: positions carry epochs, an
ordinary failover is not a truncation, a stale (offset, epoch) is one, and the reset
policies do what Kafka's consumer does."""

import pytest

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
from kraft.cli.cluster_client import leader
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
        assert raised.value.divergent_offsets == {TP: end_of_old}
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


def test_with_a_reset_policy_a_truncation_resumes_at_the_divergence(failed_over):
    cluster, before, after, old_epoch, new_epoch, _ = failed_over
    end_of_old = epoch_start(before + after, new_epoch)
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, end_of_old + 3, old_epoch)
        records: list[ConsumerRecord] = []
        wait_for(lambda: bool(records.extend(consumer.poll(200)) or records), what="records after the reset")
    assert records[0].offset == end_of_old


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
    consumer = Consumer("127.0.0.1:9")
    with pytest.raises(ConsumerError, match="not assigned"):
        consumer.position(TP)
    consumer.close()
    with pytest.raises(ConsumerError, match="closed"):
        consumer.poll(0)
