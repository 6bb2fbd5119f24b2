"""Credentials out of what the client listener serves, on their own: a batch rewritten keeps
every offset, timestamp, epoch and producer field and every other record's bytes, its CRC
valid; a Fetch's region without credentials is the very region (sendfile), one with them
pieces of the file around the rewritten batch, each byte scanned once; a snapshot's chunks,
in the redacted snapshot's positions, add up to the redacted snapshot."""

import os
from pathlib import Path

import pytest

from kraft.metadata import decode_record, encode_record
from kraft.metadata.records import ConfigRecord, UserScramCredentialRecord
from kraft.metadata.redaction import redacted
from kraft.protocol.codec import decode_response, response_class
from kraft.protocol.regions import Pieces, encode_response_segments
from kraft.raft import messages as m
from kraft.records import Compression, RecordBatch, build_batch, crc_is_valid, read_batches
from kraft.server.apis.credential_redaction import CredentialRedaction
from kraft.storage import FileRegion
from kraft.storage.types import SharedFd

SALT, STORED, SERVER = b"s" * 32, b"K" * 64, b"V" * 64


def scram(name: str) -> bytes:
    return encode_record(UserScramCredentialRecord(name=name, mechanism=2, salt=SALT, stored_key=STORED,
                                                   server_key=SERVER, iterations=8192))


def config(value: str) -> bytes:
    return encode_record(ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value=value))


def batch(base: int, values: list[bytes], compression: Compression = Compression.NONE) -> bytearray:
    return build_batch([(None, v, (), 1_700_000_000_000 + i * 7) for i, v in enumerate(values)], base_offset=base,
                       partition_leader_epoch=5, compression=compression, timestamp=1_700_000_000_000,
                       producer_id=42, producer_epoch=3, base_sequence=9)


def only(data: bytes | bytearray) -> RecordBatch:
    [one] = list(read_batches(bytes(data)))
    return one


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_a_rewritten_batch_keeps_everything_but_the_secrets(compression):
    original = only(batch(100, [config("1"), scram("alice"), config("2"), scram("bob")], compression))
    rewritten = redacted(original)
    assert rewritten is not None and crc_is_valid(rewritten)
    new = only(rewritten)
    keep = ("base_offset", "partition_leader_epoch", "attributes", "last_offset_delta", "base_timestamp",
            "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count")
    assert [getattr(new.header, f) for f in keep] == [getattr(original.header, f) for f in keep]
    before, after = original.records(), new.records()
    assert [(r.offset, r.timestamp, r.key, r.headers) for r in after] == [
        (r.offset, r.timestamp, r.key, r.headers) for r in before]
    assert (after[0].value, after[2].value) == (before[0].value, before[2].value)  # others byte for byte
    for record, name in ((after[1], "alice"), (after[3], "bob")):
        decoded = decode_record(record.value)
        assert (decoded.name, decoded.mechanism, decoded.iterations) == (name, 2, 8192)
        assert (decoded.salt, decoded.stored_key, decoded.server_key) == (b"", b"", b"")
    assert SALT not in rewritten and STORED not in rewritten
    assert redacted(only(batch(0, [config("1")]))) is None  # nothing to do: none made


def file_of(tmp_path: Path, *batches: bytes | bytearray) -> tuple[SharedFd, list[int]]:
    """A segment file of the batches; their positions."""
    path = tmp_path / "00000000000000000000.log"
    positions, at = [], 0
    for b in batches:
        positions.append(at)
        at += len(b)
    path.write_bytes(b"".join(bytes(b) for b in batches))
    return SharedFd(os.open(path, os.O_RDONLY)), positions


def sent(data: FileRegion | Pieces | bytes) -> bytes:
    parts = data.parts if isinstance(data, Pieces) else (data,)
    return b"".join(p if isinstance(p, bytes) else os.pread(p.fileno(), p.length, p.position) for p in parts)


def test_a_fetch_without_credentials_is_the_region_itself_and_one_with_them_pieces_around_the_rewrite(tmp_path):
    batches = [batch(0, [config("a")]), batch(1, [scram("alice")]), batch(2, [config("b"), config("c")]),
               batch(4, [scram("bob"), config("d")]), batch(6, [config("e")])]
    fd, at = file_of(tmp_path, *batches)
    redaction = CredentialRedaction()
    clean = FileRegion(fd, at[2], at[3] - at[2])
    assert redaction.log_records(clean) is clean  # sendfile as before
    whole = FileRegion(fd, 0, at[4] + len(batches[4]))
    served = redaction.log_records(whole)
    assert isinstance(served, Pieces)
    assert [type(p).__name__ for p in served.parts] == ["FileRegion", "bytes", "FileRegion", "bytes", "FileRegion"]
    data = sent(served)
    assert len(served) == len(data) and SALT not in data and STORED not in data and SERVER not in data
    got = list(read_batches(data))  # every CRC checked
    assert [b.header.base_offset for b in got] == [0, 1, 2, 4, 6]
    assert [r.value for b in got for r in b.records()][2:4] == [config("b"), config("c")]
    assert redaction._segments[fd].ranges == [(0, len(whole))]  # scanned once; asked again, read from cache
    assert sent(redaction.log_records(FileRegion(fd, at[1], at[2] - at[1]))) == bytes(redacted(only(batches[1])))


def test_regions_asked_out_of_order_are_scanned_once_each(tmp_path):
    batches = [batch(i, [scram(f"u{i}") if i % 3 == 0 else config(str(i))],  # some compressed: searched after
                     Compression.ZSTD if i % 2 else Compression.NONE) for i in range(9)]  # decompressing
    fd, at = file_of(tmp_path, *batches)
    end = at[-1] + len(batches[-1])
    redaction = CredentialRedaction()
    redaction.log_records(FileRegion(fd, at[6], end - at[6]))
    redaction.log_records(FileRegion(fd, at[2], at[4] - at[2]))
    assert redaction._segments[fd].ranges == [(at[2], at[4]), (at[6], end)]
    everything = sent(redaction.log_records(FileRegion(fd, 0, end)))
    assert redaction._segments[fd].ranges == [(0, end)]
    assert SALT not in everything
    assert [b.header.base_offset for b in read_batches(everything)] == list(range(9))


def test_a_snapshots_chunks_add_up_to_the_redacted_snapshot(tmp_path):
    batches = [batch(0, [config("a")] * 20), batch(20, [scram("alice"), scram("bob")]), batch(22, [config("z")] * 30)]
    fd, _ = file_of(tmp_path, *batches)
    size = sum(len(b) for b in batches)
    redaction = CredentialRedaction()

    def ask(position: int, budget: int):  # noqa: ANN202 (what the core answers, then what a client gets)
        part = m.fetch_snapshot_partition(0, m.ErrorCode.none, (52, 1), leader_id=1, epoch=1, size=size,
                                          position=position,
                                          records=FileRegion(fd, position, min(budget, size - position)))
        return redaction.snapshot_partition(part)

    chunks, position, total = [], 0, None
    while total is None or position < total:
        part = ask(position, 100)
        assert part.error_code == m.ErrorCode.none
        total = part.size
        chunks.append(sent(part.unaligned_records))
        position += len(chunks[-1])
    served = b"".join(chunks)
    assert total < size and len(served) == total
    assert served == b"".join(bytes(redacted(only(b)) or b) for b in batches)
    assert ask(total, 100).error_code == m.ErrorCode.position_out_of_range  # past the redacted end
    (tmp_path / "plain").mkdir()
    lone = batch(0, [config("q")])
    plain, _ = file_of(tmp_path / "plain", lone)
    part = m.fetch_snapshot_partition(0, m.ErrorCode.none, (1, 1), leader_id=1, epoch=1, size=len(lone), position=0,
                                      records=FileRegion(plain, 0, 10))
    assert redaction.snapshot_partition(part) is part  # no credential: served as it was


def test_pieces_are_encoded_where_the_records_go():
    body = b"".join(bytes(batch(i, [config(str(i))])) for i in range(3))
    response = m.fetch_snapshot_response([("__cluster_metadata", [m.fetch_snapshot_partition(
        0, m.ErrorCode.none, (3, 1), leader_id=1, epoch=1, size=len(body), position=0,
        records=Pieces((body[:10], body[10:40], body[40:])))])])
    segments = encode_response_segments(7, response)
    frame = b"".join(s if isinstance(s, bytes) else b"" for s in segments)
    _, decoded = decode_response(frame[4:], response_class(59, 1))
    assert bytes(decoded.topics[0].partitions[0].unaligned_records) == body
