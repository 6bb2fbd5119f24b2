"""Every admin tool against an address where nothing listens: one line where Kafka's tool
writes its error, exit 1, never a traceback or a wait."""

import subprocess
import sys

import pytest

from kraft.cli.local_cluster import free_port


@pytest.mark.parametrize("tool, where, prefix", [
    (["topics", "--list"], "stdout", "Error while executing topic command : "),
    (["configs", "--describe", "--entity-type", "topics"], "stderr", "Error while executing config command with "
                                                                      "args "),
    (["acls", "--list"], "stdout", "Error while executing ACL command: "),
    (["consumer-groups", "--list"], "stdout", "\nError: Executing consumer group command failed due to "),
    (["cluster", "cluster-id"], "stderr", ""),
])
def test_a_server_that_is_not_there_is_kafkas_error_line(tool, where, prefix):
    address = f"127.0.0.1:{free_port()}"
    run = subprocess.run([sys.executable, "-m", "kraft.cli", *tool, "--bootstrap-server", address],
                         capture_output=True, text=True, timeout=120)
    out = getattr(run, where)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert out.startswith(prefix) and f"no bootstrap server answered ({address})" in out, out
    assert out.strip().count("\n") == (1 if tool[0] == "configs" else 0), "one line (configs: its heading too)"
