"""Decoded batches -> Arrow, column by column, checked against what was written."""

from kraft.spark.logdir import LogDirectory, read_slice
from kraft.spark.rows import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, RECORD_SCHEMA, record_schema, to_arrow
from tests.spark.logs import TOPIC, check_rows


def batches_of(path):
    view = LogDirectory(path).plan_view(from_snapshot=False)
    return [b for s in view.slices for b in read_slice(s)]


def test_every_column_of_every_record(records):
    out = list(to_arrow(batches_of(records.path), topic=TOPIC, partition=0, headers=True))
    assert all(b.schema == ARROW_SCHEMA_WITH_HEADERS for b in out)
    check_rows([r for b in out for r in b.to_pylist()], records.rows)
    assert any(w.headers for w in records.rows) and any(w.timestamp_type for w in records.rows)
    assert any(w.key is None for w in records.rows) and any(w.value is None for w in records.rows)


def test_arrow_batches_hold_whole_kafka_batches(records):
    batches = batches_of(records.path)
    out = list(to_arrow(batches, topic=TOPIC, partition=0, rows_per_batch=10))
    assert sum(b.num_rows for b in out) == len(records.rows)
    ends = set(records.batch_ends)
    firsts = [b.column("offset")[0].as_py() for b in out]
    assert all(f in ends for f in firsts)
    assert all(b.num_rows >= 10 for b in out[:-1])


def test_snapshot_rows_take_the_snapshot_offset_and_carry_its_id(records):
    out = list(to_arrow(batches_of(records.path)[1:3], topic=TOPIC, partition=0, snapshot=(42, 7)))
    assert all(b.schema == ARROW_SCHEMA for b in out)
    assert set(out[0].column("offset").to_pylist()) == {41}
    assert set(map(str, out[0].column("snapshot").to_pylist())) == {str({"endOffset": 42, "epoch": 7})}
    log = next(to_arrow(batches_of(records.path)[1:3], topic=TOPIC, partition=0))
    assert log.column("snapshot").null_count == len(log)


def test_the_schema_begins_with_spark_kafka_sources_columns():
    kafka = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert RECORD_SCHEMA.fieldNames() == [*kafka, "leaderEpoch", "isControl", "snapshot"]
    assert record_schema(headers=True).fieldNames()[:8] == [*kafka, "headers"]  # Spark's, in its order
    assert str(ARROW_SCHEMA.field("timestamp").type) == "timestamp[us, tz=UTC]"
