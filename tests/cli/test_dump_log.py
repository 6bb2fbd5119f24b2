"""`kraft dump-log` and `kraft demo` as a user runs them: real processes."""

import shlex
import subprocess
import sys

from kraft.records import Compression, LeaderChangeMessage, SimpleRecord, build_batch, build_control_batch


def kraft(*args: str, cwd=None, pipe_to: str | None = None) -> subprocess.CompletedProcess:
    """The kraft command run as a user runs it; with `pipe_to`, its output piped into that
    command by bash, and its own exit status printed last ("kraft exit status N")."""
    command = [sys.executable, "-m", "kraft.cli", *args]
    if pipe_to is not None:
        command = ["bash", "-c", f'{shlex.join(command)} | {pipe_to}; echo "kraft exit status ${{PIPESTATUS[0]}}"']
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=120)


def write_segment(path):
    data = build_control_batch(LeaderChangeMessage(1, (1, 2, 3), (1, 3)), base_offset=0, partition_leader_epoch=1)
    data += build_batch([SimpleRecord(b"k", b"hello", [("h", b"v")], 5)], base_offset=1, partition_leader_epoch=1,
                        compression=Compression.ZSTD)
    path.write_bytes(data)
    return data


def test_dump_log_prints_batches_and_records(tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    write_segment(seg)
    out = kraft("dump-log", "--print-records", "--files", str(seg))  # kraft's old name for --print-data-log
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {seg}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
                               "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true "
                               "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: ")
    assert lines[3].endswith(' LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1},{"voterId":2},'
                             '{"voterId":3}],"grantingVoters":[{"voterId":1},{"voterId":3}]}')
    assert "baseOffset: 1 lastOffset: 1" in lines[4] and "compresscodec: zstd" in lines[4] and "isvalid: true" in lines[4]
    assert lines[5] == "| offset: 1 CreateTime: 5 keySize: 1 valueSize: 5 sequence: -1 headerKeys: [h] key: k payload: hello"
    assert len(lines) == 6


def test_dump_log_reports_bad_crc_and_torn_tail_and_goes_on(tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    data = bytearray(write_segment(seg))
    data[30] ^= 0xFF  # inside the first batch's CRC span
    seg.write_bytes(bytes(data[:-3]))
    out = kraft("dump-log", "--files", str(seg))
    assert out.returncode == 0
    assert "baseOffset: 0" in out.stdout and "isvalid: false" in out.stdout
    assert "Found" in out.stdout and "invalid bytes at the end" in out.stdout


def test_dump_log_refuses_missing_files_clearly(tmp_path):
    out = kraft("dump-log", "--files", str(tmp_path / "nope.log"))
    assert out.returncode == 2 and out.stderr == f"kraft dump-log: {tmp_path / 'nope.log'}: no such file\n"


def test_dump_log_reads_index_files_and_checks_them(tmp_path):
    from kraft.storage import FileLog

    log = FileLog(tmp_path / "__cluster_metadata-0", index_interval_bytes=100)
    for _ in range(10):
        log.append_as_leader(build_batch([SimpleRecord(None, b"x" * 60)] * 3), epoch=1)
    log.close()
    index = tmp_path / "__cluster_metadata-0" / "00000000000000000000.index"
    out = kraft("dump-log", "--files", str(index))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1] == "offset: 2 position: 0" and len(lines) > 3
    assert "mismatch" not in out.stdout
    raw = bytearray(index.read_bytes())
    raw[11] ^= 0x01  # the second entry's position now points inside a batch
    index.write_bytes(bytes(raw))
    assert "mismatch" in kraft("dump-log", "--files", str(index)).stdout


def write_snapshot(directory):
    from kraft.storage import FileSnapshotStore, SnapshotId

    store = FileSnapshotStore(directory)
    writer = store.create_writer(SnapshotId(7, 2), 1234, records_per_batch=2)
    writer.append([SimpleRecord(b"k%d" % i, b"value-%d" % i) for i in range(5)])
    return store.path(writer.freeze())


def test_dump_log_reads_a_snapshot_and_says_it_validates(tmp_path):
    path = write_snapshot(tmp_path / "__cluster_metadata-0")
    out = kraft("dump-log", "--files", str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == [f"Dumping {path}", "Snapshot end offset: 7, epoch: 2"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert [b.split()[1] for b in batches] == ["0", "1", "3", "5", "6"]  # header, 2 + 2 + 1 records, footer
    assert all("partitionLeaderEpoch: 2" in b and "isvalid: true" in b for b in batches)
    assert "isControl: true" in batches[0] and "isControl: true" in batches[-1]
    assert len(lines) == 2 + len(batches) + 1, "without --deep-iteration, batches only"
    assert lines[-1] == "Snapshot validates: true"
    records = [line for line in kraft("dump-log", "--deep-iteration", "--files", str(path)).stdout.splitlines()
               if line.startswith("|")]
    assert len(records) == 7 and "payload" not in "".join(records)
    assert records[0].endswith(' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}')
    assert records[-1].endswith(' SnapshotFooter {"version":0}')
    out = kraft("dump-log", "--print-data-log", "--files", str(path))
    assert "| offset: 1 CreateTime: 1234 keySize: 2 valueSize: 7 sequence: -1 headerKeys: [] key: k0 payload: value-0" in (
        out.stdout.splitlines())


def test_dump_log_says_why_a_snapshot_does_not_validate(tmp_path):
    from kraft.records import iter_batches

    path = write_snapshot(tmp_path / "__cluster_metadata-0")
    good = path.read_bytes()
    starts = [h.position for h in iter_batches(good)]
    damaged = bytearray(good)
    damaged[starts[2] + 40] ^= 0x10
    path.write_bytes(damaged)
    out = kraft("dump-log", "--files", str(path))
    assert out.returncode == 0, out.stderr
    assert "isvalid: false" in out.stdout
    assert out.stdout.splitlines()[-1].startswith(
        f"Snapshot validates: false: {path}: corrupt snapshot at position {starts[2]}: CRC mismatch"
    )

    path.write_bytes(good[: starts[-1]])  # the footer is gone
    out = kraft("dump-log", "--files", str(path))
    assert out.stdout.count("baseOffset:") == 4
    assert "Snapshot validates: false" in out.stdout and "is not a SnapshotFooter" in out.stdout

    renamed = path.with_name("copy.checkpoint")
    renamed.write_bytes(good)
    out = kraft("dump-log", "--files", str(renamed))
    assert out.stdout.count("baseOffset:") == 5, "a bad name does not stop the dump"
    assert "Snapshot validates: false: 'copy.checkpoint' is not a snapshot file name" in out.stdout
