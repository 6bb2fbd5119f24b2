"""spark.read.format("kraft-files") in a real local[2] Spark over real directories."""

import pickle
import shutil

import pytest
from pyspark.errors import PySparkException

from kraft.metadata import apply_records, decode_record, image_from_records, snapshot_records
from kraft.records import HEADER_SIZE, SimpleRecord, build_batch
from kraft.spark import RECORD_SCHEMA, record_schema
from kraft.spark.files import KraftFilesDataSource
from kraft.spark.metadata_view import KraftMetadataDataSource
from kraft.storage import FileLog, FileSnapshotStore, SnapshotId
from tests.spark.kafka_logs import check_history
from tests.spark.logs import check_rows, record_log, undecodable_batch


def read(spark, path, **options):
    return spark.read.format("kraft-files").options(**options).load(str(path))


def test_every_record_of_every_segment_in_parallel_tasks(spark, records):
    df = read(spark, records.path, includeHeaders="true")
    assert df.schema == record_schema(headers=True)
    assert df.rdd.getNumPartitions() == len(list(records.path.glob("*.log"))) > 1
    check_rows([r.asDict(recursive=True) for r in df.collect()], records.rows)
    assert read(spark, records.path).schema == RECORD_SCHEMA  # headers only when asked, as Spark's Kafka source
    assert "headers" not in RECORD_SCHEMA.fieldNames()
    assert df.where("snapshot IS NOT NULL").count() == 0  # log rows are no snapshot's
    counts = df.selectExpr("count(*)", "count(DISTINCT offset)", "min(offset)", "max(offset)").first()
    assert tuple(counts) == (len(records.rows), len(records.rows), 0, len(records.rows) - 1)
    per_epoch = {r.leaderEpoch: r[1] for r in df.groupBy("leaderEpoch").count().collect()}
    assert per_epoch == {e: sum(1 for w in records.rows if w.epoch == e) for e in (1, 2)}


def test_large_segments_split_into_tasks_that_read_everything_once(spark, tmp_path):
    one = record_log(tmp_path, segment_bytes=1 << 20)
    df = read(spark, one.path, maxPartitionBytes=1000)
    assert df.rdd.getNumPartitions() >= 5
    offsets = [r.offset for r in df.select("offset").collect()]
    assert offsets == list(range(len(one.rows)))


def test_the_snapshot_view_at_an_offset_is_the_image_at_that_offset(spark, metadata):
    (snapshot,) = metadata.path.glob("*.checkpoint")
    end, epoch = (int(x) for x in snapshot.name.split(".")[0].split("-"))
    boundaries = sorted(metadata.images)
    for at in (end, boundaries[-3], boundaries[-1]):
        options = {"startingOffsets": "snapshot"} | ({} if at == max(metadata.images) else {"endingOffsets": str(at)})
        rows = read(spark, metadata.path, **options).collect()
        state = [r for r in rows if r.offset < end]
        log = [r for r in rows if r.offset >= end]
        assert {(r.offset, r.leaderEpoch) for r in state} == {(end - 1, epoch)}
        assert state[0].isControl and state[-1].isControl, "the snapshot's header first, its footer last"
        data = [r for r in state if not r.isControl]
        assert len(data) == metadata.images[end].record_count()
        assert [r.offset for r in log] == list(range(end, at))
        image = image_from_records((decode_record(r.value) for r in data), offset=end - 1, epoch=epoch)
        data = [decode_record(r.value) for r in log if not r.isControl]
        image = apply_records(image, data, offset=at - 1, epoch=metadata.images[at].epoch)
        assert image == metadata.images[at]


def test_a_corrupt_segment_fails_the_read_with_its_name(spark, records, tmp_path):
    path = tmp_path / records.path.name
    shutil.copytree(records.path, path)
    segment = sorted(path.glob("*.log"))[3]
    data = bytearray(segment.read_bytes())
    data[HEADER_SIZE + 2] ^= 0x10
    segment.write_bytes(bytes(data))
    with pytest.raises(PySparkException) as e:
        read(spark, path).selectExpr("sum(length(value))").collect()
    assert f"{segment}: corrupt at position 0: CRC mismatch" in str(e.value)


def test_records_that_do_not_decode_fail_the_read_with_the_file_name(spark, tmp_path):
    log = FileLog(tmp_path / "bad-0")
    good, bad = build_batch([SimpleRecord(None, b"fine")], timestamp=0), undecodable_batch()
    log.append_as_leader(good, 1)
    log.append_as_leader(bad, 1)  # its CRC holds: the log accepts it
    log.close()
    segment = tmp_path / "bad-0" / "00000000000000000000.log"
    with pytest.raises(PySparkException) as e:
        read(spark, tmp_path / "bad-0").collect()
    # The fourth record the header promises would start where the batch ends.
    assert f"{segment}: corrupt at position {len(good) + len(bad)}: record length varint" in str(e.value)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"startingOffset": "snapshot"}, "kraft-files: unknown option(s) ['startingoffset']"),
        ({"startingOffsets": "latest"}, "option startingOffsets is 'latest'; expected one of ['earliest', 'snapshot']"),
        ({"endingOffsets": "soon"}, "option endingOffsets is 'soon'; expected 'latest' or an offset"),
    ],
)
def test_bad_options_say_which(spark, records, options, message):
    with pytest.raises(PySparkException) as e:
        read(spark, records.path, **options).collect()
    assert message in str(e.value)


def test_a_view_ends_at_a_batch_boundary(spark, records):
    base, next_base = next((a, b) for a, b in zip(records.batch_ends, records.batch_ends[1:]) if b - a > 1)
    assert read(spark, records.path, endingOffsets=str(next_base)).count() == next_base
    with pytest.raises(PySparkException) as e:
        read(spark, records.path, endingOffsets=str(base + 1)).collect()
    assert f"end offset {base + 1} falls inside the batch at offsets {base}..{next_base - 1}" in str(e.value)


def test_earliest_starts_with_the_snapshot_that_ends_where_the_log_starts(spark, metadata, tmp_path):
    """A log cut at a snapshot (Kafka deletes segments below its oldest snapshot): the state
    below the log start is only in that snapshot, so "earliest" reads it first."""
    path = tmp_path / metadata.path.name
    shutil.copytree(metadata.path, path)
    for snapshot in path.glob("*.checkpoint"):
        snapshot.unlink()
    segments = sorted(path.glob("*.log"))
    start = int(segments[2].stem)
    for segment in segments[:2]:
        segment.unlink()
    assert read(spark, path).select("offset").first().offset == start  # no snapshot: the log alone
    image = metadata.images[start]
    with FileSnapshotStore(path).create_writer(SnapshotId(start, image.epoch), 0) as writer:
        writer.append(list(snapshot_records(image)))
        writer.freeze()
    rows = read(spark, path).collect()
    state = [r for r in rows if r.offset < start]
    assert {(r.offset, r.leaderEpoch) for r in state} == {(start - 1, image.epoch)}
    assert len([r for r in state if not r.isControl]) == image.record_count()
    assert [r.offset for r in rows[len(state):]] == list(
        range(start, max(metadata.images)))
    rebuilt = image_from_records((decode_record(r.value) for r in state if not r.isControl), offset=start - 1,
                                 epoch=image.epoch)
    data = [decode_record(r.value) for r in rows[len(state):] if not r.isControl]
    assert apply_records(rebuilt, data, offset=metadata.image.offset, epoch=metadata.image.epoch) == metadata.image


def test_a_metadata_log_dir_reads_as_its_partition_directory(spark, kafka):
    assert read(spark, kafka.root).collect() == read(spark, kafka.path).collect()


@pytest.mark.parametrize("source, options", [(KraftFilesDataSource, {"decode": "metadata"}),
                                             (KraftMetadataDataSource, {"table": "topics"})])
def test_a_relative_path_is_resolved_where_the_reader_is_made(kafka, tmp_path, monkeypatch, source, options):
    """Spark makes a reader on the driver and pickles it to executors, which on a cluster
    run in another working directory: a path relative to the driver's must not reach them."""
    monkeypatch.chdir(kafka.root.parent)
    data_source = source({"path": kafka.root.name, **options})
    reader = data_source.reader(data_source.schema())
    shipped, partitions = pickle.loads(pickle.dumps((reader, reader.partitions())))
    monkeypatch.chdir(tmp_path)  # an executor's working directory
    rows = [row for p in partitions for batch in shipped.read(p) for row in batch.to_pylist()]
    if source is KraftFilesDataSource:
        check_history(rows, kafka.rows)
    else:
        assert sorted(r["name"] for r in rows) == ["orders", "payments"]
