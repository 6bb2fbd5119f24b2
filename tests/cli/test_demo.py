"""`make demo` and `make demo SECURE=1` as a user runs them: a real cluster, to the end, with
every node agreeing. The demo's own two-minute budget is left out here: on a loaded test
machine it is a timing assumption, and speed belongs to the benchmarks."""

import os
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


def test_the_secure_demo_runs_refuses_what_it_must_and_every_node_agrees(tmp_path):
    """The secured cluster: SASL_SSL/SCRAM clients, an SSL controller listener, ACLs; the
    readers log in as the restricted user; the three refusals happen (the demo fails if
    any goes through). A wide console, so no line the test looks for is wrapped."""
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "demo", "--secure", "--dir", str(tmp_path),
                          "--time-budget", "0"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COLUMNS": "400"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for step in ("secured: the client listener SASL_SSL (SCRAM-SHA-512)", "registered with the active controller",
                 "observer loaded the snapshot", "is back, following", "All nodes agree",
                 "made reader's credential by AlterUserScramCredentials",
                 "kraft.client.Consumer as reader over SASL_SSL",
                 "refused: reader creating a topic: TOPIC_AUTHORIZATION_FAILED",
                 "refused: reader with a wrong password: SASL SCRAM-SHA-512 login refused",
                 "sending Vote to the controller listener: CLUSTER_AUTHORIZATION_FAILED",
                 "task(s); as reader over SASL_SSL", "orders-000", "demo finished in"):
        assert step in out.stdout, f"missing {step!r} in the secure demo's output"
