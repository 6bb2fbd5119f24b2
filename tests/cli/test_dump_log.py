"""`kraft dump-log` and `kraft demo` as a user runs them: real processes."""

import subprocess
import sys

from kraft.records import Compression, LeaderChangeMessage, SimpleRecord, build_batch, build_control_batch


def kraft(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def write_segment(path):
    data = build_control_batch(LeaderChangeMessage(1, (1, 2, 3), (1, 3)), base_offset=0, partition_leader_epoch=1)
    data += build_batch([SimpleRecord(b"k", b"hello", [("h", b"v")], 5)], base_offset=1, partition_leader_epoch=1,
                        compression=Compression.ZSTD)
    path.write_bytes(data)
    return data


def test_dump_log_prints_batches_and_records(tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    write_segment(seg)
    out = kraft("dump-log", "--print-records", "--files", str(seg))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Dumping {seg}"
    assert lines[1] == "Log starting offset: 0"
    assert "baseOffset: 0 lastOffset: 0 count: 1" in lines[2] and "controlType: LEADER_CHANGE" in lines[2]
    assert '"leaderId":1' in lines[3] and '"grantingVoters":[{"voterId":1},{"voterId":3}]' in lines[3]
    assert "baseOffset: 1 lastOffset: 1" in lines[4] and "compresscodec: zstd" in lines[4] and "isvalid: true" in lines[4]
    assert "| offset: 1 CreateTime: 5 keySize: 1 valueSize: 5" in lines[5] and "payload: hello" in lines[5]


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
    assert out.returncode == 2 and "no such file" in out.stderr


def test_demo_runs_and_verifies(tmp_path):
    out = kraft("demo", "--dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "Read back and verified" in out.stdout
    assert "isvalid: false" in out.stdout  # the damaged copy is caught


def test_dump_log_reads_index_files_and_checks_them(tmp_path):
    from kraft.storage import FileLog

    log = FileLog(tmp_path / "__cluster_metadata-0", index_interval_bytes=100)
    for i in range(10):
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
