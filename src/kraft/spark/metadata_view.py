"""The metadata image at an offset, from a partition directory, as Spark tables.

`metadata_image(dir, ending_offset)` builds the image the way a replica does (KIP-630): the
latest snapshot ending at or before the offset, loaded with `kraft.metadata.load_snapshot`,
then every batch of the log from the snapshot's end up to the offset, applied whole through
`MetadataCache` (control batches only take their offsets). The offset is exclusive and must
be a batch boundary: an image exists only between batches. The result is the image as of
`ending_offset - 1` (its `offset`), or of the log's end by default.

The image becomes five tables, with the names Kafka's metadata shell uses:

    brokers      brokerId, epoch, incarnationId, fenced, rack, listeners, supportedFeatures
    topics       name, topicId, partitions (their count)
    partitions   topic, topicId, partition, leader, leaderEpoch, partitionEpoch, replicas,
                 isr, removingReplicas, addingReplicas, leaderRecoveryState
    configs      resourceType (TOPIC, BROKER, ...), resourceName, name, value
    features     name, level

Ids are in Kafka's text form (`uuid_str`). Two ways in: `metadata_frames(spark, dir)` builds
the image once, on the driver, and returns every table; the "kraft-metadata" source reads
one table (`option("table", ...)`) in a Spark task, for SQL and for readers that want only
one table.
"""

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kraft.metadata import MetadataCache, MetadataError, MetadataImage, uuid_str
from kraft.metadata.image import ConfigResourceType
from kraft.spark.logdir import LogDirectory, LogDirError, named, open_snapshot, read_slice
from kraft.spark.options import Options
from kraft.spark.rows import arrow_schema


def _fields(*fields: tuple[str, object] | tuple[str, object, bool]) -> StructType:
    """A struct of (name, type[, nullable]) fields, not nullable unless said."""
    return StructType([StructField(f[0], f[1], f[2] if len(f) == 3 else False) for f in fields])  # type: ignore[misc]


_IDS = ArrayType(IntegerType(), False)
_LISTENER = _fields(
    ("name", StringType()), ("host", StringType()), ("port", IntegerType()), ("securityProtocol", IntegerType())
)
_FEATURE = _fields(("name", StringType()), ("minVersion", IntegerType()), ("maxVersion", IntegerType()))

TABLES: dict[str, StructType] = {
    "brokers": _fields(
        ("brokerId", IntegerType()),
        ("epoch", LongType()),
        ("incarnationId", StringType()),
        ("fenced", BooleanType()),
        ("rack", StringType(), True),
        ("listeners", ArrayType(_LISTENER, False)),
        ("supportedFeatures", ArrayType(_FEATURE, False)),
    ),
    "topics": _fields(("name", StringType()), ("topicId", StringType()), ("partitions", IntegerType())),
    "partitions": _fields(
        ("topic", StringType()),
        ("topicId", StringType()),
        ("partition", IntegerType()),
        ("leader", IntegerType()),
        ("leaderEpoch", IntegerType()),
        ("partitionEpoch", IntegerType()),
        ("replicas", _IDS),
        ("isr", _IDS),
        ("removingReplicas", _IDS),
        ("addingReplicas", _IDS),
        ("leaderRecoveryState", IntegerType()),
    ),
    "configs": _fields(
        ("resourceType", StringType()), ("resourceName", StringType()), ("name", StringType()), ("value", StringType())
    ),
    "features": _fields(("name", StringType()), ("level", IntegerType())),
}


# ------------------------------------------------------------------------------ the image


def metadata_image(path: str, ending_offset: int | None = None) -> MetadataImage:
    """The image as of `ending_offset - 1` (the log's end by default): the latest snapshot
    ending at or before it, then the log after that snapshot. Damage raises with the file's
    name; a batch that does not apply raises LogDirError naming the file and its offsets."""
    view = LogDirectory(path).plan_view(from_snapshot=True, high=ending_offset)
    cache = MetadataCache()
    if view.snapshot is not None:
        sid = view.snapshot.snapshot_id
        try:
            cache.load_snapshot(open_snapshot(view.snapshot).records(), end_offset=sid.end_offset, epoch=sid.epoch)
        except MetadataError as e:
            raise LogDirError(f"{view.snapshot.path}: the snapshot does not load as metadata: {e}") from None
    for piece in view.slices:
        for batch in read_slice(piece, view.low, view.high):
            h = batch.header
            where = {"base_offset": h.base_offset, "last_offset": h.last_offset, "epoch": h.partition_leader_epoch}
            try:
                if h.is_control:
                    cache.advance(**where)
                else:
                    with named(piece.path):
                        cache.apply_batch(batch.records(), **where)
            except MetadataError as e:
                raise LogDirError(
                    f"{piece.path}: the batch at offsets {h.base_offset}..{h.last_offset} (position {h.position}) "
                    f"does not apply to the metadata image: {e}"
                ) from None
    return cache.image


# ------------------------------------------------------------------------------ image -> tables


def _brokers(image: MetadataImage) -> Iterator[tuple]:
    for broker_id in sorted(image.brokers.keys()):
        b = image.brokers[broker_id]
        listeners = [(e.name, e.host, e.port, e.security_protocol) for e in b.endpoints]
        features = [(f.name, f.min_supported_version, f.max_supported_version) for f in b.features]
        yield b.id, b.epoch, uuid_str(b.incarnation_id), b.fenced, b.rack, listeners, features


def _topics(image: MetadataImage) -> Iterator[tuple]:
    for name in sorted(image.topics_by_name.keys()):
        t = image.topics_by_name[name]
        yield name, uuid_str(t.id), len(t.partitions)


def _partitions(image: MetadataImage) -> Iterator[tuple]:
    for name in sorted(image.topics_by_name.keys()):
        t = image.topics_by_name[name]
        topic_id = uuid_str(t.id)
        for pid, p in enumerate(t.partitions):
            yield (name, topic_id, pid, p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr,
                   p.removing_replicas, p.adding_replicas, p.leader_recovery_state)


def _configs(image: MetadataImage) -> Iterator[tuple]:
    for resource in sorted(image.configs.keys()):
        entries = image.configs[resource]
        for key in sorted(entries.keys()):
            yield ConfigResourceType(resource.type).name, resource.name, key, entries[key]


def _features(image: MetadataImage) -> Iterator[tuple]:
    for name in sorted(image.features.keys()):
        yield name, image.features[name]


_ROWS: dict[str, Callable[[MetadataImage], Iterator[tuple]]] = {
    "brokers": _brokers,
    "topics": _topics,
    "partitions": _partitions,
    "configs": _configs,
    "features": _features,
}


def image_table(image: MetadataImage, table: str) -> pa.Table:
    """One table of the image, column-wise in Arrow, with the schema `TABLES[table]`."""
    schema = arrow_schema(TABLES[table])
    rows = list(_ROWS[table](image))
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema)


def metadata_frames(spark: SparkSession, path: str, ending_offset: int | None = None) -> dict[str, DataFrame]:
    """Every table of the image at `ending_offset` (see `metadata_image`), built once."""
    image = metadata_image(path, ending_offset)
    return {name: spark.createDataFrame(image_table(image, name), schema=TABLES[name]) for name in TABLES}


# ------------------------------------------------------------------------------ the data source


class KraftMetadataReader(DataSourceReader):
    def __init__(self, options: Options, table: str) -> None:
        self.path = options.path()
        self.ending_offset = options.ending_offset()
        self.table = table

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from image_table(metadata_image(self.path, self.ending_offset), self.table).to_batches()


class KraftMetadataDataSource(DataSource):
    """`spark.read.format("kraft-metadata").option("table", "partitions").load(dir)`;
    options `table` (required: one of TABLES) and `endingOffsets` ("latest" or an offset)."""

    @classmethod
    def name(cls) -> str:
        return "kraft-metadata"

    def _options(self) -> tuple[Options, str]:
        options = Options(self.name(), self.options, ("table", "endingOffsets"))
        table = options.get("table", "")
        if table not in TABLES:
            raise ValueError(f"{self.name()}: option table is {table!r}; expected one of {list(TABLES)}")
        return options, table

    def schema(self) -> StructType:
        return TABLES[self._options()[1]]

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftMetadataReader(*self._options())
