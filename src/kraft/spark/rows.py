"""The row every kraft record source yields, and decoded batches turned into Arrow.

The first columns are those of Spark's own Kafka source, with its names, types and order,
so code written against `spark.read.format("kafka")` reads kraft's frames unchanged (the
headers column only with option includeHeaders=true, as there); the last three say what a
KRaft log adds:

    key            binary      null for a null key
    value          binary      null for a null value (a tombstone)
    topic          string      the partition directory's topic (__cluster_metadata)
    partition      int
    offset         long        the record's log offset (see below for snapshot rows)
    timestamp      timestamp   UTC, from Kafka's milliseconds; Kafka's source uses this type
    timestampType  int         0 CreateTime, 1 LogAppendTime (then every record of a batch
                               has the batch's max timestamp, as Kafka reports it)
    headers        array<struct<key: string, value: binary>>, empty when none; only
                   with includeHeaders=true (Spark's Kafka source leaves it out otherwise)
    leaderEpoch    int         the batch's partition leader epoch: who wrote it (KIP-320)
    isControl      boolean     a control record (LeaderChange, snapshot header/footer, ...):
                               it holds no data for the state machine but takes an offset
    snapshot       struct<endOffset: long, epoch: int>: the snapshot a row comes from
                   (Kafka's snapshot id, as its file is named); null for the log's rows

Rows that come from a snapshot take the snapshot's last contained offset (its end offset
- 1) as their offset and its epoch as their leader epoch: they are the state as of that
offset, and the log that follows starts at the snapshot's end offset. Its first row is its
SnapshotHeader control record and its last its SnapshotFooter.

Batches become Arrow column by column, never row by row: the C codec decodes a whole batch
into records, `zip(*records)` transposes them in C, and per-batch constants (epoch, control
flag, timestamp type) are expanded by Arrow from one value per batch (run-end decoding).
Spark's Python data source API takes the resulting `pyarrow.RecordBatch`es as they are,
without a per-row conversion; their schema must equal `ARROW_SCHEMA` exactly.
"""

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kraft.records import RecordBatch

HEADER_TYPE = StructType([StructField("key", StringType(), False), StructField("value", BinaryType(), True)])
SNAPSHOT_TYPE = StructType([StructField("endOffset", LongType(), False), StructField("epoch", IntegerType(), False)])


def record_schema(headers: bool = False) -> StructType:
    """The record row, with Spark's headers column or (its default) without."""
    return StructType(
        [
            StructField("key", BinaryType(), True),
            StructField("value", BinaryType(), True),
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("offset", LongType(), False),
            StructField("timestamp", TimestampType(), False),
            StructField("timestampType", IntegerType(), False),
            *([StructField("headers", ArrayType(HEADER_TYPE, False), False)] if headers else []),
            StructField("leaderEpoch", IntegerType(), False),
            StructField("isControl", BooleanType(), False),
            StructField("snapshot", SNAPSHOT_TYPE, True),
        ]
    )


RECORD_SCHEMA = record_schema()


_ARROW_TYPES: dict[type, pa.DataType] = {
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    StringType: pa.string(),
    BinaryType: pa.binary(),
    DoubleType: pa.float64(),
    TimestampType: pa.timestamp("us", tz="UTC"),
}


def arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type Spark reads `data_type` from, as its Python workers convert it: list
    items named "element", timestamps in microseconds, UTC. (PySpark's own converter,
    pyspark.sql.pandas.types, is internal and its signature changes between releases.)"""
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("element", arrow_type(data_type.elementType), data_type.containsNull))
    if isinstance(data_type, StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in data_type.fields])
    return _ARROW_TYPES[type(data_type)]


def struct_of(*fields: tuple[str, DataType] | tuple[str, DataType, bool]) -> StructType:
    """A struct of (name, type[, nullable]) fields, not nullable unless said."""
    return StructType([StructField(f[0], f[1], f[2] if len(f) == 3 else False) for f in fields])


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of batches a Python data source yields for `schema`: Spark checks
    that it matches exactly (names, types, nullability)."""
    return pa.schema(list(arrow_type(schema)))


ARROW_SCHEMA = arrow_schema(RECORD_SCHEMA)
ARROW_SCHEMA_WITH_HEADERS = arrow_schema(record_schema(headers=True))
_HEADERS = ARROW_SCHEMA_WITH_HEADERS.field("headers").type
_TIMESTAMP = ARROW_SCHEMA.field("timestamp").type
_SNAPSHOT = ARROW_SCHEMA.field("snapshot").type
_NO_HEADERS = pa.array([], _HEADERS.value_type)

DEFAULT_ROWS_PER_ARROW_BATCH = 1 << 14


class _Columns:
    """One Arrow batch in the making: Python lists filled a Kafka batch at a time (by C-level
    list operations), and one entry per Kafka batch for the per-batch columns."""

    def __init__(self, headers: bool) -> None:
        self.with_headers = headers
        self.rows = 0
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[tuple] = []
        self.has_headers = False
        self.run_ends: list[int] = []  # per Kafka batch: rows so far, and its constants
        self.epochs: list[int] = []
        self.timestamp_types: list[int] = []
        self.controls: list[bool] = []

    def add(self, batch: RecordBatch, offset: int | None) -> None:
        records = batch.records()
        if not records:
            return
        offsets, timestamps, keys, values, headers = zip(*records)
        n = len(records)
        self.offsets.extend(offsets if offset is None else (offset,) * n)
        self.timestamps.extend(timestamps)
        self.keys.extend(keys)
        self.values.extend(values)
        if self.with_headers:
            self.headers.extend(headers)
            self.has_headers = self.has_headers or any(headers)
        h = batch.header
        self.rows += n
        self.run_ends.append(self.rows)
        self.epochs.append(h.partition_leader_epoch)
        self.timestamp_types.append(int(h.timestamp_type))
        self.controls.append(h.is_control)

    def _per_batch(self, values: list, data_type: pa.DataType) -> pa.Array:
        ends = pa.array(self.run_ends, pa.int32())
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array(values, data_type)))

    def _headers(self) -> list[pa.Array]:
        if not self.with_headers:
            return []
        if self.has_headers:
            return [pa.array(self.headers, _HEADERS)]
        empty = pa.repeat(pa.scalar(0, pa.int32()), self.rows + 1)
        return [pa.ListArray.from_arrays(empty, _NO_HEADERS, type=_HEADERS)]

    def build(self, topic: str, partition: int, snapshot: tuple[int, int] | None) -> pa.RecordBatch:
        n = self.rows
        millis = pa.array(self.timestamps, pa.int64())
        if snapshot is None:
            snapshots = pa.nulls(n, _SNAPSHOT)
        else:
            snapshots = pa.repeat(pa.scalar({"endOffset": snapshot[0], "epoch": snapshot[1]}, _SNAPSHOT), n)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(millis, 1000).view(_TIMESTAMP),
            self._per_batch(self.timestamp_types, pa.int32()),
            *self._headers(),
            self._per_batch(self.epochs, pa.int32()),
            self._per_batch(self.controls, pa.bool_()),
            snapshots,
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA_WITH_HEADERS if self.with_headers else ARROW_SCHEMA)


def to_arrow(
    batches: Iterable[RecordBatch],
    *,
    topic: str,
    partition: int,
    snapshot: tuple[int, int] | None = None,
    headers: bool = False,
    rows_per_batch: int = DEFAULT_ROWS_PER_ARROW_BATCH,
) -> Iterator[pa.RecordBatch]:
    """Kafka record batches (CRC-checked already) as Arrow batches of `record_schema(headers)`,
    each about `rows_per_batch` rows (whole Kafka batches only, so a large Kafka batch makes
    a larger one). With `snapshot` (its end offset and epoch), the batches are that
    snapshot's: every row takes its last contained offset and is marked with it (see above)."""
    offset = snapshot[0] - 1 if snapshot is not None else None
    columns = _Columns(headers)
    for batch in batches:
        columns.add(batch, offset)
        if columns.rows >= rows_per_batch:
            yield columns.build(topic, partition, snapshot)
            columns = _Columns(headers)
    if columns.rows:
        yield columns.build(topic, partition, snapshot)
