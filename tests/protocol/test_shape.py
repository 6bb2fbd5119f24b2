"""The shape check: no count or length in a frame reaches kio's reader unless it fits the
bytes that came with it, and the check reads every message exactly as kio does."""

import random
import struct
from datetime import timedelta

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.fetch_snapshot.v0.response import FetchSnapshotResponse

from kraft.cli.fuzz import message_classes
from kraft.cli.fuzz_inputs import random_entity
from kraft.protocol import (
    ErrorCode,
    MalformedFrameError,
    decode_request,
    decode_response,
    encode_response,
)
from kraft.protocol.build import build_request
from kraft.protocol.codec import decode, encode
from kraft.protocol.shape import checked_end, shape
from kraft.varint import uvarint


def request_frame(api_key: int, version: int, body: bytes, client_id: bytes | None = None) -> bytes:
    """A request frame body: header v2 (v1 for non-flexible versions), then `body`."""
    header = struct.pack(">hhi", api_key, version, 7)
    header += (
        struct.pack(">h", -1)
        if client_id is None
        else struct.pack(">h", len(client_id)) + client_id
    )
    if load_request_schema(api_key, version).__flexible__:
        header += b"\x00"
    return header + body


def test_the_32_byte_metadata_request_that_aborted_a_node_is_refused_naming_the_field():
    """Issue 14: a compact topic count of 2^32-2 made kio allocate 34 GB and abort."""
    frame = request_frame(3, 12, uvarint(0xFFFFFFFF) + bytes(5))
    with pytest.raises(
        MalformedFrameError,
        match=r"metadata v12 request: MetadataRequest\.topics: 4294967294 "
        r"elements of at least 18 bytes at byte 11 cannot fit",
    ):
        decode_request(frame)


@pytest.mark.parametrize(
    ("api", "body", "reason"),
    [
        pytest.param(
            (52, 0),
            uvarint(23) + b"c" * 22 + uvarint(0xFFFFFFF0),
            r"VoteRequest\.topics: 4294967279 elements",
            id="vote-topic-count",
        ),
        pytest.param(
            (55, 1),
            uvarint(2) + uvarint(2) + b"t" + uvarint(0xFFFFFFF0) + bytes(8),
            r"TopicData\.partitions: 4294967279 elements",
            id="describe-quorum-int-array",
        ),
        pytest.param(
            (3, 1),
            struct.pack(">i", 0x7FFFFFF0) + bytes(5),
            r"MetadataRequest\.topics: 2147483632 elements",
            id="legacy-array-count",
        ),
        pytest.param(
            (3, 1),
            struct.pack(">ih", 1, 0x7FFF) + b"abc",
            r"MetadataRequestTopic\.name: 32767 bytes",
            id="legacy-string-length",
        ),
        pytest.param(
            (3, 12),
            uvarint(2) + bytes(16) + uvarint(0xFFFFFF) + b"ab",
            r"MetadataRequestTopic\.name: 16777214 bytes",
            id="compact-string-length",
        ),
        pytest.param((3, 1), struct.pack(">i", -7), r"negative length -7", id="negative-count"),
        pytest.param(
            (3, 0),
            struct.pack(">i", -1),
            r"MetadataRequest\.topics: null at byte 10 where the schema",
            id="null-where-not-nullable",
        ),
        pytest.param(
            (3, 12), b"\xff\xff\xff\xff\xff\x01", r"longer than 5 bytes", id="six-byte-varint"
        ),
        pytest.param((3, 12), b"\x80\x80", r"runs past the end", id="cut-varint"),
        pytest.param(
            (3, 12),
            uvarint(1) + b"\x00\x00" + uvarint(1) + uvarint(9) + uvarint(0xFFFF) + b"ab",
            r"tagged field 9 of 65535 bytes",
            id="tag-longer-than-the-frame",
        ),
    ],
)
def test_counts_and_lengths_that_do_not_fit_are_refused_before_kio_reads_them(api, body, reason):
    with pytest.raises(MalformedFrameError, match=reason):
        decode_request(request_frame(*api, body))


def test_a_known_tag_must_hold_exactly_what_it_declares():
    """kio reads a known tag's value and goes on from its end; the tolerant reader jumps to
    the declared end. Were they allowed to differ, kio would read bytes the check skipped."""
    request = build_request(
        1,
        13,
        {
            "replica_id": 2,
            "max_wait": timedelta(0),
            "min_bytes": 1,
            "topics": [],
            "forgotten_topics_data": [],
        },
    )
    body = bytearray(encode(request))
    assert (
        body[-1] == 0
    )  # no tagged fields yet: add cluster_id (tag 0) declaring 9 bytes, holding 4
    body[-1:] = uvarint(1) + uvarint(0) + uvarint(9) + uvarint(4) + b"abc" + bytes(5)
    with pytest.raises(
        MalformedFrameError, match=r"tagged field 0 at byte \d+ declares 9 bytes but holds 4"
    ):
        decode(type(request), bytes(body))


def test_a_struct_null_marker_must_be_minus_one_or_not_negative():
    """kio takes only -1 as null, Kafka and the tolerant reader any negative: refused."""
    frame = request_frame(
        75, 0, uvarint(1) + struct.pack(">i", 5) + b"\xfb" + uvarint(2) + b"a" + bytes(6)
    )
    with pytest.raises(MalformedFrameError, match="null marker -5"):
        decode_request(frame)


def test_a_hostile_peers_response_is_refused_on_the_zero_copy_path_too():
    response = FetchSnapshotResponse(
        throttle_time=timedelta(0), error_code=ErrorCode.none, topics=()
    )
    frame = bytearray(encode_response(3, response)[4:])
    frame[-2:] = uvarint(0xFFFFFFFF) + b"\x00"  # topics: 2^32-2 of them
    for zero_copy in (False, True):
        with pytest.raises(
            MalformedFrameError, match=r"FetchSnapshotResponse\.topics: 4294967294 elements"
        ):
            decode_response(bytes(frame), FetchSnapshotResponse, zero_copy=zero_copy)


def test_every_message_class_kio_has_checks_to_the_end_its_writer_wrote():
    """The check's layouts agree with kio's for every request and response, every version,
    on random messages: the check ends exactly where kio's writer ended and its reader ends."""
    rng = random.Random(14)
    for _, cls in message_classes():
        for _ in range(3):
            body = encode(random_entity(cls, rng))
            assert checked_end(cls, body) == len(body), cls
            assert decode(cls, body)[1] == len(body), cls


def test_fixed_width_runs_are_one_step_and_a_struct_knows_its_fewest_bytes():
    fetch_partition = load_request_schema(1, 13).__dataclass_fields__["topics"].type.__args__[0]
    partitions = fetch_partition.__dataclass_fields__["partitions"].type.__args__[0]
    assert (
        shape(partitions).min_size == 4 + 4 + 8 + 4 + 8 + 4 + 1
    )  # six fixed fields and the tag count
    assert shape(load_response_schema(18, 0)).min_size == 2 + 4
