"""The metadata image in a snapshot or a metadata directory, as the file tools read it.

From a snapshot (`--snapshot FILE`), or from a partition directory (`--dir`): its latest
`.checkpoint`, then the `.log` segments after it, batch by batch. Given a node's
metadata.log.dir instead, the partition directory inside it (`__cluster_metadata-0`) is read;
a directory with neither snapshots nor segments is an error, not an empty image. Nothing is
written: no recovery, no cleanup of the directory. The log is read to its end, so the image
may include records not yet committed, as with Kafka's shell.

A tool must show what Kafka's tools show, so unlike a replica (which stops):

* a record that does not decode (a type or version newer than kraft, or a damaged value)
  is left out of the image, as if it were a NoOpRecord, and reported on stderr;
* a record that does not apply to the image before it (a removal of an ACL that is not
  there, say) is left out and the rest of its batch applies, as Kafka's MetadataLoader
  logs such a record and goes on; removals of SCRAM credentials, delegation tokens and
  controllers that are not there change nothing, as in Kafka;
* a snapshot is replayed as a log is (kafka-metadata-shell --snapshot reads it so), so a
  transaction inside it applies at its end and an aborted one leaves no trace;
* a log batch that breaks the transactions' structure (an End without a Begin) is skipped
  whole and reported.

Each is counted, by kind and record type, and the counts printed once the image is loaded. Bytes that are not a log
(a bad CRC, a torn or malformed batch, a snapshot that does not validate) stop the load with
one line naming the file and the position.

Besides the image, the load keeps the append time of the last batch the image holds (the
snapshot header's lastContainedLogTimestamp for a snapshot), which Kafka's image provenance
shows and kraft's image does not keep.
"""

import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from kraft.metadata import MetadataCache, MetadataImage, decode_record, encode_record
from kraft.metadata.metadata_errors import InvalidRecordError, MetadataError, MetadataRecordError, ReplayError
from kraft.metadata.records import MetadataRecord, NoOpRecord
from kraft.records import Record, RecordBatch, RecordError, SimpleRecord, iter_file_batches
from kraft.storage.snapshot import CHECKPOINT_SUFFIX, SnapshotReader, parse_snapshot_file_name
from kraft.storage.storage_errors import SnapshotError

METADATA_PARTITION = "__cluster_metadata-0"  # the partition directory inside metadata.log.dir
_NOOP = SimpleRecord(None, encode_record(NoOpRecord()))  # what an undecodable record counts as
_READ_ERRORS = (SnapshotError, RecordError, MetadataError, OSError)
_WARNINGS_SHOWN = 10  # per kind; a newer Kafka may write millions of one new record type


class LoadError(Exception):
    """The files cannot be read as a metadata log (damaged, missing, not a metadata dir)."""


def _error_in(path: Path, error: Exception) -> LoadError:
    """The error, naming the file it is about once (snapshot errors name it already)."""
    message = str(error)
    return LoadError(message if str(path) in message else f"{path}: {message}")


class ImageLoader:
    """Loads an image from files, reporting (`warn`) what it leaves out and counting it."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.cache = MetadataCache(on_unapplied=self._unapplied)
        self.time_ms = -1  # append time of the last batch in the image (Kafka's provenance)
        self.undecodable = 0  # records left out: they do not decode
        self.unapplied: Counter[str] = Counter()  # records left out, by type: they do not apply
        self.skipped = 0  # log batches left out: they break the transactions' structure
        self._file = Path()  # the file being read, for the warnings

    @property
    def image(self) -> MetadataImage:
        return self.cache.image

    def _warn(self, count: int, message: str) -> None:
        if count <= _WARNINGS_SHOWN:
            print(f"{self.prog}: {message}", file=sys.stderr)

    def _unapplied(self, offset: int, record: MetadataRecord, error: InvalidRecordError) -> None:
        kind = type(record).__name__
        self.unapplied[kind] += 1
        self._warn(sum(self.unapplied.values()), f"{self._file}: offset {offset}: {error}; left out of the image")

    def summary(self) -> Iterator[str]:
        """What the load left out, for stderr."""
        if self.undecodable:
            yield f"{self.undecodable} record(s) do not decode and were left out of the image"
        if self.unapplied:
            kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.unapplied.items()))
            yield (f"{sum(self.unapplied.values())} record(s) do not apply to the image and were left out, as "
                   f"Kafka's loader leaves them out: {kinds}")
        if self.skipped:
            yield f"{self.skipped} log batch(es) break the transactions' structure and were skipped"

    def _decodable(self, records: Iterable[Record], path: Path) -> Iterator[Record | SimpleRecord]:
        """The records, each that does not decode replaced by a NoOpRecord (offsets kept)."""
        for r in records:
            try:
                decode_record(r.value)
            except MetadataRecordError as e:
                self.undecodable += 1
                self._warn(self.undecodable, f"{path}: offset {r.offset}: {e}; left out of the image")
                yield _NOOP
            else:
                yield r

    def snapshot(self, path: Path) -> None:
        """Replaces the image with the snapshot's."""
        self._file = path
        try:
            reader = SnapshotReader.open(path, parse_snapshot_file_name(path.name))
            sid = reader.snapshot_id
            self.cache.load_snapshot(self._decodable(reader.records(), path), end_offset=sid.end_offset, epoch=sid.epoch)
        except _READ_ERRORS as e:
            raise _error_in(path, e) from None
        self.time_ms = reader.header.last_contained_log_timestamp

    def segment(self, segment: Path) -> None:
        """Every batch of one .log segment past the image's offset, in order."""
        self._file = segment
        fd = os.open(segment, os.O_RDONLY)
        try:
            for h in iter_file_batches(fd, partial_tail="stop"):
                if h.last_offset <= self.cache.offset:
                    continue  # in the snapshot already
                where = {"base_offset": h.base_offset, "last_offset": h.last_offset, "epoch": h.partition_leader_epoch}
                before = self.cache.offset
                if h.is_control:
                    self.cache.advance(**where)
                else:
                    records = RecordBatch(h, os.pread(fd, h.size, h.position)).records()
                    try:
                        self.cache.apply_batch(self._decodable(records, segment), **where)
                    except ReplayError as e:
                        if self.cache.in_transaction:
                            self.cache.drop_transaction()
                        self.skipped += 1
                        self._warn(self.skipped, f"{segment}: skipped the batch at offsets {h.base_offset}.."
                                                 f"{h.last_offset}: {e}")
                        self.cache.advance(**where)
                if self.cache.offset != before:
                    self.time_ms = h.max_timestamp
        except _READ_ERRORS as e:
            raise _error_in(segment, e) from None
        finally:
            os.close(fd)

    def directory(self, directory: Path) -> None:
        """The latest snapshot in a partition directory, then every log batch after it. A
        metadata.log.dir stands for the partition directory inside it; a directory with
        neither snapshots nor segments is refused rather than shown as an empty image."""
        snapshots = []
        segments = []
        for p in directory.iterdir():
            if p.name.endswith(CHECKPOINT_SUFFIX):
                try:
                    snapshots.append((parse_snapshot_file_name(p.name), p))
                except SnapshotError as e:  # as the snapshot store does: not a snapshot of this log
                    print(f"{self.prog}: ignored: {e}", file=sys.stderr)
            elif p.suffix == ".log" and p.stem.isdigit():
                segments.append(p)
        if not snapshots and not segments:
            inner = directory / METADATA_PARTITION
            if inner.is_dir():
                return self.directory(inner)
            raise LoadError(
                f"{directory}: no .checkpoint snapshots and no .log segments: give a metadata partition directory "
                f"({METADATA_PARTITION}) or the metadata.log.dir holding one"
            )
        if snapshots:
            self.snapshot(max(snapshots)[1])
        for segment in sorted(segments, key=lambda p: int(p.stem)):
            self.segment(segment)


def load(prog: str, snapshot: str | None, directory: str | None) -> ImageLoader:
    """The image in a snapshot file or a directory, loaded; raises LoadError saying what
    could not be read, and why."""
    loader = ImageLoader(prog)
    path = Path(snapshot or directory or "")
    try:
        if snapshot is not None:
            if not path.is_file():
                raise LoadError(f"{path}: no such file")
            loader.snapshot(path)
        elif not path.is_dir():
            raise LoadError(f"{path}: no such directory")
        else:
            loader.directory(path)
    except OSError as e:  # listing the directory
        raise _error_in(path, e) from None
    return loader
