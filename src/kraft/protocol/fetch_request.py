"""A Fetch request of v13-v18 written as Kafka's bytes: what a follower sends its leader, twice a write.

Each synchronous write makes two Fetch exchanges per follower (the batch, then the position
that moves the high watermark). Through kio's generic writer, which walks the entity field by
field into a BytesIO and each tagged field through a buffer of its own, the request of a
follower naming two partitions took 33 us on an idle machine, its header included; written here
with the header codec.py writes, 5.7 (bench/fetch_codec_bench.py, kio's in the same run). Reading
is left to kio: its reader is native, 4.5 us for the same request, less than building its
entities in Python alone costs (6.6 us), before any byte is parsed.

The layout is Fetch's from Kafka's schema (FetchRequest.json), flexible in every version here:

    replica_id i32 (v13-v14 only), max_wait_ms i32, min_bytes i32, max_bytes i32,
    isolation_level i8, session_id i32, session_epoch i32,
    topics [topic_id uuid, partitions [partition i32, current_leader_epoch i32,
        fetch_offset i64, last_fetched_epoch i32, log_start_offset i64, partition_max_bytes i32,
        tagged: 0 replica_directory_id uuid (v17 on), 1 high_watermark i64 (v18)]],
    forgotten_topics_data [topic_id uuid, partitions [i32]], rack_id string,
    tagged: 0 cluster_id string?, 1 replica_state [replica_id i32, replica_epoch i64] (v15 on)

Arrays and strings are compact (length + 1 as an unsigned varint, 0 for null); a tagged field
is written only when it differs from its default, as Kafka (and kio) write them, in the order
of its tag. tests/protocol/test_fetch_request.py holds every version's bytes equal to kio's.
"""

import struct
from typing import Any

from kio.schema.fetch.v18 import request as fields_v18

from kraft.protocol.framing import compact_string
from kraft.varint import uvarint

FIRST_VERSION, LAST_VERSION = 13, 18
REPLICA_STATE_FROM = 15  # ReplicaState (KIP-903) replaces ReplicaId
DIRECTORY_FROM = 17  # the partition's ReplicaDirectoryId (KIP-853)
HIGH_WATERMARK_FROM = 18  # the partition's HighWatermark (KIP-1166)
NO_HIGH_WATERMARK = fields_v18.FetchPartition.__dataclass_fields__["high_watermark"].default  # none given

_I32 = struct.Struct(">i")
_SESSION = struct.Struct(">iiibii")  # max wait, min bytes, max bytes, isolation level, session id and epoch
_PARTITION = struct.Struct(">iiqiqi")  # index, leader epoch, fetch offset, last fetched epoch, log start, max bytes
_HIGH_WATERMARK = struct.Struct(">q")
_REPLICA_STATE = struct.Struct(">iqb")  # replica id, replica epoch, no tagged fields
_DIRECTORY_TAG = b"\x00\x10"  # tag 0, 16 bytes
_HIGH_WATERMARK_TAG = b"\x01\x08"  # tag 1, 8 bytes
_REPLICA_STATE_TAG = b"\x01" + bytes([_REPLICA_STATE.size])  # tag 1, 13 bytes
_ZERO_UUID = bytes(16)


def encode(request: Any) -> bytes:
    """The body of a Fetch request of v13-v18 (a kio FetchRequest of that version)."""
    version = type(request).__version__
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Fetch v{version} is not written here (v{FIRST_VERSION}-v{LAST_VERSION} are)")
    out = bytearray()
    if version < REPLICA_STATE_FROM:
        out += _I32.pack(request.replica_id)
    out += _SESSION.pack(round(request.max_wait.total_seconds() * 1000), request.min_bytes, request.max_bytes,
                         request.isolation_level, request.session_id, request.session_epoch)
    out += uvarint(len(request.topics) + 1)
    for topic in request.topics:
        out += topic.topic_id.bytes if topic.topic_id is not None else _ZERO_UUID
        out += uvarint(len(topic.partitions) + 1)
        for p in topic.partitions:
            out += _PARTITION.pack(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                                   p.log_start_offset, p.partition_max_bytes)
            out += _partition_tags(p, version)
        out += b"\x00"  # the topic's tagged fields
    out += uvarint(len(request.forgotten_topics_data) + 1)
    for forgotten in request.forgotten_topics_data:
        out += forgotten.topic_id.bytes if forgotten.topic_id is not None else _ZERO_UUID
        out += uvarint(len(forgotten.partitions) + 1)
        for index in forgotten.partitions:
            out += _I32.pack(index)
        out += b"\x00"
    out += compact_string(request.rack_id)
    tags = []
    if request.cluster_id is not None:
        cluster_id = compact_string(request.cluster_id)
        tags.append(b"\x00" + uvarint(len(cluster_id)) + cluster_id)
    if version >= REPLICA_STATE_FROM:
        state = request.replica_state
        if state.replica_id != -1 or state.replica_epoch != -1:
            tags.append(_REPLICA_STATE_TAG + _REPLICA_STATE.pack(state.replica_id, state.replica_epoch, 0))
    out += uvarint(len(tags))
    for tag in tags:
        out += tag
    return bytes(out)


def _partition_tags(p: Any, version: int) -> bytes:
    tags = []
    if version >= DIRECTORY_FROM and p.replica_directory_id is not None:
        tags.append(_DIRECTORY_TAG + p.replica_directory_id.bytes)
    if version >= HIGH_WATERMARK_FROM and p.high_watermark != NO_HIGH_WATERMARK:
        tags.append(_HIGH_WATERMARK_TAG + _HIGH_WATERMARK.pack(p.high_watermark))
    if not tags:
        return b"\x00"
    return uvarint(len(tags)) + b"".join(tags)
