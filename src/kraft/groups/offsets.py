"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups, by the rules of
Kafka's OffsetMetadataManager.

A commit is checked against its group (the member and generation of a group using the
classic protocol; any commit with generation -1 to a group without members, which creates a
"simple" group for a consumer that assigns itself partitions), then each partition's offset
is written as an OffsetCommit record with the epoch of the last record consumed (KIP-320),
its metadata (at most `offset.metadata.max.bytes`, else OFFSET_METADATA_TOO_LARGE) and the
commit time; the answer comes when they commit. A fetch reads the committed image, or with
`require_stable` the working one, answered once what it saw has committed (Kafka's "write
operation" for stable fetches: nothing uncommitted is ever returned). OffsetDelete and
DeleteGroups write tombstones for what the working image holds.
"""

from collections.abc import Sequence

from kraft.groups.group_config import GroupConfig
from kraft.groups.group_messages import (
    NONE,
    CommitRequest,
    FetchAnswer,
    FetchedOffset,
    OffsetDeleteAnswer,
)
from kraft.groups.offsets_records import (
    GroupMetadataKey,
    GroupRecord,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kraft.groups.rebalance import GroupLog, Membership, invalid_group_id
from kraft.groups.replies import CoordinatorError, Reply
from kraft.groups.state import GroupsImage
from kraft.protocol import ErrorCode

TopicPartitions = Sequence[tuple[str, Sequence[int]]]


def java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units, what Kafka's metadata limit counts."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


class Offsets:
    def __init__(self, log: GroupLog, membership: Membership, config: GroupConfig) -> None:
        self.log = log
        self.membership = membership
        self.config = config

    def _write(self, records: list[GroupRecord], now: int) -> ErrorCode:
        """Writes the records (if any); the error every written item gets if they cannot be."""
        if records:
            try:
                self.log.write(records, now)
            except CoordinatorError as e:
                return e.error
        return NONE

    def commit(self, request: CommitRequest, now: int) -> Reply:
        """Answers one error per partition of the request, in its order."""
        reply = self.log.new_reply()
        refused = self.membership.commit_error(request, now)
        if refused is not None:
            self.log.answer(reply, (refused,) * len(request.partitions))
            return reply
        expire = -1 if request.retention_ms == -1 else now + request.retention_ms
        errors: list[ErrorCode | None] = []
        records: list[GroupRecord] = []
        for p in request.partitions:
            metadata = p.metadata or ""
            if java_length(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            errors.append(None)
            records.append((OffsetCommitKey(request.group_id, p.topic, p.partition),
                            OffsetCommitValue(p.offset, p.leader_epoch, metadata, now, expire)))
        written = self._write(records, now)
        self.log.answer(reply, tuple(written if e is None else e for e in errors))
        return reply

    def fetch(self, group_id: str, topics: TopicPartitions | None, require_stable: bool, now: int) -> Reply:
        """The group's committed offsets of `topics` (all its offsets if None): -1, no epoch
        and no metadata for a partition without one, or a group that does not exist."""
        reply = self.log.new_reply()
        image = self.log.working if require_stable else self.log.committed
        self.log.answer(reply, fetch_offsets(image, group_id, topics), wait=require_stable)
        return reply

    def delete(self, group_id: str, topics: TopicPartitions, now: int) -> Reply:
        """OffsetDelete: tombstones for the partitions the group has offsets of, except those
        of topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        reply = self.log.new_reply()
        if invalid_group_id(group_id):
            self.log.answer(reply, OffsetDeleteAnswer(ErrorCode.invalid_group_id))
            return reply
        error, group = self.membership.offset_deletion(group_id, now)
        if group is None:
            self.log.answer(reply, OffsetDeleteAnswer(error))
            return reply
        held = self.log.working.offsets_of(group_id)
        partitions: dict[tuple[str, int], ErrorCode | None] = {}
        records: list[GroupRecord] = []
        for topic, indexes in topics:
            subscribed = group.is_subscribed_to(topic)
            for index in indexes:
                if subscribed:
                    partitions[(topic, index)] = ErrorCode.group_subscribed_to_topic
                    continue
                partitions[(topic, index)] = None
                if (topic, index) in held:
                    records.append((OffsetCommitKey(group_id, topic, index), None))
        written = self._write(records, now)
        self.log.answer(reply, OffsetDeleteAnswer(NONE, {tp: written if e is None else e
                                                         for tp, e in partitions.items()}))
        return reply

    def delete_groups(self, group_ids: Sequence[str], now: int) -> Reply:
        """DeleteGroups: each empty group's offsets and metadata, as tombstones in one batch;
        answers (group id, error) in the request's order."""
        reply = self.log.new_reply()
        working = self.log.working
        errors: list[ErrorCode] = []
        records: list[GroupRecord] = []
        deleted: set[str] = set()
        for group_id in group_ids:
            error = NONE if group_id in deleted else self.membership.deletion_error(group_id, now)
            errors.append(error)
            if error is NONE and group_id not in deleted:
                deleted.add(group_id)
                records += [(OffsetCommitKey(group_id, topic, partition), None)
                            for topic, partition in working.offsets_of(group_id)]
                records.append((GroupMetadataKey(group_id), None))
        written = self._write(records, now)
        if written is NONE:
            for group_id in deleted:
                self.membership.deleted(group_id, now)
        self.log.answer(reply, tuple((g, written if e is NONE else e) for g, e in zip(group_ids, errors)))
        return reply


def fetch_offsets(image: GroupsImage, group_id: str, topics: TopicPartitions | None) -> FetchAnswer:
    held = image.offsets_of(group_id)
    if topics is None:
        wanted: list[tuple[str, int]] = sorted(held.keys())
    else:
        wanted = [(topic, index) for topic, indexes in topics for index in indexes]
    found = []
    for topic, index in wanted:
        value = held.get((topic, index))
        if value is None:
            found.append(FetchedOffset(topic, index))
        else:
            found.append(FetchedOffset(topic, index, value.offset, value.leader_epoch, value.metadata))
    return FetchAnswer(group_id, NONE, tuple(found))
