"""Kafka's names and JSON shapes for metadata and control records, one place for the tools
that print them (`kraft dump-log`, the metadata shell) and the Spark history source.

Kafka's generated JsonConverters name fields in camelCase (kraft declares Kafka's names in
snake case), MetadataRecordType names each record type in upper snake case, and the control
records have their own converters; these are the shapes both readers must agree on.
"""

import re
from typing import Any

from kraft.metadata.records import uuid_str
from kraft.records import (
    EndTxnMarker,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
)
from kraft.records.control import ControlType


def camel_case(snake: str) -> str:
    """A kraft field name as Kafka's JSON names it: `topic_id` -> `topicId`."""
    head, *rest = snake.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def type_name(cls: type) -> str:
    """MetadataRecordType's name for a record class: TopicRecord -> TOPIC_RECORD (Kafka's
    MessageGenerator.toSnakeCase, upper-cased)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls.__name__).upper()


def _voters(ids: tuple[int, ...], directories: tuple[bytes, ...], version: int) -> list[dict]:
    """LeaderChangeMessage's voters; version 1 gives each its directory id."""
    if version >= 1:
        return [{"voterId": v, "voterDirectoryId": uuid_str(d)} for v, d in zip(ids, directories)]
    return [{"voterId": v} for v in ids]


def control_data(message: Any) -> tuple[str, dict]:
    """(ControlRecordType name, the value as Kafka's LeaderChangeMessage-, SnapshotHeaderRecord-,
    SnapshotFooterRecord-, KRaftVersionRecord-, VotersRecord- or EndTxnMarker JsonConverter
    writes it) of a decoded control record."""
    v = message.version
    if isinstance(message, LeaderChangeMessage):
        return "LEADER_CHANGE", {"version": v, "leaderId": message.leader_id,
                                 "voters": _voters(message.voters, message.voter_directory_ids, v),
                                 "grantingVoters": _voters(message.granting_voters, message.granting_directory_ids, v)}
    if isinstance(message, SnapshotHeaderRecord):
        return "SNAPSHOT_HEADER", {"version": v, "lastContainedLogTimestamp": message.last_contained_log_timestamp}
    if isinstance(message, SnapshotFooterRecord):
        return "SNAPSHOT_FOOTER", {"version": v}
    if isinstance(message, KRaftVersionRecord):
        return "KRAFT_VERSION", {"version": v, "kRaftVersion": message.kraft_version}
    if isinstance(message, VotersRecord):
        return "KRAFT_VOTERS", {"version": v, "voters": [
            {"voterId": voter.voter_id, "voterDirectoryId": uuid_str(voter.directory_id),
             "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in voter.endpoints],
             "kRaftVersionFeature": {"minSupportedVersion": voter.min_kraft_version,
                                     "maxSupportedVersion": voter.max_kraft_version}}
            for voter in message.voters]}
    if isinstance(message, EndTxnMarker):
        kind = ControlType.COMMIT if message.committed else ControlType.ABORT
        return kind.name, {"version": v, "coordinatorEpoch": message.coordinator_epoch}
    raise TypeError(f"not a parsed control message: {message!r}")
