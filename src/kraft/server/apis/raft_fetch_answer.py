"""The Raft Fetch answer written as Kafka's bytes, in every version a KRaft leader serves (13-18).

A leader answers a Fetch from every follower and observer on every commit, and again when
each one's wait runs out: with a thousand brokers on one leader, that is thousands of answers
a second. Through kio, each cost about 235 us (the core's entity converted to the version
asked, walked for file regions, then encoded field by field, measured in bench/fleet_bench.py);
written here straight from the core's entity, about 15 us. The layout is Fetch's from Kafka's
schema (FetchResponse.json), the same from v13 to v18 but for NodeEndpoints (v16 on; v18,
KIP-1166, changes the request alone):

    header v1: correlation id, tagged fields
    throttle_time_ms i32, error_code i16, session_id i32,
    responses [topic_id uuid, partitions [partition_index i32, error_code i16,
        high_watermark i64, last_stable_offset i64, log_start_offset i64,
        aborted_transactions [producer_id i64, first_offset i64]?, preferred_read_replica i32,
        records?, tagged: 0 diverging_epoch, 1 current_leader, 2 snapshot_id]],
    tagged: 0 node_endpoints [node_id i32, host string, port i32, rack string?]

Arrays and strings are compact (length + 1 as an unsigned varint, 0 for null); a tagged field
is written only when it differs from its default, as Kafka (and kio) write them. The records
stay a file region, sent with sendfile, as the generic path sends them.
tests/server/test_raft_fetch_answer.py holds every version's bytes equal to kio's.
"""

import struct
from collections.abc import Sequence
from typing import Any, cast

from kraft.protocol.framing import compact_string
from kraft.protocol.regions import Encoded, Region, Segment, is_region
from kraft.raft import messages as m
from kraft.varint import uvarint

FIRST_VERSION, LAST_VERSION = 13, 18
ENDPOINTS_FROM = 16  # NodeEndpoints is a field from v16 (KIP-951)
_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, last stable offset, log start offset
_EPOCH_END = struct.Struct(">iqb")  # epoch, end offset, no tagged fields
_LEADER = struct.Struct(">iib")  # leader id, leader epoch, no tagged fields
_SNAPSHOT = struct.Struct(">qib")  # end offset, epoch, no tagged fields
_ABORTED = struct.Struct(">qqb")  # producer id, first offset, no tagged fields
_I32 = struct.Struct(">i")


def encode(answer: m.FetchResponse, version: int, endpoints: Sequence[tuple[int, str, int]] = ()) -> Encoded:
    """The core's answer (its Fetch entity, raft/messages.py) as `version`'s bytes; `endpoints` (node id, host,
    port) go in NodeEndpoints from v16 (the caller gives none to a version that names none)."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Fetch v{version} is not one a KRaft leader answers")
    body: list[Segment] = []
    out = bytearray(_HEAD.pack(int(answer.throttle_time.total_seconds() * 1000), answer.error_code,
                               answer.session_id))
    out += uvarint(len(answer.responses) + 1)
    for topic in answer.responses:
        out += topic.topic_id.bytes if topic.topic_id is not None else bytes(16)
        out += uvarint(len(topic.partitions) + 1)
        for p in topic.partitions:
            out += _PARTITION.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                   p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00"
            else:
                out += uvarint(len(aborted) + 1)
                for a in aborted:
                    out += _ABORTED.pack(a.producer_id, a.first_offset, 0)
            out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += b"\x00"
            elif is_region(records):
                region = cast(Region, records)
                out += uvarint(region.length + 1)
                if region.length:
                    body.append(bytes(out))
                    body.append(region)
                    out = bytearray()
            else:
                out += uvarint(len(records) + 1)
                out += records
            out += _partition_tags(p)
        out += b"\x00"  # the topic's tagged fields
    if version >= ENDPOINTS_FROM and endpoints:
        nodes = bytearray(uvarint(len(endpoints) + 1))
        for node_id, host, port in endpoints:
            nodes += _I32.pack(node_id) + compact_string(host) + _I32.pack(port) + b"\x00\x00"  # rack null, no tags
        out += b"\x01\x00" + uvarint(len(nodes)) + nodes  # one tagged field, tag 0
    else:
        out += b"\x00"
    body.append(bytes(out))
    return Encoded(body, flexible=True)


def _partition_tags(p: Any) -> bytes:
    tags = []
    diverging, leader, snapshot = p.diverging_epoch, p.current_leader, p.snapshot_id
    if diverging.epoch != -1 or diverging.end_offset != -1:
        tags.append(b"\x00\x0d" + _EPOCH_END.pack(diverging.epoch, diverging.end_offset, 0))
    if leader.leader_id != -1 or leader.leader_epoch != -1:
        tags.append(b"\x01\x09" + _LEADER.pack(leader.leader_id, leader.leader_epoch, 0))
    if snapshot.end_offset != -1 or snapshot.epoch != -1:
        tags.append(b"\x02\x0d" + _SNAPSHOT.pack(snapshot.end_offset, snapshot.epoch, 0))
    return uvarint(len(tags)) + b"".join(tags)
