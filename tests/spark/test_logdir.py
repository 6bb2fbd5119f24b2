"""Reading a partition directory read-only: planning slices, the checks every batch gets,
and the views (snapshot + log at an offset). No Spark here: this runs in its workers."""

import shutil

import pytest

from kraft.records import HEADER_SIZE
from kraft.spark.logdir import LogDirectory, LogDirError, open_snapshot, read_slice
from kraft.storage import CorruptLogError, CorruptSnapshotError
from tests.spark.logs import TOPIC, record_log


def offsets_read(view) -> list[int]:
    return [r.offset for s in view.slices for b in read_slice(s, view.low, view.high) for r in b.records()]


@pytest.fixture
def copy(records, tmp_path):
    """A private copy of the shared record log, to damage."""
    path = tmp_path / records.path.name
    shutil.copytree(records.path, path)
    return path


def test_plan_has_a_slice_per_segment_and_reads_every_record_once(records):
    d = LogDirectory(records.path)
    segments = sorted(records.path.glob("*.log"))
    assert len(segments) > 3
    view = d.plan_view(from_snapshot=False)
    assert [s.path for s in view.slices] == [str(p) for p in segments]
    assert (d.topic, d.partition, view.snapshot) == (TOPIC, 0, None)
    assert offsets_read(view) == [r.offset for r in records.rows] == list(range(len(records.rows)))


def test_files_that_are_not_segments_or_frozen_snapshots_are_ignored(copy):
    (copy / "00000000000000000100-0000000001.checkpoint.part").write_bytes(b"half a snapshot")
    (copy / "not-a-snapshot.checkpoint").write_bytes(b"?")
    (copy / "notes.txt").write_text("hello")
    (copy / "123.log").write_bytes(b"not twenty digits")
    d = LogDirectory(copy)
    assert d.snapshots == []
    assert len(d.segments) == len(list(copy.glob("0*.log")))


def test_a_large_segment_is_split_into_balanced_slices_that_chain(tmp_path):
    one = record_log(tmp_path, segment_bytes=1 << 20)
    segment = next(one.path.glob("*.log"))
    view = LogDirectory(one.path).plan_view(from_snapshot=False, max_slice_bytes=-(-segment.stat().st_size // 4))
    sizes = [s.end - s.start for s in view.slices]
    assert len(sizes) == 4 and max(sizes) < 2 * min(sizes)
    for a, b in zip(view.slices, view.slices[1:]):
        assert (a.end, a.next_offset) == (b.start, b.first_offset)
    assert offsets_read(view) == list(range(len(one.rows)))


def test_a_flipped_byte_names_the_segment_and_position(copy):
    segment = sorted(copy.glob("*.log"))[2]
    data = bytearray(segment.read_bytes())
    data[HEADER_SIZE + 5] ^= 0x40  # inside the first batch's records
    segment.write_bytes(bytes(data))
    view = LogDirectory(copy).plan_view(from_snapshot=False)
    with pytest.raises(CorruptLogError, match="CRC mismatch") as e:
        offsets_read(view)
    assert e.value.path == segment and e.value.position == 0
    assert segment.name in str(e.value)


def test_a_missing_segment_is_a_gap_named_by_the_one_before_it(copy):
    segments = sorted(copy.glob("*.log"))
    segments[2].unlink()
    view = LogDirectory(copy).plan_view(from_snapshot=False)
    with pytest.raises(CorruptLogError, match=f"next segment starts at {int(segments[3].stem)}: a gap") as e:
        offsets_read(view)
    assert e.value.path == segments[1]


def test_a_torn_tail_is_damage_not_the_end(copy):
    last = sorted(copy.glob("*.log"))[-1]
    with open(last, "r+b") as f:
        f.truncate(last.stat().st_size - 3)
    with pytest.raises(CorruptLogError, match=last.name):
        offsets_read(LogDirectory(copy).plan_view(from_snapshot=False))


def test_a_view_ends_only_at_a_batch_boundary_within_the_log(records):
    d = LogDirectory(records.path)
    ends = records.batch_ends
    inside = ends[5] + 1
    assert inside not in ends
    for high in (ends[5], ends[-1]):
        assert offsets_read(d.plan_view(from_snapshot=False, high=high)) == list(range(high))
    with pytest.raises(LogDirError, match=f"end offset {inside} falls inside the batch at offsets {ends[5]}.."):
        offsets_read(d.plan_view(from_snapshot=False, high=inside))
    with pytest.raises(LogDirError, match=f"end offset {ends[-1] + 1} is past the end of the log"):
        offsets_read(d.plan_view(from_snapshot=False, high=ends[-1] + 1))


def test_the_snapshot_view_starts_from_the_latest_snapshot_at_or_before_its_end(metadata):
    d = LogDirectory(metadata.path)
    (snapshot,) = d.snapshots
    end = snapshot.snapshot_id.end_offset
    view = d.plan_view(from_snapshot=True)
    assert view.snapshot == snapshot and view.low == end
    assert offsets_read(view) == list(range(end, max(metadata.images)))
    previous = max(offset for offset in metadata.images if offset < end)  # the batch boundary before it
    before = d.plan_view(from_snapshot=True, high=previous)
    assert before.snapshot is None and offsets_read(before) == list(range(previous))
    at = d.plan_view(from_snapshot=True, high=end)
    assert at.snapshot == snapshot and offsets_read(at) == []


def test_a_log_that_lost_its_start_needs_a_snapshot_that_reaches_it(metadata, tmp_path):
    path = tmp_path / metadata.path.name
    shutil.copytree(metadata.path, path)
    snapshot = next(path.glob("*.checkpoint"))
    end = int(snapshot.name.split("-")[0])
    segments = sorted(path.glob("*.log"))
    segments[0].unlink()
    start = int(segments[1].stem)
    assert 0 < start <= end  # the snapshot holds the state of what was lost: readable
    assert LogDirectory(path).plan_view(from_snapshot=True).low == end
    lost = f"the log starts at offset {start} and no snapshot ends at or before {end - 1}"
    with pytest.raises(LogDirError, match=lost):
        LogDirectory(path).plan_view(from_snapshot=True, high=end - 1)
    for segment in segments[1:]:
        if int(segment.stem) <= end:
            segment.unlink()
    start = int(sorted(path.glob("*.log"))[0].stem)
    with pytest.raises(LogDirError, match=f"ends at offset {end}, but the log starts at {start}: .* in neither"):
        LogDirectory(path).plan_view(from_snapshot=True)
    snapshot.unlink()
    with pytest.raises(LogDirError, match=f"the log starts at offset {start} and no snapshot ends here"):
        LogDirectory(path).plan_view(from_snapshot=True)


def test_a_damaged_snapshot_names_its_file(metadata, tmp_path):
    path = tmp_path / metadata.path.name
    shutil.copytree(metadata.path, path)
    snapshot = next(path.glob("*.checkpoint"))
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0x01
    snapshot.write_bytes(bytes(data))
    view = LogDirectory(path).plan_view(from_snapshot=True)
    with pytest.raises(CorruptSnapshotError, match=snapshot.name):
        open_snapshot(view.snapshot).validate()


def test_directories_that_are_not_partition_directories(tmp_path):
    with pytest.raises(LogDirError, match="no such directory"):
        LogDirectory(tmp_path / "missing-0")
    with pytest.raises(LogDirError, match="named <topic>-<partition>"):
        LogDirectory(tmp_path)
    (tmp_path / "empty-0").mkdir()
    with pytest.raises(LogDirError, match="no %020d.log segments and no .checkpoint snapshots"):
        LogDirectory(tmp_path / "empty-0")
