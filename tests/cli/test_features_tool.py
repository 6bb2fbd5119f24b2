"""`kraft features` on the shared tool clusters, as kafka-features prints: describe over
ApiVersions through brokers and controllers, a dry run that writes nothing, a release's
levels set or refused, ALTER on the cluster, and bad input in one line; version-mapping and
feature-dependencies without a cluster. The upgrade itself changes the quorum, so it has a
cluster of its own (test_static_to_dynamic.py)."""

import re
import subprocess
import sys

import pytest

from kraft.cli.local_cluster import free_port
from kraft.cli.main import main as kraft_main

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


REFUSED = ("The update failed for all features since the following feature had an error: Invalid update version 1 for "
           "feature group.version. Local controller ")


def test_a_release_version_sets_what_kraft_supports_and_the_controller_refuses_the_rest(plain):
    """3.3-IV3's levels are kraft's (an upgrade sends only those above 0: metadata.version);
    4.2's ask for features kraft lacks, so the controller refuses every one, as Kafka's tool
    prints a refusal: the first checked (group.version, first in FeatureCommand's HashMap)
    named on each line. A downgrade sends every feature, level 0 included."""
    done = plain.kraft("features", "upgrade", "--release-version", "3.3-IV3")
    assert (done.returncode, done.stdout, done.stderr) == (0, "metadata.version was upgraded to 7.\n", "")
    levels = {"eligible.leader.replicas.version": 1, "group.version": 1, "kraft.version": 1, "metadata.version": 29,
              "share.version": 1, "streams.version": 1, "transaction.version": 2}
    for dry_run, verb in ((("--dry-run",), "Can not"), ((), "Could not")):
        out = plain.kraft("features", "upgrade", "--release-version", "4.2", *dry_run)
        assert (out.returncode, out.stderr) == (1, "7 out of 7 operation(s) failed.\n"), out.stdout + out.stderr
        lines = out.stdout.splitlines()
        assert [line.split(". ")[0] for line in lines] == [f"{verb} upgrade {n} to {lv}" for n, lv in levels.items()]
        assert all(line.split(". ", 1)[1].startswith(REFUSED) and line.endswith(" does not support this feature.")
                   for line in lines), lines
    assert described(plain.kraft("features", "describe").stdout)["metadata.version"][2] == "3.3-IV3"
    down = plain.kraft("features", "downgrade", "--release-version", "3.3", "--dry-run")
    assert (down.returncode, down.stdout) == (0, "".join(
        f"{name} can be downgraded to {7 if name == 'metadata.version' else 0}.\n" for name in levels)), down.stderr
    down = plain.kraft("features", "downgrade", "--release-version", "3.3-IV3")
    assert (down.returncode, down.stdout.splitlines()[2]) == (0, "kraft.version was downgraded to 0."), down.stderr


def kraft_features(capsys, *args: str) -> tuple[int, str, str]:
    """`kraft features` in this process, against an address nothing listens on: these
    commands never connect (Kafka 4.2 still wants the flag)."""
    code = kraft_main(["features", "--bootstrap-server", f"127.0.0.1:{free_port()}", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version_mapping_prints_kafkas_levels_for_a_release_without_a_cluster(capsys):
    assert kraft_features(capsys, "version-mapping") == (0, (
        "metadata.version=29 (4.2-IV1)\nkraft.version=1\ntransaction.version=2\ngroup.version=1\n"
        "eligible.leader.replicas.version=1\nshare.version=1\nstreams.version=1\n"), "")
    # Kafka 4.1's kafka-storage version-mapping, as KAFKA-19749 quotes it; the release as given.
    assert kraft_features(capsys, "version-mapping", "--release-version", "4.1")[1] == (
        "metadata.version=27 (4.1)\nkraft.version=1\ntransaction.version=2\ngroup.version=1\n"
        "eligible.leader.replicas.version=1\nshare.version=0\nstreams.version=0\n")
    assert kraft_features(capsys, "version-mapping", "--release-version", "3.3-IV3")[1] == (
        "metadata.version=7 (3.3-IV3)\nkraft.version=0\ntransaction.version=0\ngroup.version=0\n"
        "eligible.leader.replicas.version=0\nshare.version=0\nstreams.version=0\n")
    for release in ("2.9-IV2", "invalid", "3.3-IV2", "4.3"):  # FeatureCommandTest's two, and either side
        assert kraft_features(capsys, "version-mapping", "--release-version", release) == (
            1, "", f"Unknown release version '{release}'. Supported versions are: 3.3-IV3 to 4.2-IV1\n")


def test_feature_dependencies_prints_what_each_level_requires(capsys):
    assert kraft_features(capsys, "feature-dependencies", "--feature", "metadata.version=17") == (
        0, "metadata.version=17 (3.7-IV2) has no dependencies.\n", "")  # FeatureCommandTest's line
    assert kraft_features(capsys, "feature-dependencies", "--feature", "transaction.version=2", "--feature",
                          "group.version=1", "--feature", "kraft.version=1", "--feature", "share.version = 1")[1] == (
        "transaction.version=2 has no dependencies.\ngroup.version=1 has no dependencies.\n"
        "kraft.version=1 requires:\n    metadata.version=21 (3.9-IV0)\n"
        "share.version=1 requires:\n    metadata.version=27 (4.1-IV1)\n")
    for feature, error in (("unknown.feature=1", "Unknown feature: unknown.feature"),
                           ("transaction.version=1000", "No feature:transaction.version with feature level 1000"),
                           ("metadata.version=6", "Unknown metadata.version 6"),
                           ("metadata.version=invalid",
                            "Can't parse feature=level string metadata.version=invalid: unable to parse invalid as a "
                            "short.")):
        assert kraft_features(capsys, "feature-dependencies", "--feature", "group.version=0", "--feature",
                              feature) == (1, "group.version=0 has no dependencies.\n", error + "\n")
    assert kraft_features(capsys, "feature-dependencies") == (1, "", "argument --feature is required\n")


def test_updating_features_needs_alter_on_the_cluster(secured):
    reader = secured.login_of("features-reader", "reader-pw")
    connect = ("--bootstrap-server", secured.bootstrap, "--command-config", str(reader))
    refused = secured.kraft("features", *connect, "upgrade", "--feature", "kraft.version=1", connect=False)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "Could not upgrade kraft.version to 1. Authorization failed.\n", "1 out of 1 operation(s) failed.\n")
    assert secured.kraft("features", *connect, "describe", connect=False).returncode == 0  # ApiVersions: anyone
    admin = secured.kraft("features", "downgrade", "--feature", "kraft.version=0", "--dry-run")
    assert (admin.returncode, admin.stdout) == (0, "kraft.version can be downgraded to 0.\n"), admin.stderr


KNOWN = ("Supported metadata.version are 3.3-IV3, 3.4-IV0, 3.5-IV0, 3.5-IV1, 3.5-IV2, 3.6-IV0, 3.6-IV1, 3.6-IV2, "
         "3.7-IV0, 3.7-IV1, 3.7-IV2, 3.7-IV3, 3.7-IV4, 3.8-IV0, 3.9-IV0, 4.0-IV0, 4.0-IV1, 4.0-IV2, 4.0-IV3, 4.1-IV0, "
         "4.1-IV1, 4.2-IV0, 4.2-IV1")


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
     f"Unknown metadata.version 9.9. {KNOWN}"),
    (("--bootstrap-server", "h:1", "disable"), "You must specify at least one feature to disable"),
    (("--bootstrap-server", "h:1", "downgrade", "--release-version", "3.3-IV3", "--metadata", "3.3-IV3"),
     "Can not specify `release-version` with other feature flags."),
    (("--bootstrap-server", "h:1", "upgrade", "--release-version", "foo"),
     f"Unknown metadata.version foo. {KNOWN}"),
    (("version-mapping",), "one of the arguments --bootstrap-server --bootstrap-controller is required"),
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
