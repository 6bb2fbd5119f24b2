"""`spark.read.format("kraft-files").load(dir)`: a partition directory's records as rows.

`dir` is a partition directory as kraft (and Kafka) lay it out, such as a backup of
`<metadata.log.dir>/__cluster_metadata-0` or that of a stopped node. Rows have
`rows.RECORD_SCHEMA`. Options:

    startingOffsets   "earliest" (default): every record of every segment, data and
                      control, from the first segment's first batch.
                      "snapshot": one consistent view, the state at `endingOffsets`: the
                      latest snapshot ending at or before it, then the log from that
                      snapshot's end. Without such a snapshot the log must start at 0.
    endingOffsets     "latest" (default): to the end of the last segment; or an offset
                      (exclusive), which must be a batch boundary within the log.
    maxPartitionBytes a segment larger than this is read by several tasks, split at batch
                      boundaries (default 32 MiB); every segment is a task of its own.

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

from kraft.spark.logdir import (
    DEFAULT_MAX_SLICE_BYTES,
    LogDirectory,
    Slice,
    SnapshotFile,
    named,
    open_snapshot,
    read_slice,
)
from kraft.spark.options import Options
from kraft.spark.rows import RECORD_SCHEMA, to_arrow

EARLIEST, SNAPSHOT = "earliest", "snapshot"


@dataclass
class FilePiece(InputPartition):
    """One task's share: a snapshot file or a slice of a segment, with the view's offset
    bounds (every task checks its own batches against them)."""

    topic: str
    partition: int
    piece: Slice | SnapshotFile
    low: int
    high: int | None


class KraftFilesReader(DataSourceReader):
    def __init__(self, options: Options) -> None:
        self.path = options.path()
        self.from_snapshot = options.choice("startingOffsets", (EARLIEST, SNAPSHOT)) == SNAPSHOT
        self.high = options.ending_offset()
        self.max_slice_bytes = options.integer("maxPartitionBytes", DEFAULT_MAX_SLICE_BYTES, minimum=1)

    def partitions(self) -> list[InputPartition]:
        view = LogDirectory(self.path).plan_view(
            from_snapshot=self.from_snapshot, high=self.high, max_slice_bytes=self.max_slice_bytes
        )
        pieces: list[Slice | SnapshotFile] = [view.snapshot] if view.snapshot else []
        pieces += view.slices
        return [FilePiece(view.topic, view.partition, p, view.low, view.high) for p in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePiece)
        piece = partition.piece
        if isinstance(piece, SnapshotFile):
            batches = open_snapshot(piece).batches()
            offset: int | None = piece.snapshot_id.end_offset - 1
        else:
            batches = read_slice(piece, partition.low, partition.high)
            offset = None
        with named(piece.path):
            yield from to_arrow(batches, topic=partition.topic, partition=partition.partition, offset=offset)


class KraftFilesDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kraft-files"

    def schema(self) -> StructType:
        return RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftFilesReader(
            Options(self.name(), self.options, ("startingOffsets", "endingOffsets", "maxPartitionBytes"))
        )
