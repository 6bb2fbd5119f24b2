"""`kraft chaos` (behind `make chaos`): a short run must inject its faults and pass its checks."""

import subprocess
import sys


def test_a_short_chaos_run_loses_no_acknowledged_write(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "kraft.cli", "chaos", "--rounds", "3", "--seed", "28", "--dir", str(tmp_path / "c")],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rounds = [line for line in out.stdout.splitlines() if line.startswith("round ")]
    assert len(rounds) == 3 and all("writes flowing again" in line for line in rounds)
    # Seed 28 kills the leader, fails a node's disk, then kills a voter.
    assert "disk-fault" in rounds[1] and "it stopped naming" in rounds[1], rounds[1]
    assert "passed: 3 rounds" in out.stdout and "all nodes agree" in out.stdout
