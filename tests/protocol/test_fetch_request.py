"""The Fetch request written by hand (protocol/fetch_request.py), and every request header, are
byte for byte what kio writes from Kafka's schema: for every version a follower may send
(v13-v18), with and without each tagged field, and for random requests of each version."""

import uuid
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.static.primitive import i32, i64

from kraft.protocol import UnsupportedVersionError
from kraft.protocol import fetch_request as wire
from kraft.protocol.build import build_request
from kraft.protocol.codec import FETCH, decode_request, encode, encode_request, request_class, request_header
from kraft.protocol.framing import frame
from kraft.raft import messages as m
from kraft.server.runtime.fetch_batch import combine

VERSIONS = range(wire.FIRST_VERSION, wire.LAST_VERSION + 1)
OFFSETS = m.LogPartition("__consumer_offsets", uuid.UUID("a7e83931-2456-4d62-b12f-ad185ef616bc"), 3)


def kio_frame(request, correlation_id: int, client_id: str | None) -> bytes:
    """What the generic path writes: kio's header entity and body, each through kio's writer."""
    cls = type(request)
    header = cls.__header_schema__(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                                   correlation_id=correlation_id, client_id=client_id)
    return frame(encode(header), encode(request))


def partition(index: int, version: int, **tags) -> dict:
    p = {"partition": index, "current_leader_epoch": 7, "fetch_offset": 12345 + index, "last_fetched_epoch": 6,
         "log_start_offset": 100, "partition_max_bytes": 1 << 20}
    return p | {k: v for k, v in tags.items() if version >= {"replica_directory_id": 17, "high_watermark": 18}[k]}


def requests(version: int) -> dict[str, object]:
    """Requests of `version` in every shape the tagged fields give, as a follower or a consumer sends them."""
    replica = {"replica_id": 2} if version < wire.REPLICA_STATE_FROM else {
        "replica_state": {"replica_id": 2, "replica_epoch": -1}}
    base = {"max_wait": timedelta(milliseconds=500), "min_bytes": 1, "max_bytes": 1 << 21, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [], **replica,
            "topics": [{"topic_id": m.METADATA.topic_id, "partitions": [partition(0, version)]}]}
    two_topics = [{"topic_id": m.METADATA.topic_id, "partitions": [partition(0, version, high_watermark=90)]},
                  {"topic_id": OFFSETS.topic_id, "partitions": [partition(3, version, high_watermark=-1),
                                                                partition(4, version)]}]
    shapes = {
        "one partition, no tagged field": base,
        "a cluster id": base | {"cluster_id": "clusterid-abcdefghij"},
        "an empty cluster id": base | {"cluster_id": ""},
        "a non-ascii cluster id": base | {"cluster_id": "grappe-\u00e9\u6f22"},
        "several topics and partitions, high watermarks given and unknown": base | {"topics": two_topics},
        "a directory id": base | {"topics": [{"topic_id": m.METADATA.topic_id, "partitions": [
            partition(0, version, replica_directory_id=uuid.UUID(int=99), high_watermark=2**40)]}]},
        "the zero directory id": base | {"topics": [{"topic_id": m.METADATA.topic_id, "partitions": [
            partition(0, version, replica_directory_id=uuid.UUID(int=0))]}]},
        "no topic": base | {"topics": []},
        "a topic with no partition, a null topic id": base | {"topics": [{"topic_id": None, "partitions": []}]},
        "a consumer's: session, isolation, forgotten topics, rack": base | {
            "isolation_level": 1, "session_id": 77, "session_epoch": 3, "rack_id": "rack-1",
            "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "forgotten_topics_data": [{"topic_id": OFFSETS.topic_id, "partitions": [1, 2, 2**31 - 1]},
                                      {"topic_id": m.METADATA.topic_id, "partitions": []}]},
        "a broker's replica epoch": base | {"replica_state": {"replica_id": -1, "replica_epoch": 2**33}},
        "a long max wait, a sub-millisecond one rounded": base | {"max_wait": timedelta(microseconds=2_500_600)},
        "a long cluster id (two-byte length)": base | {"cluster_id": "c" * 300},
    }
    return {name: build_request(FETCH, version, {k: v for k, v in data.items() if k in _fields(version)})
            for name, data in shapes.items()}


def _fields(version: int) -> set[str]:
    return set(request_class(FETCH, version).__dataclass_fields__)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_shape_of_every_version_is_kios_bytes(version):
    for name, request in requests(version).items():
        for client_id in ("kraft-2", None):
            assert encode_request(request, 41, client_id) == kio_frame(request, 41, client_id), f"{name} in v{version}"


@pytest.mark.parametrize("version", VERSIONS)
def test_kios_reader_reads_back_the_request_written(version):
    """The leader's reader (kio's, native) gets what the follower meant, the tagged fields included."""
    for name, request in requests(version).items():
        if name in ("the zero directory id", "a long max wait, a sub-millisecond one rounded"):
            continue  # kio reads the zero id as None, its absent value, and whole milliseconds: kio's bytes, above
        header, read = decode_request(memoryview(encode_request(request, 9, "kraft-2"))[4:])
        assert (header.correlation_id, header.client_id, read) == (9, "kraft-2", request), f"{name} in v{version}"


def test_the_followers_own_fetch_is_kios_bytes():
    """What FetchBatcher sends: the cores' Fetches combined, each with its high watermark (v18)."""
    meta = m.fetch_request("clusterid-abcdefghij", 2, 3, 100, 3, 0, 500, 1 << 20, high_watermark=90)
    offsets = m.fetch_request("clusterid-abcdefghij", 2, 3, 200, 3, 0, 500, 1 << 20, where=OFFSETS)
    for request in (meta, offsets, combine([meta, offsets])):
        assert encode_request(request, 7, "kraft-2") == kio_frame(request, 7, "kraft-2")


@given(st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_requests_of_every_version_are_kios_bytes(data):
    version = data.draw(st.sampled_from(VERSIONS))
    request = data.draw(st.from_type(request_class(FETCH, version)))
    client_id = data.draw(st.none() | st.text(max_size=20))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    assert encode_request(request, correlation_id, client_id) == kio_frame(request, correlation_id, client_id)


def _request_classes() -> list[type]:
    found = []
    for key in api_key_map:
        for version in range(0, 30):
            try:
                found.append(request_class(key, version))
            except UnsupportedVersionError:
                continue
    return found


@pytest.mark.parametrize("client_id", [None, "", "kraft-2", "cli\u00e9nt-\u6f22"])
def test_every_request_header_is_kios_bytes(client_id):
    classes = _request_classes()
    assert len(classes) > 300  # every API kio knows, in each of its versions
    for cls in classes:
        kio_header = cls.__header_schema__(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                                           correlation_id=-5, client_id=client_id)
        mine = request_header(cls.__api_key__, cls.__version__, -5, client_id, cls.__header_schema__.__flexible__)
        assert mine == encode(kio_header), cls


def test_a_version_outside_the_range_is_refused_here_and_kio_writes_it():
    older = build_request(FETCH, 12, {"replica_id": 2, "max_wait": timedelta(milliseconds=500), "min_bytes": 1,
                                      "topics": [{"topic": "t", "partitions": [
                                          {"partition": 0, "fetch_offset": i64(1), "partition_max_bytes": i32(5)}]}],
                                      "forgotten_topics_data": []})
    with pytest.raises(ValueError, match="v12"):
        wire.encode(older)
    assert encode_request(older, 3, "c") == kio_frame(older, 3, "c")
