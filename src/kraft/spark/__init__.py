"""kraft's data on Spark, through PySpark's Python data source API (PySpark 4).

    spark = kraft.spark.session()            # or register(spark) on a session of your own
    spark.read.format("kraft").option("bootstrap.servers", "127.0.0.1:9092").load()
    spark.readStream.format("kraft").option("bootstrap.servers", ...).load()
    spark.read.format("kraft-files").load(metadata_log_dir)     # or .../__cluster_metadata-0
    spark.read.format("kraft-files").option("startingOffsets", "snapshot").load(dir)
    spark.read.format("kraft-files").option("decode", "metadata").load(dir)   # the history
    kraft.spark.metadata_frames(spark, dir, ending_offset=1234)["partitions"]

* `live`: "kraft", batch and streaming reads of a live cluster over Kafka's protocol, with
  the options of Spark's Kafka source (`live_options`).
* `rows`: the record row (`record_schema`, Spark's Kafka-source columns plus leaderEpoch,
  isControl and snapshot) and decoded batches -> Arrow (`to_arrow`). Every record source uses both.
* `files`: "kraft-files", a metadata.log.dir's (or partition directory's) segments and snapshots.
* `history`: `decode=metadata` on both record sources: Kafka rows -> one row per decoded
  metadata record (`HISTORY_SCHEMA`), topic names resolved; `json_columns` makes Kafka's
  JSON of a group of records a column at a time.
* `metadata_view`: the metadata image at an offset as tables; "kraft-metadata".
* `logdir`: reading a directory read-only with every check; no Spark in it.

A new source joins `SOURCES` (so `register` registers it) and yields `rows.to_arrow` of the
Kafka batches it reads, so every record source has the same row (and `history.decode_all`
of them for decoded rows).

Spark's Python workers must import kraft. Unless the user chose their Python (PYSPARK_PYTHON
or spark.pyspark.python), they run this interpreter: `session` sets PYSPARK_PYTHON and
PYSPARK_DRIVER_PYTHON before the JVM starts, and `register` points the session's Python
functions at it. A user's choice is kept: on a real cluster the driver's interpreter path
exists on the workers only by luck, and the user knows which one does.
"""

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from kraft.spark.demo_frames import demo_tables
from kraft.spark.files import KraftFilesDataSource
from kraft.spark.history import HISTORY_SCHEMA
from kraft.spark.live import DataLossError, KraftDataSource
from kraft.spark.logdir import LogDirError
from kraft.spark.metadata_view import TABLES, KraftMetadataDataSource, metadata_frames, metadata_image
from kraft.spark.rows import ARROW_SCHEMA, RECORD_SCHEMA, record_schema, to_arrow

SOURCES = (KraftDataSource, KraftFilesDataSource, KraftMetadataDataSource)
_LOG4J = Path(__file__).with_name("log4j2.properties")


def workers_python(conf_python: str | None, env: Mapping[str, str]) -> str | None:
    """The Python the user chose for Spark's workers, by Spark's precedence
    (spark.pyspark.python over PYSPARK_PYTHON), or None if they chose none."""
    return conf_python or env.get("PYSPARK_PYTHON") or None


def register(spark: SparkSession) -> SparkSession:
    """Registers every kraft data source on `spark`; returns it.

    The sources' Python code runs in Spark's Python workers, which must be able to import
    kraft. The session's Python functions (registered from here on) run the Python the user
    chose (spark.pyspark.python, which only spark-submit would otherwise apply, or
    PYSPARK_PYTHON), or else `sys.executable`, this interpreter.
    """
    chosen = workers_python(spark.conf.get("spark.pyspark.python", None), os.environ)
    spark.sparkContext.pythonExec = chosen or sys.executable
    for source in SOURCES:
        spark.dataSource.register(source)
    return spark


def session(app_name: str = "kraft", master: str = "local[2]", **conf: str) -> SparkSession:
    """A small local Spark session with kraft's sources registered: no UI, two shuffle
    partitions, the driver on the loopback address, and WARN-level logs (the JVM's start-up
    chatter included). `conf` adds or overrides Spark settings. If a session is already
    running in this process, it is reused (Spark allows one). The workers' Python is the
    user's (PYSPARK_PYTHON, or spark.pyspark.python in `conf`) if they chose one, else this
    interpreter."""
    if workers_python(conf.get("spark.pyspark.python"), os.environ) is None:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_LOG4J}",
        **conf,
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return register(spark)


__all__ = [
    "ARROW_SCHEMA",
    "HISTORY_SCHEMA",
    "RECORD_SCHEMA",
    "SOURCES",
    "DataLossError",
    "TABLES",
    "LogDirError",
    "demo_tables",
    "metadata_frames",
    "metadata_image",
    "record_schema",
    "register",
    "session",
    "to_arrow",
    "workers_python",
]
