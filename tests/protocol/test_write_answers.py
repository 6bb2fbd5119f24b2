"""The OffsetCommit and (Incremental)AlterConfigs answers written by hand
(protocol/write_answers.py) are, frame for frame, what kio writes from Kafka's schemas, in
every version kraft serves, for random answers."""

import random
from datetime import timedelta

import pytest

from kraft.protocol import ErrorCode, write_answers
from kraft.protocol.build import build_response
from kraft.protocol.regions import encode_response_segments

NAMES = ["t", "", "topic-with-a-longer-name", "ünïcödé-тема", "x" * 300]


def frame(response) -> bytes:
    segments = encode_response_segments(12345, response)
    assert all(isinstance(s, bytes) for s in segments)
    return b"".join(segments)


def random_commit_answer(rng: random.Random) -> list[tuple[str, list[tuple[int, int]]]]:
    return [(rng.choice(NAMES), [(rng.randrange(2**31), rng.choice([0, 25, 22, 27, 29, 16]))
                                 for _ in range(rng.randrange(0, 4))])
            for _ in range(rng.randrange(0, 4))]


@pytest.mark.parametrize("version", range(2, 10))
def test_an_offset_commit_answer_is_kios_bytes(version):
    rng = random.Random(version)
    for _ in range(50):
        topics = random_commit_answer(rng)
        kio = build_response(8, version, {"throttle_time": timedelta(0), "topics": [
            {"name": name, "partitions": [{"partition_index": i, "error_code": ErrorCode(e)} for i, e in partitions]}
            for name, partitions in topics]})
        assert frame(write_answers.offset_commit(version, topics)) == frame(kio)


@pytest.mark.parametrize(("api_key", "version"), [(33, 0), (33, 1), (33, 2), (44, 0), (44, 1)])
def test_an_alter_configs_answer_is_kios_bytes(api_key, version):
    rng = random.Random(api_key * 10 + version)
    for _ in range(50):
        resources = [(rng.choice([0, 40, 42, 29]), rng.choice([None, "", "Unknown config name: x", "ошибка"]),
                      rng.choice([2, 4, 8]), rng.choice(NAMES)) for _ in range(rng.randrange(0, 4))]
        kio = build_response(api_key, version, {"throttle_time": timedelta(0), "responses": [
            {"error_code": ErrorCode(e), "error_message": message, "resource_type": kind, "resource_name": name}
            for e, message, kind, name in resources]})
        assert frame(write_answers.alter_configs(api_key, version, resources)) == frame(kio)
