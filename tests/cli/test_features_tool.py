"""`kraft features` on the shared tool clusters, as kafka-features prints: describe over
ApiVersions through brokers and controllers, a dry run that writes nothing, ALTER on the
cluster, and bad input in one line. The upgrade itself changes the quorum, so it has a
cluster of its own (test_static_to_dynamic.py)."""

import re
import subprocess
import sys

import pytest

from kraft.cli.local_cluster import free_port

from ..server.cluster_helpers import wait_for

LINE = re.compile(r"Feature: (\S+)\tSupportedMinVersion: (\S+)\tSupportedMaxVersion: (\S+)\t"
                  r"FinalizedVersionLevel: (\S+)\tEpoch: (\d+)")


def described(output: str) -> dict[str, tuple[str, str, str]]:
    rows = [LINE.fullmatch(line) for line in output.splitlines()]
    assert all(rows), output
    return {r[1]: (r[2], r[3], r[4]) for r in rows if r}


def test_describe_through_a_broker_or_a_controller_lists_what_the_nodes_support(plain):
    through_broker = plain.kraft("features", "describe")
    assert through_broker.returncode == 0, through_broker.stderr
    controller = plain.cluster.nodes[2].controller_port
    through_controller = plain.kraft("features", "--bootstrap-controller", f"127.0.0.1:{controller}", "describe",
                                     connect=False)
    assert through_controller.returncode == 0, through_controller.stderr
    for output in (through_broker.stdout, through_controller.stdout):
        assert described(output) == {"kraft.derived.fencing": ("0", "1", "0"), "kraft.version": ("0", "1", "0"),
                                     "metadata.version": ("3.3-IV3", "3.3-IV3", "3.3-IV3")}


def test_a_dry_run_checks_and_writes_nothing(plain):
    def dry_run() -> str | None:
        out = plain.kraft("features", "upgrade", "--feature", "kraft.version=1", "--dry-run")
        if out.returncode == 0:
            return out.stdout
        # Until every voter has told the leader its entry (UpdateRaftVoter), as Kafka refuses it.
        assert "because not all of the voters support it" in out.stdout, out.stdout + out.stderr
        return None

    wait_for(dry_run, timeout=60, what="a dry run that may upgrade")
    assert dry_run() == "kraft.version can be upgraded to 1.\n"
    assert described(plain.kraft("features", "describe").stdout)["kraft.version"][2] == "0"
    metadata = plain.kraft("features", "upgrade", "--metadata", "3.4-IV0", "--feature", "kraft.version=1",
                           "--dry-run")
    assert (metadata.returncode, metadata.stderr) == (1, "2 out of 2 operation(s) failed.\n")
    why = ("The update failed for all features since the following feature had an error: Invalid update version 8 "
           "for feature metadata.version. Local controller ")
    lines = metadata.stdout.splitlines()
    assert lines[0] == " `metadata` flag is deprecated and may be removed in a future release."
    assert lines[1].startswith(f"Can not upgrade kraft.version to 1. {why}"), lines
    assert lines[2].startswith(f"Can not upgrade metadata.version to 8. {why}") and lines[2].endswith(
        " only supports versions 7"), lines


def test_updating_features_needs_alter_on_the_cluster(secured):
    reader = secured.login_of("features-reader", "reader-pw")
    connect = ("--bootstrap-server", secured.bootstrap, "--command-config", str(reader))
    refused = secured.kraft("features", *connect, "upgrade", "--feature", "kraft.version=1", connect=False)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "Could not upgrade kraft.version to 1. Authorization failed.\n", "1 out of 1 operation(s) failed.\n")
    assert secured.kraft("features", *connect, "describe", connect=False).returncode == 0  # ApiVersions: anyone
    admin = secured.kraft("features", "downgrade", "--feature", "kraft.version=0", "--dry-run")
    assert (admin.returncode, admin.stdout) == (0, "kraft.version can be downgraded to 0.\n"), admin.stderr


@pytest.mark.parametrize(("args", "error"), [
    (("describe",), "one of the arguments --bootstrap-server --bootstrap-controller is required"),
    (("--bootstrap-server", "h:1", "--bootstrap-controller", "h:2", "describe"),
     "argument --bootstrap-controller: not allowed with argument --bootstrap-server"),
    (("--bootstrap-server", "h:1", "upgrade"), "You must specify at least one feature to upgrade"),
    (("--bootstrap-server", "h:1", "upgrade", "--feature", "kraft.version"),
     "Can't parse feature=level string kraft.version: equals sign not found."),
    (("--bootstrap-server", "h:1", "downgrade", "--feature", "kraft.version=one"),
     "Can't parse feature=level string kraft.version=one: unable to parse one as a short."),
    (("--bootstrap-server", "h:1", "upgrade", "--feature", "a=1", "--feature", "a=2"),
     "Feature a was specified more than once."),
    (("--bootstrap-server", "h:1", "upgrade", "--metadata", "9.9"),
     "Unknown metadata.version 9.9. Supported metadata.version are 3.3-IV3, 3.4-IV0, 3.5-IV0, 3.5-IV1, 3.5-IV2, "
     "3.6-IV0, 3.6-IV1, 3.6-IV2, 3.7-IV0, 3.7-IV1, 3.7-IV2, 3.7-IV3, 3.7-IV4, 3.8-IV0, 3.9-IV0, 4.0-IV0, 4.0-IV1, "
     "4.0-IV2, 4.0-IV3, 4.1-IV0, 4.1-IV1, 4.2-IV0, 4.2-IV1"),
    (("--bootstrap-server", "h:1", "disable"), "You must specify at least one feature to disable"),
])
def test_bad_input_is_kafkas_one_line_and_exit_1(args, error):
    """Found before any connection: no cluster needed."""
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "features", *args], capture_output=True, text=True,
                         timeout=60)
    assert (out.returncode, out.stderr) == (1, error + "\n")


def test_a_server_that_is_not_there_is_one_line_and_exit_1():
    address = f"127.0.0.1:{free_port()}"
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "features", "--bootstrap-server", address, "describe"],
                         capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout) == (1, "") and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and f"no bootstrap server answered ({address})" in out.stderr, out.stderr
