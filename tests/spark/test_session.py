"""The session helper: Spark's Python workers run this interpreter, with nothing set by hand."""

import sys

from kraft.spark import SOURCES


def test_workers_run_this_interpreter_and_every_source_is_registered(spark):
    workers = spark.sparkContext.parallelize(range(2), 2).map(lambda _: sys.executable).collect()
    assert workers == [sys.executable] * 2
    assert spark.sparkContext.pythonExec == sys.executable
    assert {s.name() for s in SOURCES} == {"kraft", "kraft-files", "kraft-metadata"}
    assert spark.conf.get("spark.ui.enabled") == "false"
