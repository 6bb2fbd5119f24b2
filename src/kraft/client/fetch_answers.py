"""What a leader's answer to Fetch or FetchSnapshot does to a partition, up to the records
poll() returns. Sans-IO: `kraft.client.consumer` decides whom to ask and when, and sends.

A Fetch asks from each position with the epoch of the record before it (LastFetchedEpoch),
and a partition's answer is one of:
- a leadership error: the leader is forgotten (the consumer refreshes its metadata), or
  taken from the answer when it names a newer epoch, which the position is then validated
  against;
- OFFSET_OUT_OF_RANGE: with `snapshot_fallback`, a position below the log start downloads
  the snapshot the log starts at; otherwise the reset policy, or OffsetOutOfRangeError;
- DivergingEpoch: the leader found its log no longer holds the position (KIP-320). This and
  the consumer's OffsetForLeaderEpoch check meet the one reaction, `on_truncation`:
  LogTruncationError, or the position moved back to where the log diverges;
- records: the whole batches from the position on, which the position has now been checked
  against.
A FetchSnapshot answer is one chunk of the download, the whole snapshot once the last is in.
Batches become records for poll() here, held in the partition's buffer until returned.
"""

import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from kraft.client.client_errors import ConsumerError, LogTruncationError, OffsetOutOfRangeError, error_for
from kraft.client.fetched import ConsumerRecord, FetchedBatches, SnapshotDownload, snapshot_name
from kraft.client.partition_state import NO_EPOCH, PartitionState, Reset
from kraft.client.positions import OffsetAndEpoch, TopicPartition, diverged_at
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.records import Record, RecordError, read_batches

log = logging.getLogger("kraft.client")

FETCH, FETCH_SNAPSHOT = 1, 59
FETCH_V, FETCH_SNAPSHOT_V = 12, 0
# The partition's leader moved, or our idea of its epoch is stale: refresh metadata, ask again.
LEADERSHIP = {ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
              ErrorCode.leader_not_available}
SNAPSHOT_GONE = {ErrorCode.snapshot_not_found, ErrorCode.position_out_of_range}


def fetch_request(partitions: Iterable[tuple[TopicPartition, PartitionState]], max_wait_ms: int,
                  partition_max_bytes: int, max_bytes: int) -> Any:
    """One leader's Fetch for `partitions`, each from its position with its LastFetchedEpoch."""
    topics: dict[str, list[dict]] = {}
    for tp, s in partitions:
        topics.setdefault(tp.topic, []).append({
            "partition": tp.partition, "current_leader_epoch": s.leader_epoch, "fetch_offset": s.position,
            "last_fetched_epoch": s.last_epoch if s.last_epoch is not None else NO_EPOCH,
            "log_start_offset": -1, "partition_max_bytes": partition_max_bytes,
        })
    return build_request(FETCH, FETCH_V, {
        "replica_id": -1, "max_wait": timedelta(milliseconds=max_wait_ms),
        "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic": t, "topic_id": None, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [], "rack_id": "",
    })


def read_partition(tp: TopicPartition, state: PartitionState, p: Any, policy: Reset | None,
                   snapshot_fallback: bool) -> FetchedBatches | None:
    """What `p`, the partition's entry in a Fetch answer, does to `state` (see the module
    docstring); the batches it brought, if any (the position does not move here)."""
    assert state.position is not None
    if p.error_code in LEADERSHIP:
        state.leader = None  # refresh, and (FENCED) validate against the new leader's epoch
        if p.current_leader.leader_epoch > state.leader_epoch:
            state.leader, state.leader_epoch = p.current_leader.leader_id, p.current_leader.leader_epoch
        return None
    if p.error_code == ErrorCode.offset_out_of_range:
        snapshot = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        if snapshot_fallback and snapshot.offset > state.position and p.snapshot_id.epoch >= 0:
            log.info("%s: offset %s is below the log start %d; reading snapshot %s, then the log from there",
                     tp, state.position, snapshot.offset, snapshot_name(snapshot))
            state.download = SnapshotDownload(snapshot)
            return None
        if policy is None:
            raise OffsetOutOfRangeError({tp: state.position})
        log.warning("%s: offset %s is out of range; resetting to the %s offset", tp, state.position, policy)
        state.reset_to(policy)
        return None
    if p.error_code != ErrorCode.none:
        raise error_for(f"Fetch {tp}", p.error_code)
    state.high_watermark = p.high_watermark
    if p.diverging_epoch.end_offset >= 0:  # the leader applied `holds` to our LastFetchedEpoch
        at = diverged_at(state.position, p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
        on_truncation({tp: at}, {tp: state}, policy)
        return None
    # This leader took our position and LastFetchedEpoch without DivergingEpoch: checked.
    state.validated_epoch = state.leader_epoch
    return _batches_from(tp, state.position, p.records) if p.records else None


def on_truncation(truncated: dict[TopicPartition, OffsetAndEpoch | None],
                  states: Mapping[TopicPartition, PartitionState], policy: Reset | None) -> None:
    """The log no longer holds these positions (`truncated[tp]`: where it diverges, None if
    the leader cannot say): LogTruncationError with no reset policy, else each position
    moves back there, with the leader's epoch (Kafka's seekValidated), or is reset."""
    if policy is None:
        raise LogTruncationError(truncated)
    for tp, at in truncated.items():
        state = states[tp]
        if at is None:
            log.warning("log truncation detected for %s at position %s; the leader cannot say where: "
                        "resetting to the %s offset", tp, state.position, policy)
            state.reset_to(policy)
        else:
            log.warning("log truncation detected for %s at position %s: resetting to the first diverging "
                        "offset %d (leader epoch %d)", tp, state.position, at.offset, at.leader_epoch)
            state.seek(at.offset, at.leader_epoch, validated_epoch=state.leader_epoch)


def _batches_from(tp: TopicPartition, start: int, data: bytes) -> FetchedBatches | None:
    """The fetched batches from `start` on."""
    try:
        batches = [b for b in read_batches(data) if b.header.next_offset > start]
    except RecordError as e:
        raise ConsumerError(f"{tp}: corrupt data at offset {start}: {e}") from None
    if not batches:
        return None
    last = batches[-1].header
    return FetchedBatches(tp, start, batches, OffsetAndEpoch(last.next_offset, last.partition_leader_epoch))


def fetch_snapshot_request(tp: TopicPartition, state: PartitionState, max_bytes: int) -> Any:
    """The FetchSnapshot for the next chunk of `state.download`."""
    download = state.download
    assert download is not None
    sid = download.id
    return build_request(FETCH_SNAPSHOT, FETCH_SNAPSHOT_V, {
        "cluster_id": None, "replica_id": -1, "max_bytes": max_bytes,
        "topics": [{"name": tp.topic, "partitions": [{
            "partition": tp.partition, "current_leader_epoch": state.leader_epoch,
            "snapshot_id": {"end_offset": sid.offset, "epoch": sid.leader_epoch},
            "position": download.position}]}],
    })


def read_snapshot_chunk(tp: TopicPartition, state: PartitionState, response: Any) -> FetchedBatches | None:
    """Takes a FetchSnapshot answer's chunk into `state.download`; the whole snapshot once
    its last chunk is in (`end` is the snapshot's end, where the position goes). A snapshot the
    leader no longer has, or a new leader, drops the download: a fresh fetch's answer starts it again."""
    download = state.download
    assert download is not None
    sid = download.id
    p = response.topics[0].partitions[0] if response.topics and response.topics[0].partitions else None
    error = response.error_code if p is None or response.error_code != ErrorCode.none else p.error_code
    if error in LEADERSHIP or error in SNAPSHOT_GONE:
        log.info("%s: snapshot %s download starts again (%s)", tp, snapshot_name(sid), error.name)
        state.drop_download()
        state.leader = None
        return None
    if error != ErrorCode.none:
        raise error_for(f"FetchSnapshot {tp} {snapshot_name(sid)}", error)
    if p is None:
        raise ConsumerError(f"FetchSnapshot {tp}: the leader's answer names no partition")
    if p.position != download.position:
        raise ConsumerError(f"FetchSnapshot {tp}: asked for position {download.position}, got {p.position}")
    download.file.write(p.unaligned_records or b"")
    download.size = p.size
    if download.position < p.size:
        return None
    if download.position > p.size:
        raise ConsumerError(f"FetchSnapshot {tp}: {download.position} bytes of a {p.size}-byte snapshot")
    state.download = None  # the position moves to its end once the caller has the batches
    return FetchedBatches(tp, 0, download.batches(tp), sid, snapshot=sid)


def hold(state: PartitionState, fetched: FetchedBatches, include_control: bool) -> None:
    """Keeps `fetched`'s records for poll() to return; with none (control batches only),
    the position moves past them at once."""
    records = _records_of(fetched, include_control)
    if records:
        state.buffered, state.buffered_end = records, fetched.end
    else:
        state.advance(fetched.end)


def drain(states: Iterable[PartitionState], max_records: int | None) -> list[ConsumerRecord]:
    """Up to `max_records` buffered records; each position moves past those returned."""
    out: list[ConsumerRecord] = []
    for state in states:
        room = len(state.buffered) if max_records is None else min(len(state.buffered), max_records - len(out))
        if room <= 0:
            continue
        taken, state.buffered = state.buffered[:room], state.buffered[room:]
        out += taken
        if state.buffered:
            if taken[-1].snapshot is None:  # part of a snapshot: the position stays before it
                state.advance(OffsetAndEpoch(taken[-1].offset + 1, taken[-1].leader_epoch))
        else:
            assert state.buffered_end is not None
            state.advance(state.buffered_end)
            state.buffered_end = None
    return out


def _records_of(fetched: FetchedBatches, include_control: bool) -> list[ConsumerRecord]:
    """`fetched`'s records from its start on; a snapshot's all stand at its last offset."""
    tp, out, snapshot = fetched.tp, [], fetched.snapshot
    for batch in fetched.batches:
        h = batch.header
        if h.is_control and not include_control:
            continue
        try:
            records: list[Record] = batch.records()
        except RecordError as e:
            raise ConsumerError(f"{tp}: corrupt batch at offset {h.base_offset}: {e}") from None
        out += [ConsumerRecord(tp.topic, tp.partition, r.offset if snapshot is None else snapshot.offset - 1,
                               h.partition_leader_epoch, r.timestamp, r.key, r.value, r.headers, h.is_control,
                               snapshot) for r in records if r.offset >= fetched.start]
    return out
