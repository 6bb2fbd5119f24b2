"""Walking batches straight from a file through a reused buffer."""

import os
import struct
import tracemalloc

import pytest

from kraft.records import CorruptRecordError, IncompleteBatchError, build_batch, iter_file_batches


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    offset = 0
    data = b""
    for n in (1, 50, 3, 400, 2):
        data += build_batch([(None, b"x" * 100)] * n, base_offset=offset)
        offset += n
    path.write_bytes(data)
    return path, data


def walk(path, **kw):
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(iter_file_batches(fd, **kw))
    finally:
        os.close(fd)


def test_small_chunks_still_yield_every_batch_including_ones_larger_than_the_buffer(segment):
    path, data = segment
    headers = walk(path, chunk_size=256, expected_offset=0)
    assert [h.base_offset for h in headers] == [0, 1, 51, 54, 454]
    assert headers[-1].position + headers[-1].size == len(data)


def test_a_region_starting_mid_file(segment):
    path, _ = segment
    first_two = walk(path)[:2]
    start = first_two[1].position
    assert [h.base_offset for h in walk(path, start=start)] == [1, 51, 54, 454]


def test_torn_file_tail(segment):
    path, data = segment
    path.write_bytes(data[:-7])
    with pytest.raises(IncompleteBatchError) as err:
        walk(path, chunk_size=300)
    last_start = walk(path, partial_tail="stop")[-1]
    assert err.value.position == last_start.position + last_start.size
    assert len(walk(path, partial_tail="stop")) == 4


def test_corruption_in_file_names_absolute_position(segment):
    path, data = segment
    headers = walk(path)
    bad = bytearray(data)
    bad[headers[3].position + 100] ^= 0x40
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptRecordError) as err:
        walk(path, chunk_size=1024)
    assert err.value.position == headers[3].position


def test_a_corrupt_length_is_reported_from_the_header_without_allocating_what_it_claims(tmp_path):
    """A length field claiming 2 GB, followed by more than one read chunk of real data."""
    good = build_batch([(None, b"x" * 100)])
    bad = bytearray(build_batch([(None, b"y" * 100)] * 10, base_offset=1))
    struct.pack_into(">i", bad, 8, 2**31 - 1)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(good + bad)
    chunk = 256
    assert len(bad) > 2 * chunk
    tracemalloc.start()
    try:
        with pytest.raises(IncompleteBatchError, match=f"batch of {2**31 + 11} bytes but only {len(bad)} bytes left") as err:
            walk(path, chunk_size=chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.position == len(good)
    assert peak < 1 << 20, f"the walk allocated {peak} bytes"
    assert [h.base_offset for h in walk(path, chunk_size=chunk, partial_tail="stop")] == [0]
    # A region's end bounds a batch as the file's end does.
    whole = build_batch([(None, b"z" * 100)] * 3, base_offset=1)
    path.write_bytes(good + whole)
    with pytest.raises(IncompleteBatchError, match=f"batch of {len(whole)} bytes but only 100 bytes left in the region"):
        walk(path, end=len(good) + 100)
