"""`kraft dump-log`: what is in a segment, an index or a snapshot, in kafka-dump-log's words.

The flags and the output are Kafka's (tools/.../DumpLogSegments.java): a line per batch;
with --deep-iteration a line per record ("| offset: ..."), control records decoded
(LeaderChange, SnapshotHeader, SnapshotFooter, KRaftVersion, KRaftVoters, transaction
markers); --print-data-log adds each record's key and payload; --cluster-metadata-decoder
prints payloads as metadata records in Kafka's JSON (`kraft.cli.kafka_json`);
--skip-record-metadata leaves out the record metadata and control records (where Kafka
then prints an empty line, kraft prints none). kraft adds a last line to a snapshot's dump
saying whether the whole file validates, and why not.

It reports rather than stops: a batch with a bad CRC is printed with `isvalid: false` and
its records are not decoded; a metadata record of a type or version newer than kraft knows
is shown as UNKNOWN and counted, and one that does not decode gets Kafka's "Error at"
line; both counts are printed at the end. Only bytes that cannot be a batch (bad magic, a
length below the header's) stop a file, with one line naming the file and the position.
Files are memory-mapped, not read: segments and snapshots can be large, and a damaged
length field must not make the walk allocate what it claims.
"""

import mmap
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kraft.cli.kafka_json import control_json, metadata_payload
from kraft.cli.output import quiet_on_broken_pipe
from kraft.records import (
    HEADER_SIZE,
    BatchHeader,
    ControlRecordError,
    CorruptRecordError,
    EndTxnMarker,
    KRaftVersionRecord,
    LeaderChangeMessage,
    Record,
    RecordBatch,
    RecordError,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    UnparsedControl,
    VotersRecord,
    crc_is_valid,
    decode_control_record,
    iter_batches,
    parse_header,
)
from kraft.storage import SnapshotError, SnapshotReader, parse_snapshot_file_name
from kraft.storage.segment import INDEX_ENTRY

DELETE_HORIZON_BIT = 0x40  # batch attribute: the base timestamp is the delete horizon (KIP-534)
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"  # Kafka's BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
_CONTROL_LABELS = {  # how DumpLogSegments.printControlRecord introduces each decoded control value
    LeaderChangeMessage: "LeaderChange:",
    SnapshotHeaderRecord: "SnapshotHeader",
    SnapshotFooterRecord: "SnapshotFooter",
    KRaftVersionRecord: "KRaftVersion",
    VotersRecord: "KRaftVoters",
}


class BadInputError(Exception):
    """A file dump-log cannot read as what its name says it is."""


@dataclass(frozen=True)
class Options:
    """Kafka's flags; a decoder prints the data log, and printing the data log iterates
    deeply, as in DumpLogSegmentsOptions."""

    deep_iteration: bool = False
    print_data_log: bool = False
    cluster_metadata_decoder: bool = False
    skip_record_metadata: bool = False

    @property
    def should_print_data_log(self) -> bool:
        return self.print_data_log or self.cluster_metadata_decoder

    @property
    def is_deep_iteration(self) -> bool:
        return self.deep_iteration or self.should_print_data_log


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(data: bytes) -> str:
    """Bytes as Kafka's StringDecoder shows them: UTF-8, bad sequences replaced."""
    return data.decode("utf-8", "replace")


def _timestamp_type(h: BatchHeader) -> str:
    return h.timestamp_type.name.title().replace("_", "")  # CreateTime, LogAppendTime


def describe_batch(h: BatchHeader, valid: bool) -> str:
    """Kafka's batch line (DumpLogSegments.printBatchLevel)."""
    last_sequence = -1 if h.base_sequence < 0 else h.base_sequence + h.last_offset_delta
    horizon = f"OptionalLong[{h.base_timestamp}]" if h.attributes & DELETE_HORIZON_BIT else "OptionalLong.empty"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"deleteHorizonMs: {horizon} position: {h.position} {_timestamp_type(h)}: {h.max_timestamp} "
        f"size: {h.size} magic: {h.magic} compresscodec: {h.compression.name.lower()} "
        f"crc: {h.crc} isvalid: {_bool(valid)}"
    )


def describe_control(record: Record) -> str:
    """What Kafka prints after a control record's metadata (printControlRecord), with a
    leading space; a key or value that does not decode says so instead of stopping the dump."""
    try:
        message = decode_control_record(record)
    except ControlRecordError as e:
        return f" control record does not decode: {e.reason}"
    if isinstance(message, EndTxnMarker):
        return f" endTxnMarker: {'COMMIT' if message.committed else 'ABORT'} coordinatorEpoch: {message.coordinator_epoch}"
    if isinstance(message, UnparsedControl):  # a type newer than kraft knows: Kafka calls it UNKNOWN
        return f" controlType: UNKNOWN({int(message.type)})"
    return f" {_CONTROL_LABELS[type(message)]} {control_json(message)}"


class Dumper:
    """Dumps files one after another, counting across them what the end of the run reports."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.unknown_records = 0  # metadata records of a type or version newer than kraft knows
        self.bad_records = 0  # metadata records that do not decode
        self.damaged_files = 0  # files whose walk stopped at bytes that cannot be a batch

    def _metadata_payload(self, record: Record) -> str:
        payload = metadata_payload(record.value, record.offset)
        if payload.kind == "unknown":
            self.unknown_records += 1
        elif payload.kind == "error":
            self.bad_records += 1
        return payload.text

    def record_line(self, r: Record, h: BatchHeader) -> str:
        """Kafka's line for one record (dumpBatchRecords); empty when every part is skipped."""
        line = ""
        if not self.options.skip_record_metadata:
            line = (
                f"| offset: {r.offset} {_timestamp_type(h)}: {r.timestamp} "
                f"keySize: {-1 if r.key is None else len(r.key)} valueSize: {-1 if r.value is None else len(r.value)} "
                f"sequence: {-1 if h.base_sequence < 0 else h.base_sequence + r.offset - h.base_offset} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
            )
            if h.is_control:
                line += describe_control(r)
        if self.options.should_print_data_log and not h.is_control:
            prefix = "| " if self.options.skip_record_metadata else " "
            if r.key is not None and not self.options.cluster_metadata_decoder:  # metadata records have no key
                line += f"{prefix}key: {_text(r.key)}"
                prefix = " "
            if self.options.cluster_metadata_decoder:
                line += f"{prefix}payload: {self._metadata_payload(r)}"
            elif r.value is not None:
                line += f"{prefix}payload: {_text(r.value)}"
        return line

    def _batch_lines(self, data: memoryview, name: str) -> Iterator[str]:
        """A line per batch, then a line per record with --deep-iteration; then where the walk
        stopped and what is left over, if anything."""
        end = 0
        try:
            for h in iter_batches(data, verify_crc=False, partial_tail="stop"):
                batch = RecordBatch(h, data[h.position : h.position + h.size])
                valid = crc_is_valid(batch.data)
                yield describe_batch(h, valid)
                if self.options.is_deep_iteration:
                    yield from self._record_lines(batch, valid)
                end = h.position + h.size
        except CorruptRecordError as e:
            self.damaged_files += 1
            yield f"Stopped at position {e.position} of {name}: {e.reason}"
            return
        if end < len(data):
            yield f"Found {len(data) - end} invalid bytes at the end of {name}"

    def _record_lines(self, batch: RecordBatch, valid: bool) -> Iterator[str]:
        """A batch's record lines; records of a batch that fails its CRC are not decoded
        (Kafka decodes them anyway), and a batch whose records do not decode says so."""
        if not valid:
            yield "| records not decoded: the batch fails its CRC"
            return
        try:
            records = batch.records()
        except RecordError as e:
            yield f"| records do not decode: {e}"
            return
        for r in records:
            line = self.record_line(r, batch.header)
            if line:
                yield line

    def segment(self, path: Path) -> Iterator[str]:
        """A `.log` segment; its starting offset is in its name, as Kafka reads it."""
        yield f"Dumping {path}"
        data = _map(path)
        stem = path.name.split(".")[0]
        if stem.isdigit():
            yield f"Log starting offset: {int(stem)}"
        elif len(data) >= HEADER_SIZE:  # a segment copied under another name: its first batch says
            try:
                yield f"Log starting offset: {parse_header(data, 0, 0).base_offset}"
            except CorruptRecordError:
                pass  # the walk reports it
        yield from self._batch_lines(data, path.name)

    def snapshot(self, path: Path) -> Iterator[str]:
        """A `.checkpoint` snapshot: its id, every batch, and last (kraft's addition) whether
        the whole file validates as a snapshot, and if not, why."""
        yield f"Dumping {path}"
        data = _map(path)
        problem = None
        if path.name == BOOTSTRAP_SNAPSHOT:
            yield "KRaft bootstrap snapshot"
        else:
            try:
                snapshot_id = parse_snapshot_file_name(path.name)
                yield f"Snapshot end offset: {snapshot_id.end_offset}, epoch: {snapshot_id.epoch}"
                SnapshotReader(snapshot_id, data, str(path)).validate()
            except SnapshotError as e:
                problem = str(e)
        yield from self._batch_lines(data, path.name)
        if path.name != BOOTSTRAP_SNAPSHOT:
            yield "Snapshot validates: true" if problem is None else f"Snapshot validates: false: {problem}"

    def summary(self) -> Iterator[str]:
        """The counts a run ends with (for stderr, as Kafka's tools print their summaries)."""
        if self.unknown_records:
            yield (f"{self.unknown_records} metadata record(s) of a type or version newer than kraft knows "
                   "were shown as UNKNOWN")
        if self.bad_records:
            yield f"{self.bad_records} metadata record(s) did not decode (their lines say 'Error at')"
        if self.damaged_files:
            yield f"{self.damaged_files} file(s) stopped at bytes that cannot be a record batch"


def _index_entries(raw: bytes, path: Path, log_size: int | None) -> list[tuple[int, int]]:
    """An offset index's (relative offset, position) entries, checked as Kafka's
    OffsetIndex.sanityCheck would and more: whole entries, offsets and positions rising,
    positions inside the segment. An index preallocated and never trimmed (a crash) ends in
    zero entries, which are left out, as kafka-dump-log stops at them."""
    if len(raw) % INDEX_ENTRY.size:
        raise BadInputError(f"{path}: not an offset index: {len(raw)} bytes is not a whole number of "
                            f"{INDEX_ENTRY.size}-byte entries")
    entries: list[tuple[int, int]] = []
    for i, (relative, position) in enumerate(INDEX_ENTRY.iter_unpack(raw)):
        if i and relative == 0 and position == 0:
            break
        if relative < 0 or position < 0 or (entries and (relative <= entries[-1][0] or position <= entries[-1][1])):
            raise BadInputError(f"{path}: not an offset index: entry {i} (relative offset {relative}, position "
                                f"{position}) does not follow the entry before it")
        if log_size is not None and position >= log_size:
            raise BadInputError(f"{path}: not this segment's index: entry {i} points at position {position}, "
                                f"past the end of the {log_size}-byte segment")
        entries.append((relative, position))
    return entries


def dump_index(path: Path) -> Iterator[str]:
    """Lines for a sparse `.index`: each entry's absolute offset and the position it points at,
    checked against the batch found there (as kafka-dump-log does). An index that cannot be
    one (or not this segment's) raises BadInputError before anything is printed."""
    segment = path.with_suffix(".log")
    fd = os.open(segment, os.O_RDONLY) if segment.exists() else None
    try:
        entries = _index_entries(path.read_bytes(), path, None if fd is None else os.fstat(fd).st_size)
        base = int(path.name.split(".")[0]) if path.name.split(".")[0].isdigit() else 0
        yield f"Dumping {path}"
        if not entries:
            yield f"{path} is empty."
        for relative, position in entries:
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
    finally:
        if fd is not None:
            os.close(fd)


def _map(path: Path) -> memoryview:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b"")


def file_lines(dumper: Dumper, path: Path) -> Iterator[str]:
    """The dump of one file, chosen by its suffix as Kafka chooses; BadInputError for a path
    that is not a file dump-log reads."""
    if path.is_dir():
        raise BadInputError(f"{path}: is a directory; --files takes .log, .index and .checkpoint files, "
                            "e.g. its 00000000000000000000.log")
    if not path.is_file():
        raise BadInputError(f"{path}: no such file")
    if path.suffix == ".log":
        return dumper.segment(path)
    if path.suffix == ".index":
        return dump_index(path)
    if path.suffix == ".checkpoint":
        return dumper.snapshot(path)
    raise BadInputError(f"{path}: not a .log segment, .index or .checkpoint snapshot")


@quiet_on_broken_pipe
def main(files: list[str], options: Options) -> int:
    """Dumps every file named (Kafka's `--files a,b` or several arguments), going on past a
    file it cannot read. Exit status: 2 if a file could not be read as what it is named, 1 if
    one stopped at bytes that cannot be a batch, else 0 (unknown records included)."""
    dumper = Dumper(options)
    status = 0
    for name in (part for arg in files for part in arg.split(",") if part):
        try:
            for line in file_lines(dumper, Path(name)):
                print(line)
        except BrokenPipeError:
            raise  # the reader has gone: quiet_on_broken_pipe ends the run
        except (BadInputError, OSError) as e:
            sys.stdout.flush()  # keep what was printed before the error ahead of it
            message = str(e) if isinstance(e, BadInputError) else f"{name}: {e.strerror or e}"
            print(f"kraft dump-log: {message}", file=sys.stderr)
            status = 2
    sys.stdout.flush()
    for line in dumper.summary():
        print(f"kraft dump-log: {line}", file=sys.stderr)
    return status or (1 if dumper.damaged_files else 0)
