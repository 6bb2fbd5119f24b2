"""`kraft dump-log`: what is in a segment or a snapshot, batch by batch, in kafka-dump-log's words.

It reports rather than stops: a batch with a bad CRC is printed with `isvalid: false` and
the walk goes on; bytes that do not form a batch at the end are counted and reported.
Files are memory-mapped, not read: segments and snapshots can be large, and a damaged
length field must not make the walk allocate what it claims.
"""

import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

from kraft.records import (
    HEADER_SIZE,
    BatchHeader,
    ControlType,
    CorruptRecordError,
    EndTxnMarker,
    LeaderChangeMessage,
    Record,
    RecordBatch,
    RecordError,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    crc_is_valid,
    decode_control_record,
    iter_batches,
    parse_header,
)
from kraft.records.control import parse_control_key
from kraft.storage import SnapshotError, SnapshotReader, parse_snapshot_file_name
from kraft.storage.segment import INDEX_ENTRY


def _control_name(kind: int) -> str:
    try:
        return ControlType(kind).name
    except ValueError:
        return str(kind)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "backslashreplace")


def describe_control(record: Record) -> str:
    message = decode_control_record(record)
    if isinstance(message, LeaderChangeMessage):
        body = {
            "version": message.version,
            "leaderId": message.leader_id,
            "voters": [{"voterId": v} for v in message.voters],
            "grantingVoters": [{"voterId": v} for v in message.granting_voters],
        }
        return f"LeaderChange: {json.dumps(body, separators=(',', ':'))}"
    if isinstance(message, SnapshotHeaderRecord):
        return (
            f'SnapshotHeader: {{"version":{message.version},'
            f'"lastContainedLogTimestamp":{message.last_contained_log_timestamp}}}'
        )
    if isinstance(message, SnapshotFooterRecord):
        return f'SnapshotFooter: {{"version":{message.version}}}'
    if isinstance(message, EndTxnMarker):
        return f"endTxnMarker: {'COMMIT' if message.committed else 'ABORT'} coordinatorEpoch: {message.coordinator_epoch}"
    return f"controlType: {message.type}"


def describe_batch(h: BatchHeader, valid: bool, control: str | None) -> str:
    last_sequence = -1 if h.base_sequence < 0 else h.base_sequence + h.last_offset_delta
    line = (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"position: {h.position} {h.timestamp_type.name.title().replace('_', '')}: {h.max_timestamp} "
        f"size: {h.size} magic: {h.magic} compresscodec: {h.compression.name.lower()} "
        f"crc: {h.crc} isvalid: {_bool(valid)}"
    )
    return line + (f" controlType: {control}" if control else "")


def describe_record(r: Record, h: BatchHeader) -> str:
    prefix = (
        f"| offset: {r.offset} {h.timestamp_type.name.title().replace('_', '')}: {r.timestamp} "
        f"keySize: {-1 if r.key is None else len(r.key)} valueSize: {-1 if r.value is None else len(r.value)} "
        f"sequence: {-1 if h.base_sequence < 0 else h.base_sequence + r.offset - h.base_offset} "
        f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
    )
    if h.is_control:
        return f"{prefix} {describe_control(r)}"
    return f"{prefix} key: {_text(r.key)} payload: {_text(r.value)}"


def dump_index(path: Path) -> Iterator[str]:
    """Lines for a sparse `.index`: each entry's absolute offset and the position it points at,
    checked against the batch found there (as kafka-dump-log --index-sanity-check does)."""
    yield f"Dumping {path}"
    base = int(path.stem)
    raw = path.read_bytes()
    segment = path.with_suffix(".log")
    fd = os.open(segment, os.O_RDONLY) if segment.exists() else None
    try:
        for at in range(0, len(raw) - len(raw) % INDEX_ENTRY.size, INDEX_ENTRY.size):
            relative, position = INDEX_ENTRY.unpack_from(raw, at)
            line = f"offset: {base + relative} position: {position}"
            if fd is not None:
                header = os.pread(fd, HEADER_SIZE, position)
                try:
                    h = parse_header(memoryview(header), 0, position) if len(header) == HEADER_SIZE else None
                except CorruptRecordError:
                    h = None
                if h is None or h.last_offset != base + relative:
                    line += " (mismatch: no batch ending at this offset starts here)"
            yield line
        if len(raw) % INDEX_ENTRY.size:
            yield f"Found {len(raw) % INDEX_ENTRY.size} trailing bytes that are not a whole index entry"
    finally:
        if fd is not None:
            os.close(fd)


def _map(path: Path) -> memoryview:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b"")


def _batch_lines(data: memoryview, name: str, print_records: bool, control_records: bool) -> Iterator[str]:
    """A line per batch, then one per record if asked (control records too if
    `control_records`); then where the walk stopped and what is left over, if anything."""
    end = 0
    try:
        for h in iter_batches(data, verify_crc=False, partial_tail="stop"):
            batch = RecordBatch(h, data[h.position : h.position + h.size])
            valid = crc_is_valid(batch.data)
            show = print_records or (control_records and h.is_control)
            lines: list[str] = []
            problem = control = None
            if valid and (show or h.is_control):
                try:
                    records = batch.records()
                    if h.is_control and records:
                        control = _control_name(parse_control_key(records[0].key, records[0].offset))
                    lines = [describe_record(r, h) for r in records] if show else []
                except RecordError as e:
                    problem = str(e)
            yield describe_batch(h, valid, control)
            if problem:
                yield f"| records do not decode: {problem}"
            elif show and not valid:
                yield "| records not decoded: the batch fails its CRC"
            yield from lines
            end = h.position + h.size
    except CorruptRecordError as e:
        yield f"Stopped at position {e.position}: {e.reason}"
        end = e.position
    if end < len(data):
        yield f"Found {len(data) - end} invalid bytes at the end of {name} (position {end})"


def dump_segment(path: Path, print_records: bool = False) -> Iterator[str]:
    """Lines describing a `.log` segment."""
    yield f"Dumping {path}"
    data = _map(path)
    if len(data) >= HEADER_SIZE:
        try:
            yield f"Log starting offset: {parse_header(data, 0, 0).base_offset}"
        except CorruptRecordError:
            pass  # the walk reports it
    yield from _batch_lines(data, path.name, print_records, control_records=False)


def dump_snapshot(path: Path, print_records: bool = False) -> Iterator[str]:
    """Lines describing a `.checkpoint` snapshot: its id, size and header fields, every
    batch with its control records (the header and footer), data records if asked, and
    last whether the whole file validates as a snapshot, and if not, why."""
    yield f"Dumping {path}"
    data = _map(path)
    reader: SnapshotReader | None = None
    problem = None
    try:
        snapshot_id = parse_snapshot_file_name(path.name)
        yield f"Snapshot endOffset: {snapshot_id.end_offset} epoch: {snapshot_id.epoch} size: {len(data)}"
        reader = SnapshotReader(snapshot_id, data, str(path))
        yield (
            f"SnapshotHeader version: {reader.header.version} "
            f"lastContainedLogTimestamp: {reader.header.last_contained_log_timestamp}"
        )
        reader.validate()
    except SnapshotError as e:
        problem = str(e)
    yield from _batch_lines(data, path.name, print_records, control_records=True)
    yield "Snapshot validates: true" if problem is None else f"Snapshot validates: false: {problem}"
