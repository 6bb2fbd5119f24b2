"""`make demo` as a user runs it: a real cluster, to the end, with every node agreeing. The
demo's own two-minute budget is left out here: on a loaded test machine it is a timing
assumption, and speed belongs to the benchmarks."""

import subprocess
import sys


def test_the_demo_runs_and_every_node_agrees(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "demo", "--dir", str(tmp_path), "--time-budget", "0"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for step in ("registered with the active controller", "observer loaded the snapshot", "killed;",
                 "fenced", "is back, following", "All nodes agree", 'spark.read.format("kraft")', "orders-000",
                 "demo finished in"):
        assert step in out.stdout, f"missing {step!r} in the demo's output"
