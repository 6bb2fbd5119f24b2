"""The files that hold credentials are the node's user's alone (issue 25): the metadata log,
its snapshots and the bootstrap checkpoint carry every SCRAM salt and key, so what kraft
creates in the data directory is 0600 and its directories 0700; a directory open wider is
one line at start; and `kraft storage format --add-scram` takes the password from a file or
standard input, so it need not be in the process list."""

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.cli.scram_args import ScramArgumentError, parse_add_scram
from kraft.controller.bootstrap import BOOTSTRAP_FILE, read_bootstrap
from kraft.security.scram import ScramMechanism, credential_from_salted, salted_password

from ..server.cluster_helpers import create_topics, wait_for

SNAPSHOT_OFTEN = {"metadata.log.max.record.bytes.between.snapshots": "2000",
                  "metadata.snapshot.min.changed_records.ratio": "0", "metadata.log.segment.bytes": "16384"}


def _kraft(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=60,
                          input=stdin)


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "server.properties"
    config.write_text("node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                      "listeners=CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\n"
                      f"metadata.log.dir={tmp_path / 'data' / 'kraft'}\n")
    return config


def _holds(record, mechanism: ScramMechanism, password: str) -> bool:  # noqa: ANN001
    salted = salted_password(mechanism, password, record.salt, record.iterations)
    return credential_from_salted(mechanism, salted, record.salt, record.iterations).stored_key == record.stored_key


def test_storage_format_takes_passwords_from_a_file_and_from_standard_input(tmp_path):
    secret = tmp_path / "alice.password"
    secret.write_text("Wonderland-7\n")
    cluster_id = _kraft("storage", "random-uuid").stdout.strip()
    out = _kraft("storage", "format", "-c", str(_config(tmp_path)), "-t", cluster_id,
                 "--add-scram", f"SCRAM-SHA-256=[name=alice,password-file={secret}]",
                 "--add-scram", "SCRAM-SHA-512=[name=bob,password-file=-]",
                 "--add-scram", "SCRAM-SHA-512=[name=carol,password-file=-]", stdin="Builder-8\nCarol-9\n")
    assert out.returncode == 0, out.stderr
    data = tmp_path / "data" / "kraft"
    alice, bob, carol = read_bootstrap(data)[1:]
    assert _holds(alice, ScramMechanism.SCRAM_SHA_256, "Wonderland-7")
    assert _holds(bob, ScramMechanism.SCRAM_SHA_512, "Builder-8")
    assert _holds(carol, ScramMechanism.SCRAM_SHA_512, "Carol-9")  # one line of standard input each, in order
    # made private as it was created: the directories (the parent too) and the bootstrap file
    assert [stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "data", data, data / BOOTSTRAP_FILE)] == [
        0o700, 0o700, 0o600]


@pytest.mark.parametrize("argument, stdin, message", [
    ("SCRAM-SHA-256=[name=a,password-file=/nonexistent/pw]", "", "Cannot read the password-file /nonexistent/pw"),
    ("SCRAM-SHA-256=[name=a,password-file=-]", "", "No password in the first line of standard input"),
    ("SCRAM-SHA-256=[name=a,password=b,password-file=-]", "x\n",
     "Supply only one of 'password', 'password-file' or 'saltedpassword'"),
])
def test_a_password_file_that_cannot_serve_is_one_line(tmp_path, argument, stdin, message):
    with pytest.raises(ScramArgumentError, match=message.replace("(", r"\(")):
        parse_add_scram(argument, read_stdin=lambda: stdin)
    cluster_id = _kraft("storage", "random-uuid").stdout.strip()
    out = _kraft("storage", "format", "-c", str(_config(tmp_path)), "-t", cluster_id, "--add-scram", argument,
                 stdin=stdin)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_every_file_a_node_writes_is_its_users_alone(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides=SNAPSHOT_OFTEN,
                           add_scram=["SCRAM-SHA-256=[name=alice,password=Wonderland-7]"])
    with cluster:
        cluster.start()
        node = cluster.nodes[1]
        create_topics(cluster, "private", 30)
        wait_for(lambda: any(node.partition_dir.glob("*.checkpoint")), timeout=60, what="a snapshot")
    data = cluster.nodes[1].data_dir
    paths = [data, *data.rglob("*")]
    wide = [(str(p.relative_to(data.parent)), oct(stat.S_IMODE(p.stat().st_mode))) for p in paths
            if stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert wide == []
    kinds = {p.suffix for p in paths if p.is_file()}
    assert {".log", ".index", ".checkpoint"} <= kinds  # segments, indexes, snapshots and the bootstrap file
    assert (data / BOOTSTRAP_FILE).exists()


def test_a_node_says_once_at_start_that_a_directory_is_open_to_others(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0)
    node = cluster.nodes[1]
    node.data_dir.chmod(0o755)
    with cluster:
        cluster.start()
        wait_for(lambda: node.partition_dir.is_dir(), timeout=30, what="the partition directory")
    node.partition_dir.chmod(0o750)
    with cluster:
        cluster.start()  # restarted: both directories named, on one line
    lines = [line for line in node.log_path.read_text().splitlines() if "open to other users" in line]
    assert len(lines) == 2, lines  # one a start
    assert str(node.data_dir) + " (0755)" in lines[1] and str(node.partition_dir) + " (0750)" in lines[1]
    assert "chmod 700" in lines[1]
