"""The answers to the writes clients make most, OffsetCommit and (Incremental)AlterConfigs, written
as Kafka's bytes.

At 64 clients committing at once, the offsets leader's one thread is what limits them, and a
tenth of it went to building each answer as kio entities (every field checked as it is
built) and then writing those field by field. These answers are flat: written here straight
from what the handler has, in every version kraft serves. The layouts are Kafka's schemas'
(OffsetCommitResponse.json, AlterConfigsResponse.json, IncrementalAlterConfigsResponse.json):

    OffsetCommit v2-v9: throttle_time_ms i32 (v3 on),
        topics [name string, partitions [partition_index i32, error_code i16]]; flexible from v8
    AlterConfigs v0-v2 and IncrementalAlterConfigs v0-v1: throttle_time_ms i32,
        responses [error_code i16, error_message string?, resource_type i8, resource_name string];
        flexible from v2 and v1

A flexible version writes arrays and strings compact and ends each entity with an empty set
of tagged fields. tests/protocol/test_write_answers.py holds every version's bytes equal to kio's.
"""

import struct
from collections.abc import Sequence

from kraft.protocol.framing import array_length, string
from kraft.protocol.regions import Encoded

OFFSET_COMMIT, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 8, 33, 44
_FLEXIBLE_FROM = {OFFSET_COMMIT: 8, ALTER_CONFIGS: 2, INCREMENTAL_ALTER_CONFIGS: 1}
_THROTTLE_FROM = {OFFSET_COMMIT: 3, ALTER_CONFIGS: 0, INCREMENTAL_ALTER_CONFIGS: 0}
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ih")  # partition index, error code
_ERROR = struct.Struct(">h")
_RESOURCE_TYPE = struct.Struct(">b")


def offset_commit(version: int, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> Encoded:
    """OffsetCommit's answer: (topic, [(partition index, error code)]) in the request's order."""
    flexible = version >= _FLEXIBLE_FROM[OFFSET_COMMIT]
    tags = b"\x00" if flexible else b""
    out = bytearray(_I32.pack(0) if version >= _THROTTLE_FROM[OFFSET_COMMIT] else b"")
    out += array_length(len(topics), flexible)
    for name, partitions in topics:
        out += string(name, flexible)
        out += array_length(len(partitions), flexible)
        for index, error in partitions:
            out += _PARTITION.pack(index, error)
            out += tags
        out += tags
    out += tags
    return Encoded([bytes(out)], flexible)  # no errors for the forwarder: OffsetCommit goes to its coordinator


def alter_configs(api_key: int, version: int, resources: Sequence[tuple[int, str | None, int, str]]) -> Encoded:
    """AlterConfigs' or IncrementalAlterConfigs' answer: (error code, error message, resource
    type, resource name) per resource, in the request's order."""
    flexible = version >= _FLEXIBLE_FROM[api_key]
    tags = b"\x00" if flexible else b""
    out = bytearray(_I32.pack(0))
    out += array_length(len(resources), flexible)
    for error, message, resource_type, name in resources:
        out += _ERROR.pack(error)
        out += string(message, flexible)
        out += _RESOURCE_TYPE.pack(resource_type)
        out += string(name, flexible)
        out += tags
    out += tags
    return Encoded([bytes(out)], flexible, frozenset(error for error, _, _, _ in resources))
