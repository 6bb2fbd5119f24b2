"""What `make demo` shows of Spark: a metadata log directory read back as tables."""

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kraft.metadata.records import RECORD_TYPES
from kraft.spark.metadata_view import metadata_frames


def record_type(value: str = "value") -> F.Column:
    """The metadata record type of a `value` column, by its API key (the frame's second
    byte: every API key kraft knows is below 128, a one-byte varint), in Spark SQL."""
    api_key = F.conv(F.hex(F.substring(F.col(value), 2, 1)), 16, 10).cast("int")
    names = F.create_map(*(x for cls in RECORD_TYPES for x in (F.lit(cls.__schema__.api_key), F.lit(cls.__name__))))
    return F.element_at(names, api_key)


def demo_tables(spark: SparkSession, path: str, rows: int = 12) -> None:
    """Prints the log of a `__cluster_metadata` partition directory (the first `rows`
    records: offsets, epochs, record types, value sizes) and its metadata image."""
    log = spark.read.format("kraft-files").load(path)
    print(f"kraft-files: {log.count()} records in {path}")
    log.select(
        "offset",
        "leaderEpoch",
        "isControl",
        F.when(~F.col("isControl"), record_type()).alias("record"),
        F.length("value").alias("valueBytes"),
    ).show(rows, truncate=False)
    frames = metadata_frames(spark, path)
    print("metadata image at the log's end:")
    frames["brokers"].select("brokerId", "epoch", "fenced", "rack").show(rows, truncate=False)
    frames["topics"].show(rows, truncate=False)
    frames["partitions"].select("topic", "partition", "leader", "leaderEpoch", "replicas", "isr").show(
        rows, truncate=False
    )
