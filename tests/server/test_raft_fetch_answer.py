"""The Raft Fetch answer written by hand (server/apis/raft_fetch_answer.py) is, byte for byte, what kio
writes from Kafka's schema for every version a KRaft leader serves, records as a file region
included."""

import os
from dataclasses import replace

import pytest
from kio.schema.fetch.v13.response import AbortedTransaction

from kraft.protocol import ErrorCode
from kraft.protocol.build import convert
from kraft.protocol.codec import decode_response, response_class
from kraft.protocol.regions import Encoded, encode_response_segments, is_region
from kraft.raft import messages as m
from kraft.server.apis import raft_fetch_answer
from kraft.server.apis.raft_versions import ABSENT, FETCH

VERSIONS = range(raft_fetch_answer.FIRST_VERSION, raft_fetch_answer.LAST_VERSION + 1)
ENDPOINT = (2, "controller-2.example", 9093)


class Region:
    """Bytes of a real file, as storage's FileRegion gives them (sent with sendfile)."""

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd, self.position, self.length = fd, position, length

    def fileno(self) -> int:
        return self.fd


@pytest.fixture
def segment_file(tmp_path):
    fd = os.open(tmp_path / "segment", os.O_RDWR | os.O_CREAT)
    os.write(fd, bytes(range(256)) * 8)
    yield fd
    os.close(fd)


def frame(segments: list) -> bytes:
    return b"".join(s if isinstance(s, bytes) else os.pread(s.fileno(), s.length, s.position) for s in segments)


def answers(fd: int) -> dict[str, m.FetchResponse]:
    base = {"leader_id": 2, "epoch": 7, "high_watermark": 1234, "log_start_offset": 100}
    made = {
        "parked, nothing new": m.fetch_response(ErrorCode.none, **base),
        "records in the file": m.fetch_response(ErrorCode.none, **base, records=Region(fd, 17, 1000)),
        "an empty region": m.fetch_response(ErrorCode.none, **base, records=Region(fd, 0, 0)),
        "records as bytes": m.fetch_response(ErrorCode.none, **base, records=b"\x01\x02\x03" * 50),
        "a diverging epoch": m.fetch_response(ErrorCode.none, **base, diverging=(987, 5)),
        "a snapshot to fetch": m.fetch_response(ErrorCode.none, **base, snapshot_id=(2**40, 6)),
        "not the leader, none known": m.fetch_response(ErrorCode.not_leader_or_follower, leader_id=-1, epoch=-1),
        "a fenced epoch": m.fetch_response(ErrorCode.fenced_leader_epoch, leader_id=3, epoch=9),
        "another cluster": m.fetch_response(ErrorCode.none, leader_id=2, epoch=7,
                                            top_error=ErrorCode.inconsistent_cluster_id),
        "a long records length": m.fetch_response(ErrorCode.none, **base, records=Region(fd, 0, 2048)),
    }
    plain = made["parked, nothing new"]
    p = plain.responses[0].partitions[0]
    with_aborted = replace(p, aborted_transactions=(AbortedTransaction(producer_id=5, first_offset=6),))
    made["aborted transactions"] = replace(plain, responses=(replace(plain.responses[0], partitions=(with_aborted,)),))
    made["no partition"] = replace(plain, responses=())
    return made


def kio_bytes(answer: m.FetchResponse, version: int, endpoints: list) -> bytes:
    """What the generic path writes: the answer converted by kio to `version`, then encoded."""
    given = {"node_endpoints": [{"node_id": n, "host": h, "port": p} for n, h, p in endpoints]}
    converted = convert(answer, response_class(FETCH, version), ABSENT[FETCH], given if version >= 16 else None)
    return frame(encode_response_segments(41, converted))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("named", [False, True], ids=["no endpoint", "the leader's endpoint"])
def test_every_answer_is_kios_bytes(segment_file, version, named):
    endpoints = [ENDPOINT] if named and version >= raft_fetch_answer.ENDPOINTS_FROM else []
    for name, answer in answers(segment_file).items():
        encoded = raft_fetch_answer.encode(answer, version, endpoints)
        mine = frame(encode_response_segments(41, encoded))
        assert mine == kio_bytes(answer, version, endpoints), f"{name} in v{version}"


@pytest.mark.parametrize("version", VERSIONS)
def test_records_stay_a_file_region(segment_file, version):
    """The records are sent from the file (sendfile), never read into the process."""
    region = Region(segment_file, 17, 1000)
    answer = m.fetch_response(ErrorCode.none, leader_id=2, epoch=7, high_watermark=5, log_start_offset=0,
                              records=region)
    segments = encode_response_segments(41, raft_fetch_answer.encode(answer, version))
    assert [s for s in segments if is_region(s)] == [region]
    correlation_id, decoded = decode_response(memoryview(frame(segments))[4:], response_class(FETCH, version))
    assert correlation_id == 41
    assert decoded.responses[0].partitions[0].records == os.pread(segment_file, 1000, 17)


def test_a_version_no_leader_serves_is_refused():
    answer = m.fetch_response(ErrorCode.none, leader_id=2, epoch=7)
    for version in (12, 19):
        with pytest.raises(ValueError, match=f"v{version}"):
            raft_fetch_answer.encode(answer, version)


def test_the_header_goes_before_a_body_written_by_hand():
    segments = encode_response_segments(7, Encoded([b"body", Region(0, 0, 3), b"end"], flexible=True))
    assert segments[0] == (4 + 1 + 4 + 3 + 3).to_bytes(4, "big") + (7).to_bytes(4, "big") + b"\x00body"
    assert segments[2] == b"end"
