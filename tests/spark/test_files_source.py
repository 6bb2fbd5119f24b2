"""spark.read.format("kraft-files") in a real local[2] Spark over real directories."""

import shutil

import pytest
from pyspark.errors import PySparkException

from kraft.metadata import apply_records, decode_record, image_from_records
from kraft.records import HEADER_SIZE, SimpleRecord, build_batch
from kraft.spark import RECORD_SCHEMA
from kraft.storage import FileLog
from tests.spark.logs import check_rows, record_log, undecodable_batch


def read(spark, path, **options):
    return spark.read.format("kraft-files").options(**options).load(str(path))


def test_every_record_of_every_segment_in_parallel_tasks(spark, records):
    df = read(spark, records.path)
    assert df.schema == RECORD_SCHEMA
    assert df.rdd.getNumPartitions() == len(list(records.path.glob("*.log"))) > 1
    check_rows([r.asDict(recursive=True) for r in df.collect()], records.rows)
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
        assert {(r.offset, r.leaderEpoch, r.isControl) for r in state} == {(end - 1, epoch, False)}
        assert len(state) == metadata.images[end].record_count()
        assert [r.offset for r in log] == list(range(end, at))
        image = image_from_records((decode_record(r.value) for r in state), offset=end - 1, epoch=epoch)
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
