"""FetchSnapshot (KIP-630), both ends: the leader serving chunks, the follower's download.

Leader: each partition asked for is checked (the core's own partition only, the leader's
epoch, a snapshot held, a position inside it) and then served a share of the response's
bytes (`messages.share_bytes`, KIP-630's split between partitions). A core knows only its
own partition, so a request naming several is split by the node (server/runtime/fetch_snapshot_batch.py),
which shares the bytes by `wanted` and hands each core its partition with its share as the
budget. A voter served a chunk counts as heard from, as a Fetch does, for check quorum.

Follower: the download writes chunks in order into a raw writer and, at the size the leader
names, validates and freezes it; anything unexpected (another snapshot named, a chunk past
the size, a file that does not validate) drops it, and the next Fetch starts over.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.raft import messages as m
from kraft.raft.raft_config import RaftConfig
from kraft.raft.snapshot_catalog import SnapshotCatalog
from kraft.storage import RawSnapshotWriter, SnapshotError, SnapshotId, SnapshotReader, SnapshotStore

log = logging.getLogger("kraft.raft")

# Answers that mean the snapshot being fetched is no longer the one to fetch.
_START_OVER = (ErrorCode.snapshot_not_found, ErrorCode.position_out_of_range, ErrorCode.not_leader_or_follower)


@dataclass(frozen=True, slots=True)
class _Chunk:
    reader: SnapshotReader
    position: int


def serve(
    request: m.FetchSnapshotRequest,
    fence: Callable[[int], ErrorCode],
    catalog: SnapshotCatalog,
    config: RaftConfig,
    leader_id: int,
    epoch: int,
) -> tuple[m.FetchSnapshotResponse, bool]:
    """The answer to a FetchSnapshot, and whether any partition was served a chunk."""
    answers: list[tuple[str, int, SnapshotId, _Chunk | ErrorCode]] = []
    for topic in request.topics:
        for part in topic.partitions:
            sid = _snapshot_id(part)
            answers.append((topic.name, part.partition, sid, _check(topic, part, sid, fence, catalog, config)))
    wants = [_wanted(a, config) for *_, a in answers]
    shares = m.share_bytes(min(request.max_bytes, config.snapshot_response_max_bytes), wants)
    topics: dict[str, list[m.FetchSnapshotResponsePartition]] = {}
    leader_fields = {"leader_id": leader_id, "epoch": epoch}
    for (name, index, sid, answer), share in zip(answers, shares, strict=True):
        if isinstance(answer, ErrorCode):
            reply = m.fetch_snapshot_partition(index, answer, (sid.end_offset, sid.epoch), **leader_fields)
        else:
            reply = m.fetch_snapshot_partition(
                index,
                ErrorCode.none,
                (sid.end_offset, sid.epoch),
                size=answer.reader.size,
                position=answer.position,
                records=answer.reader.read_chunk(answer.position, share),
                **leader_fields,
            )
        topics.setdefault(name, []).append(reply)
    served = any(isinstance(a, _Chunk) for *_, a in answers)
    return m.fetch_snapshot_response(list(topics.items())), served


def wanted(topic: Any, part: Any, fence: Callable[[int], ErrorCode], catalog: SnapshotCatalog,
           config: RaftConfig) -> int:
    """The bytes one partition of a FetchSnapshot asks for, as `serve` counts them: what is
    left of the snapshot from the position, at most replica.fetch.snapshot.max.bytes; 0 if
    it would be answered with an error. A node that splits a request naming several
    partitions between their cores shares the response's bytes by these (KIP-630)."""
    return _wanted(_check(topic, part, _snapshot_id(part), fence, catalog, config), config)


def _snapshot_id(part: Any) -> SnapshotId:
    return SnapshotId(max(part.snapshot_id.end_offset, 0), max(part.snapshot_id.epoch, 0))


def _wanted(answer: "_Chunk | ErrorCode", config: RaftConfig) -> int:
    if not isinstance(answer, _Chunk):
        return 0
    return min(answer.reader.size - answer.position, config.snapshot_partition_max_bytes)


def _check(topic: Any, part: Any, sid: SnapshotId, fence: Callable[[int], ErrorCode],
           catalog: SnapshotCatalog, config: RaftConfig) -> _Chunk | ErrorCode:
    if not (config.partition.names(topic) and part.partition == config.partition.index):
        return ErrorCode.unknown_topic_or_partition
    error = fence(part.current_leader_epoch)
    if error != ErrorCode.none:
        return error
    reader = catalog.reader(sid) if sid.end_offset > 0 else None  # (0, 0) is Kafka's bootstrap id: never served
    if reader is None:
        return ErrorCode.snapshot_not_found
    if not 0 <= part.position < reader.size:  # as Kafka: at the end there is nothing left to fetch
        return ErrorCode.position_out_of_range
    return _Chunk(reader, part.position)


class DownloadFailed(Exception):
    """The download must start over; the message says why."""


@dataclass(slots=True)
class SnapshotDownload:
    """A follower's FetchSnapshot in progress: log fetching pauses meanwhile."""

    writer: RawSnapshotWriter
    node_id: int
    progress: int = -1  # the last tenth of the download logged

    @classmethod
    def start(cls, store: SnapshotStore, sid: SnapshotId, node_id: int, leader_id: int | None) -> "SnapshotDownload":
        log.info("node %d: fetching snapshot %d-%d from leader %s", node_id, sid.end_offset, sid.epoch, leader_id)
        return cls(store.create_raw_writer(sid), node_id)

    @property
    def snapshot_id(self) -> SnapshotId:
        return self.writer.snapshot_id

    def request(self, cluster_id: str | None, epoch: int, max_bytes: int,
                where: m.LogPartition = m.METADATA) -> m.FetchSnapshotRequest:
        sid = self.snapshot_id
        return m.fetch_snapshot_request(cluster_id, self.node_id, epoch, (sid.end_offset, sid.epoch),
                                        self.writer.size, max_bytes, where)

    def abort(self, why: str) -> None:
        sid = self.snapshot_id
        self.writer.abort()
        log.info("node %d: dropped the download of snapshot %d-%d: %s", self.node_id, sid.end_offset, sid.epoch, why)

    def check_answer(self, p: Any) -> bool:
        """False for a retriable error (ask again after the backoff); raises DownloadFailed
        when the leader no longer serves this snapshot."""
        sid = self.snapshot_id
        if p.error_code in _START_OVER or (p.snapshot_id.end_offset, p.snapshot_id.epoch) != (sid.end_offset, sid.epoch):
            raise DownloadFailed(f"the leader answered {p.error_code.name}; asking it again with a Fetch")
        return p.error_code == ErrorCode.none

    def accept(self, p: Any) -> bool:
        """Takes one chunk; True once the snapshot is complete, validated and frozen."""
        writer, sid = self.writer, self.snapshot_id
        if p.position != writer.size:
            return False  # a stale or repeated chunk
        data = p.unaligned_records
        writer.append(p.position, data.read() if hasattr(data, "read") else data)
        if writer.size > p.size:
            raise DownloadFailed(f"received {writer.size} bytes of a {p.size}-byte snapshot")
        tenth = writer.size * 10 // max(p.size, 1)
        if tenth != self.progress:
            self.progress = tenth
            log.info("node %d: fetching snapshot %d-%d: %d%% (%d of %d bytes)",
                     self.node_id, sid.end_offset, sid.epoch, tenth * 10, writer.size, p.size)
        if writer.size < p.size:
            return False
        try:
            writer.validate(p.size)
            writer.freeze()
        except SnapshotError as e:
            log.error("node %d: fetched snapshot %d-%d is bad (%s); fetching again", self.node_id, sid.end_offset,
                      sid.epoch, e)
            raise DownloadFailed("it did not validate") from None
        return True
