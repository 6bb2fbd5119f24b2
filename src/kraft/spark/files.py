"""`spark.read.format("kraft-files").load(dir)`: a partition directory's records as rows.

`dir` is a `metadata.log.dir` or the partition directory in it (`__cluster_metadata-0`),
as kraft and Kafka lay them out: a backup, or a stopped node's. A relative path is taken
from the driver's working directory. Rows have `rows.RECORD_SCHEMA`, or with
`decode=metadata`, `history.HISTORY_SCHEMA`. Options:

    startingOffsets   "earliest" (default): everything the directory holds, from its
                      earliest state: every record of every segment, data and control; where
                      the log does not start at offset 0, the snapshot that ends where it
                      starts comes first (it holds the state below the log's start); a
                      directory with snapshots and no log reads the latest snapshot.
                      "snapshot": one consistent view, the state at `endingOffsets`: the
                      latest snapshot ending at or before it, then the log from that
                      snapshot's end. Without such a snapshot the log must start at 0.
    endingOffsets     "latest" (default): to the end of the last segment; or an offset
                      (exclusive), which must be a batch boundary within the log.
    maxPartitionBytes a segment larger than this is read by several tasks, split at batch
                      boundaries (default 32 MiB); every segment is a task of its own.
    decode            "none" (default): Kafka's rows. "metadata": one row per decoded
                      metadata record (`kraft.spark.history`), topic names resolved from
                      the TopicRecords of the view, which the reader collects when it is made.
    includeHeaders    "false" (default) or "true": the headers column (Kafka rows), as
                      Spark's Kafka source has it only when asked.

The names and the "earliest"/"latest" values are those of Spark's Kafka source.

Every batch read is CRC-checked and its offset checked against its neighbours; damage
fails the read with the file's name and the byte position, and no file is skipped.
Snapshot rows come first (one task), then the log's, in offset order: `collect()` and
`toLocalIterator()` return them in log order.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kraft.records import RecordBatch
from kraft.spark.history import TopicNames, decode_all
from kraft.spark.logdir import (
    DEFAULT_MAX_SLICE_BYTES,
    LogDirectory,
    Slice,
    SnapshotFile,
    View,
    named,
    open_snapshot,
    read_slice,
)
from kraft.spark.options import DECODE, INCLUDE_HEADERS, Options
from kraft.spark.rows import to_arrow

EARLIEST, SNAPSHOT = "earliest", "snapshot"


@dataclass
class FilePiece(InputPartition):
    """One task's share: a snapshot file or a slice of a segment."""

    piece: Slice | SnapshotFile


def piece_batches(piece: Slice | SnapshotFile, view: View) -> Iterator[RecordBatch]:
    """The batches of one piece of `view`, each checked (see logdir); a snapshot's control
    batches too, so its first row is its SnapshotHeader and its last its SnapshotFooter."""
    if isinstance(piece, SnapshotFile):
        return open_snapshot(piece).batches(control=True)
    return read_slice(piece, view.low, view.high)


def view_topic_names(view: View) -> TopicNames:
    """The topic names of every TopicRecord in `view` (see history)."""
    names = TopicNames()
    for piece in view.pieces:
        with named(piece.path):
            names.scan(piece_batches(piece, view))
    return names


class KraftFilesReader(DataSourceReader):
    """Plans the read when it is made, on the driver: Spark pickles the reader for its tasks
    right after making it (before asking for partitions), so what the tasks share, the view
    and the topic names, travels with it once."""

    def __init__(self, options: Options) -> None:
        from_snapshot = options.choice("startingOffsets", (EARLIEST, SNAPSHOT)) == SNAPSHOT
        max_slice_bytes = options.integer("maxPartitionBytes", DEFAULT_MAX_SLICE_BYTES, minimum=1)
        self.view = LogDirectory(options.path()).plan_view(
            from_snapshot=from_snapshot, high=options.ending_offset(), max_slice_bytes=max_slice_bytes
        )
        self.names = view_topic_names(self.view) if options.decode() else None
        self.headers = options.include_headers()

    def partitions(self) -> list[InputPartition]:
        return [FilePiece(p) for p in self.view.pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FilePiece):
            return  # Spark's stand-in for a plan without partitions: an empty view
        piece, view = partition.piece, self.view
        sid = piece.snapshot_id if isinstance(piece, SnapshotFile) else None
        snapshot = (sid.end_offset, sid.epoch) if sid is not None else None
        with named(piece.path):
            rows = to_arrow(piece_batches(piece, view), topic=view.topic, partition=view.partition, snapshot=snapshot,
                            headers=self.headers)
            yield from rows if self.names is None else decode_all(rows, self.names)


class KraftFilesDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kraft-files"

    def _options(self) -> Options:
        return Options(self.name(), self.options,
                       ("startingOffsets", "endingOffsets", "maxPartitionBytes", DECODE, INCLUDE_HEADERS))

    def schema(self) -> StructType:
        return self._options().row_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftFilesReader(self._options())
