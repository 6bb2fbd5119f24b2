"""Headers, message encoding, and tolerance of tagged fields we do not know."""

import datetime
import struct
import uuid

import pytest
from kafka.protocol.metadata import MetadataRequest as KpMetadataRequest
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i32, i64

from kraft.protocol import (
    MalformedFrameError,
    UnsupportedVersionError,
    decode_request,
    encode_request,
)


def test_our_request_bytes_equal_kafka_pythons_for_the_same_request():
    ours = encode_request(
        MetadataRequest(topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="t"),),
                        allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        correlation_id=7,
        client_id="c",
    )
    theirs = KpMetadataRequest(
        version=12,
        topics=[KpMetadataRequest.MetadataRequestTopic(version=12, topic_id=uuid.UUID(int=0), name="t")],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    theirs.with_header(correlation_id=7, client_id="c")
    assert ours == bytes(theirs.encode(header=True, framed=True))


def fetch_request():
    return FetchRequest(
        replica_id=i32(2),
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=i32(1),
        topics=(
            FetchTopic(
                topic_id=uuid.UUID(int=5),
                partitions=(FetchPartition(partition=i32(0), fetch_offset=i64(10), partition_max_bytes=i32(1 << 20),
                                           last_fetched_epoch=i32(3)),),
            ),
        ),
        forgotten_topics_data=(),
    )


def test_request_round_trip_through_header_and_body():
    raw = encode_request(fetch_request(), correlation_id=99, client_id="replica-2")
    header, request = decode_request(raw[4:])
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        1, 13, 99, "replica-2",
    )
    assert request == fetch_request()


def _uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def test_unknown_tagged_fields_are_skipped_at_top_level_and_nested():
    raw = bytearray(encode_request(fetch_request(), correlation_id=1, client_id=None)[4:])
    # The request ends with: ..., rack_id, tagged fields(0). Replace the final empty tag
    # section with one carrying an unknown tag 77 of 3 bytes.
    assert raw[-1] == 0
    raw[-1:] = _uvarint(1) + _uvarint(77) + _uvarint(3) + b"abc"
    header, request = decode_request(bytes(raw))
    assert request == fetch_request()


def test_unknown_tag_inside_a_nested_struct_is_skipped():
    raw = encode_request(fetch_request(), correlation_id=1, client_id=None)[4:]
    # The partition struct ends with partition_max_bytes (1<<20) then its own empty tags.
    marker = struct.pack(">i", 1 << 20) + b"\x00"
    at = raw.index(marker) + 4
    patched = raw[:at] + _uvarint(1) + _uvarint(9) + _uvarint(2) + b"zz" + raw[at + 1 :]
    header, request = decode_request(patched)
    assert request == fetch_request()


def test_an_unknown_tag_longer_than_the_frame_is_malformed_and_says_so():
    raw = bytearray(encode_request(fetch_request(), correlation_id=1, client_id=None)[4:])
    assert raw[-1] == 0
    raw[-1:] = _uvarint(1) + _uvarint(77) + _uvarint(200) + b"ab"  # claims 200 bytes, 2 follow
    with pytest.raises(MalformedFrameError, match=f"tagged field 77 of 200 bytes at byte {len(raw) - 2} runs past"):
        decode_request(bytes(raw))


def test_garbage_body_is_malformed_not_a_crash():
    raw = encode_request(fetch_request(), correlation_id=1, client_id=None)[4:]
    with pytest.raises(MalformedFrameError):
        decode_request(raw[:-9])
    with pytest.raises(MalformedFrameError, match="too short"):
        decode_request(b"\x00")


def test_bytes_after_the_request_are_ignored_as_kafka_ignores_them():
    """Kafka's AbstractRequest.parseRequest reads the message and never looks at what is
    left; confluent-kafka's admin client sends Metadata v13 with three bytes over."""
    raw = encode_request(fetch_request(), correlation_id=5, client_id="c")[4:]
    header, request = decode_request(raw + b"\x00\x01\x02")
    assert header.correlation_id == 5 and request == fetch_request()


def test_unknown_api_key_and_version_are_unsupported():
    with pytest.raises(UnsupportedVersionError, match="API key 9999"):
        decode_request(struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff")
    with pytest.raises(UnsupportedVersionError, match="fetch has no such schema"):
        decode_request(struct.pack(">hhi", 1, 99, 1) + b"\xff\xff")
