"""The protocol fuzzer's short forms: the decoders alone on hostile frames, and a real node
under hostile requests on both listeners (`make fuzz` runs the long form)."""

import re
import subprocess
import sys


def kraft(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True,
                          text=True, check=False, timeout=timeout)


def test_decode_request_never_aborts_on_hostile_frames():
    """Mutated frames of every request and response class kio has, through the decoders, in
    a child process: an abort there (kio's reader allocating by a hostile count) fails this
    test instead of killing pytest. A sample here; make fuzz sends a million."""
    out = kraft("fuzz", "--codec", "--inputs", "50000", "--seed", "14", timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "50000 inputs" in out.stdout and "bugs: 0" in out.stdout


def test_a_node_under_hostile_requests_keeps_serving(tmp_path):
    out = kraft(
        "fuzz", "--inputs", "10000", "--seed", "7", "--dir", str(tmp_path / "fuzz"), timeout=600
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert re.search(r"inputs sent: 10000 ", out.stdout) and "crashes: 0" in out.stdout
    checks = re.search(r"service checks: (\d+), failed: 0", out.stdout)
    assert checks and int(checks[1]) >= 1, out.stdout
