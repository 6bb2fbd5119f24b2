"""`make demo` and `make demo SECURE=1` as a user runs them: a real cluster, to the end, with
every node agreeing. The demo's own two-minute budget is left out here: on a loaded test
machine it is a timing assumption, and speed belongs to the benchmarks. Both run with a wide
console, so no line the tests look for is wrapped."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WIDE = {**os.environ, "COLUMNS": "400"}
# The demo took 282 s on a machine at load 18; on a quiet 2-core machine it takes about 90 s.
DEMO_TIMEOUT_S = 900


def run_demo(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """The demo run to its end; whatever happens, none of its node processes outlive the
    test (a demo killed at its timeout leaves its nodes, each in a session of its own)."""
    try:
        return subprocess.run([sys.executable, "-m", "kraft.cli", "demo", *flags, "--dir", str(tmp_path),
                               "--time-budget", "0"], capture_output=True, text=True, timeout=DEMO_TIMEOUT_S,
                              env=WIDE)
    finally:
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and str(tmp_path).encode() in (proc / "cmdline").read_bytes():
                    os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                pass  # gone meanwhile


def assert_the_group_step(stdout: str) -> None:
    """The consumer group's step: it read the metadata log, committed an offset with a
    leader epoch, the coordinator's OffsetFetch returns both, and DescribeGroups shows the
    group stable with its one member."""
    read = re.search(r"consumer joined group kraft-demo, whose coordinator is the leader of __consumer_offsets-\d, "
                     r"and read __cluster_metadata-0 to its end: \d+ records, offsets \d+ to (\d+)", stdout)
    committed = re.search(r"committed offset (\d+) with leader epoch (\d+)", stdout)
    fetched = re.search(r"OffsetFetch from the coordinator \(node \d\): offset (\d+), leader epoch (\d+)", stdout)
    assert read and committed and fetched, stdout[-3000:]
    assert int(committed[1]) == int(read[1]) + 1 and int(committed[2]) >= 1
    assert fetched.groups() == committed.groups()
    assert re.search(r"DescribeGroups: Stable, consumer protocol \w+, 1 member: kraft-demo-consumer from "
                     r"/127\.0\.0\.1, subscribed to __cluster_metadata", stdout), stdout[-3000:]


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_the_demo_runs_and_every_node_agrees(tmp_path):
    out = run_demo(tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for step in ("registered with the active controller", "observer loaded the snapshot", "killed;",
                 "fenced", "is back, following", "All nodes agree", 'spark.read.format("kraft")', "orders-000",
                 "demo finished in"):
        assert step in out.stdout, f"missing {step!r} in the demo's output"
    assert_the_group_step(out.stdout)
    assert_the_last_picture(out.stdout)


def assert_the_last_picture(stdout: str) -> None:
    """The image from a node's files is shown at the offset the live log was read to, where
    the brokers are unfenced (at the files' end every node's controlled shutdown has fenced
    them all), or says why not."""
    live = re.search(r'spark\.read\.format\("kraft"\): \d+ committed records, up to offset (\d+)', stdout)
    assert live, stdout[-3000:]
    tail = stdout[live.end():]
    if f"files at offset {live[1]}, where the live log above ends" in tail:
        brokers = tail[tail.index("|brokerId|"):].split("\n")[2:5]
        assert all("|false |" in line or "|false|" in line for line in brokers), brokers
    else:
        assert "every broker is fenced and every leader -1 because each node's controlled shutdown" in tail


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_the_secure_demo_runs_refuses_what_it_must_and_every_node_agrees(tmp_path):
    """The secured cluster: SASL_SSL/SCRAM clients, an SSL controller listener, ACLs; the
    readers (the group's consumer too) log in as the restricted user; the four refusals
    happen (the demo fails if any goes through), a takeover of admin's group among them."""
    out = run_demo(tmp_path, "--secure")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for step in ("secured: the client listener SASL_SSL (SCRAM-SHA-512)", "registered with the active controller",
                 "observer loaded the snapshot", "is back, following", "All nodes agree",
                 "made reader's credential by AlterUserScramCredentials",
                 "kraft.client.Consumer as reader over SASL_SSL",
                 "refused: reader creating a topic: TOPIC_AUTHORIZATION_FAILED",
                 "refused: reader reading, overwriting and deleting admin's group admin-jobs: "
                 "GROUP_AUTHORIZATION_FAILED each time",
                 "refused: reader with a wrong password: SASL SCRAM-SHA-512 login refused",
                 "sending Vote to the controller listener: CLUSTER_AUTHORIZATION_FAILED",
                 "task(s); as reader over SASL_SSL", "orders-000", "demo finished in"):
        assert step in out.stdout, f"missing {step!r} in the secure demo's output"
    assert_the_group_step(out.stdout)
    assert_the_last_picture(out.stdout)
