"""A consumer behind the log start, against a real cluster whose retention trimmed its log:
without snapshot_fallback it is OFFSET_OUT_OF_RANGE (Kafka's behaviour); with it, it reads
the snapshot the log starts at (FetchSnapshot on the client listener), whole and marked,
then the log from the snapshot's end, and no topic ever created is missing."""

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, ConsumerRecord, OffsetAndEpoch, OffsetOutOfRangeError
from kraft.metadata import decode_record
from kraft.metadata.records import TopicRecord
from kraft.records.control import ControlType, parse_control_key
from tests.server.cluster_helpers import METADATA_TP, create_topics, trimmed_cluster, wait_for

TP = METADATA_TP


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory):
    """A cluster whose log start retention moved past offset 0, and the topics created."""
    with trimmed_cluster(tmp_path_factory.mktemp("trimmed")) as found:
        yield found


def control_type(record: ConsumerRecord) -> ControlType | None:
    return ControlType(parse_control_key(record.key)) if record.is_control else None


def read_from_zero(cluster: LocalCluster, hw: int, **options) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", include_control=True,
                  fetch_max_wait_ms=100, snapshot_fallback=True, **options) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        wait_for(lambda: bool(out.extend(consumer.poll(200))) or consumer.position(TP) >= hw, timeout=60,
                 what=f"offset {hw}")
        assert consumer.next_offsets()[TP].offset >= hw
    return out


def test_without_the_fallback_a_position_below_the_log_start_is_out_of_range(trimmed):
    cluster, _ = trimmed
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        with pytest.raises(OffsetOutOfRangeError, match="at 0"):
            consumer.poll(5000)


def test_with_the_fallback_the_snapshot_comes_whole_then_the_log_with_no_topic_missing(trimmed):
    cluster, names = trimmed
    hw = create_topics(cluster, "after", 2)
    records = read_from_zero(cluster, hw)
    snapshot = [r for r in records if r.snapshot is not None]
    log = [r for r in records if r.snapshot is None]
    sid = snapshot[0].snapshot
    assert sid is not None and sid.offset > 0
    assert all(r.snapshot == sid and (r.offset, r.leader_epoch) == (sid.offset - 1, sid.leader_epoch) for r in snapshot)
    assert records[:len(snapshot)] == snapshot  # the snapshot first, whole: header first, footer last
    assert control_type(snapshot[0]) == ControlType.SNAPSHOT_HEADER
    assert control_type(snapshot[-1]) == ControlType.SNAPSHOT_FOOTER
    assert [r.offset for r in log] == list(range(sid.offset, sid.offset + len(log)))  # then the log, no gap
    assert log[-1].offset >= hw - 1
    topics = {decode_record(r.value).name for r in records
              if not r.is_control and isinstance(decode_record(r.value), TopicRecord)}
    assert topics >= {*names, "after-0", "after-1"}


def test_a_snapshot_larger_than_a_fetch_comes_in_chunks_and_whole(trimmed):
    cluster, names = trimmed
    hw = create_topics(cluster, "chunked", 1)
    records = read_from_zero(cluster, hw, fetch_max_bytes=512)  # several FetchSnapshot rounds
    snapshot = [r for r in records if r.snapshot is not None]
    assert control_type(snapshot[0]) == ControlType.SNAPSHOT_HEADER
    assert control_type(snapshot[-1]) == ControlType.SNAPSHOT_FOOTER
    assert len({r.snapshot for r in snapshot}) == 1


def test_poll_batches_hands_out_the_snapshot_as_one_marked_piece(trimmed):
    cluster, _ = trimmed
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="none", fetch_max_wait_ms=100,
                  snapshot_fallback=True) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)
        fetched = []
        wait_for(lambda: bool(fetched.extend(consumer.poll_batches(200))) or bool(fetched), what="a snapshot")
        piece = fetched[0]
        assert piece.snapshot is not None and piece.end == piece.snapshot
        assert piece.batches[0].header.base_offset == 0 and piece.batches[0].header.is_control
        assert consumer.next_offsets()[TP] == piece.snapshot  # the log goes on from its end, in its epoch


def test_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(trimmed):
    cluster, _ = trimmed
    hw = create_topics(cluster, "timed", 1)
    with Consumer(cluster.bootstrap_servers(), auto_offset_reset="earliest", include_control=True,
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        log: list[ConsumerRecord] = []
        wait_for(lambda: bool(log.extend(consumer.poll(200))) or consumer.position(TP) >= hw, what=f"offset {hw}")
        middle = log[len(log) // 2]
        found = consumer.offsets_for_times({TP: middle.timestamp})[TP]
        first = next(r for r in log if r.timestamp >= middle.timestamp)
        assert found == OffsetAndEpoch(first.offset, first.leader_epoch)
        assert consumer.offsets_for_times({TP: max(r.timestamp for r in log) + 3_600_000})[TP] is None
