"""What `make demo` shows of Spark: a metadata log directory read back as tables."""

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kraft.metadata.records import RECORD_TYPES
from kraft.records import ControlType
from kraft.spark.history import api_key
from kraft.spark.logdir import LogDirectory, LogDirError
from kraft.spark.metadata_view import metadata_frames


def _lookup(names: dict[int, str], column: str, start: int, length: int) -> F.Column:
    """names[n] for the big-endian integer in bytes [start, start + length) of `column`."""
    number = F.conv(F.hex(F.substring(F.col(column), start, length)), 16, 10).cast("int")
    return F.element_at(F.create_map(*(F.lit(x) for item in names.items() for x in item)), number)


def record_type() -> F.Column:
    """What a record of a metadata log is, in Spark SQL: a control record's type from its
    key (version int16, type int16); a metadata record's from the API key in its value's
    frame (the second byte: every API key kraft knows is below 128, a one-byte varint)."""
    metadata = {api_key(cls): cls.__name__ for cls in RECORD_TYPES}
    control = {t.value: t.name for t in ControlType}
    return F.when(F.col("isControl"), _lookup(control, "key", 3, 2)).otherwise(_lookup(metadata, "value", 2, 1))


def show_log(log: DataFrame, rows: int = 12) -> None:
    """Prints the first `rows` records of a metadata log frame: offsets, epochs, record
    types (decoded in Spark SQL), value sizes, and how many records of each type there are."""
    log.select(
        "offset",
        "leaderEpoch",
        "isControl",
        record_type().alias("record"),
        F.length("value").alias("valueBytes"),
    ).orderBy("offset").show(rows, truncate=False)
    log.groupBy(record_type().alias("record")).count().orderBy(F.desc("count")).show(rows, truncate=False)


def image_offset(path: str, wanted: int) -> int | None:
    """`wanted` if the directory's files can give the image there (a snapshot at or before
    it, the log from it up to it, a batch boundary), else None: their end."""
    try:
        LogDirectory(path).plan_view(from_snapshot=True, high=wanted)
    except LogDirError:
        return None
    return wanted


def show_image(spark: SparkSession, path: str, rows: int = 12, ending_offset: int | None = None) -> None:
    """Prints the metadata image of a partition directory at `ending_offset` (its end if
    None): the snapshot at or before it plus the log after it, as brokers, topics, and
    partitions."""
    frames = metadata_frames(spark, path, ending_offset=ending_offset)
    frames["brokers"].select("brokerId", "epoch", "fenced", "rack").show(rows, truncate=False)
    frames["topics"].show(rows, truncate=False)
    frames["partitions"].select("topic", "partition", "leader", "leaderEpoch", "replicas", "isr").show(
        rows, truncate=False
    )


def demo_tables(spark: SparkSession, path: str, rows: int = 12) -> None:
    """Prints the log of a `__cluster_metadata` partition directory and its metadata image."""
    log = spark.read.format("kraft-files").load(path)
    print(f"kraft-files: {log.count()} records in {path}")
    show_log(log, rows)
    print("metadata image at the log's end:")
    show_image(spark, path, rows)
