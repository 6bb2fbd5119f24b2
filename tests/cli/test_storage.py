"""`kraft storage` as kafka-storage: format (-t, -c, --ignore-formatted), info, random-uuid."""

import subprocess
import sys

import pytest

from kraft.storage.meta_properties import InvalidClusterIdError, check_cluster_id, kafka_text, read_directory_id

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


def storage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "storage", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(f"node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                    f"listeners=CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\n"
                    f"metadata.log.dir={tmp_path / 'data'}\n")
    return path


def test_format_then_format_again_as_kafka_storage_does(config, tmp_path):
    data = tmp_path / "data"
    out = storage("format", "-t", CLUSTER_ID, "-c", str(config))
    assert out.returncode == 0 and out.stdout == f"Formatting metadata directory {data} with metadata.version 3.3-IV3.\n"
    again = storage("format", "--cluster-id", CLUSTER_ID, "--config", str(config))
    assert again.returncode == 1 and again.stderr.strip() == (
        f"kraft storage format: Log directory {data} is already formatted. Use --ignore-formatted to ignore this "
        "directory and format the others.")
    ignored = storage("format", "-t", CLUSTER_ID, "-c", str(config), "--ignore-formatted")
    assert ignored.returncode == 0 and ignored.stdout == "All of the log directories are already formatted.\n"
    other = storage("format", "-t", "AAAAAAAAAAAAAAAAAAAAAA", "-c", str(config), "-g")
    assert other.returncode == 1 and "already formatted for cluster MkU3OEVBNTcwNTJENDM2Qk node 1" in other.stderr


@pytest.mark.parametrize("cluster_id", ["not-a-uuid", "-kU3OEVBNTcwNTJENDM2Qk", "MkU3OEVBNTcwNTJENDM2QkMkU3OEVB", "!!"])
def test_a_cluster_id_that_is_not_a_kafka_uuid_is_refused_before_anything_is_written(config, tmp_path, cluster_id):
    out = storage("format", f"--cluster-id={cluster_id}", "-c", str(config))  # '=': a leading '-' is a value
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "UUID" in out.stderr, out.stderr
    assert not (tmp_path / "data").exists()


def test_random_uuids_are_kafka_uuids_that_never_start_with_a_dash():
    ids = subprocess.run([sys.executable, "-c", "from kraft.storage.meta_properties import random_cluster_id\n"
                          "print('\\n'.join(random_cluster_id() for _ in range(2000)))"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert len(set(ids)) == 2000 and all(check_cluster_id(i) == i and len(i) == 22 for i in ids)
    assert storage("random-uuid").stdout.strip() not in ids
    with pytest.raises(InvalidClusterIdError):
        check_cluster_id("-" + ids[0][1:])


def test_info_shows_the_directory_and_its_metadata_or_the_problem(config, tmp_path):
    data = tmp_path / "data"
    out = storage("info", "-c", str(config))
    assert out.returncode == 1 and out.stdout == f"Found problem:\n  {data} does not exist\n\n"
    data.mkdir()
    out = storage("info", "-c", str(config))
    assert out.returncode == 1 and out.stdout == (
        f"Found log directory:\n  {data}\n\nFound problem:\n  {data} is not formatted.\n\n")
    storage("format", "-t", CLUSTER_ID, "-c", str(config))
    directory_id = kafka_text(read_directory_id(data))  # meta.properties v1 names the directory (KIP-858)
    out = storage("info", "-c", str(config))
    assert out.returncode == 0 and out.stdout == (
        f"Found log directory:\n  {data}\n\nFound metadata: {{cluster.id={CLUSTER_ID}, directory.id={directory_id}, "
        "node.id=1, version=1}\n\n")
