"""`kraft metadata-shell` as a user runs it: real processes over real snapshot and log files."""

import json
import subprocess
import sys

import pytest

from kraft.metadata import ConfigResource, ConfigResourceType, MetadataCache, apply_records, uuid_str
from kraft.metadata import controller as ctl
from kraft.metadata.configs import AlterConfigOp, OpType
from kraft.records import LeaderChangeMessage, assign_offsets, build_control_batch, read_batches
from kraft.storage import FileLog
from tests.metadata.cluster import Cluster, write_snapshot


def shell(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "metadata-shell", *args], capture_output=True,
                          text=True, input=stdin, timeout=120)


@pytest.fixture
def cluster():
    c = Cluster(seed=2)
    c.add_brokers(1, 2, 3)
    c.create("orders", partitions=3, rf=2, configs={"retention.ms": "60000"})
    c.create("audit", partitions=1, rf=1)
    c.commit(ctl.fence_broker(c.image, 1))
    return c


@pytest.fixture
def snapshot(cluster, tmp_path):
    return write_snapshot(tmp_path, cluster.image)


def test_ls_and_cat_in_one_shot_mode(cluster, snapshot):
    out = shell("--snapshot", str(snapshot), "ls", "/topics")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["audit/", "orders/"]
    out = shell("--snapshot", str(snapshot), "cat", "/topics/orders/0")
    partition = json.loads(out.stdout)
    expected = cluster.image.topic("orders").partitions[0]
    assert (partition["replicas"], partition["isr"], partition["leader"]) == (
        list(expected.replicas), list(expected.isr), expected.leader)
    broker = json.loads(shell("--snapshot", str(snapshot), "cat", "/brokers/1").stdout)
    assert broker["fenced"] is True and broker["id"] == 1
    out = shell("--snapshot", str(snapshot), "-c", "cat /configs/topic/orders /topics/orders/id")
    assert out.stdout.splitlines()[1] == '  "retention.ms": "60000"'
    assert out.stdout.splitlines()[-1] == json.dumps(uuid_str(cluster.image.topic("orders").id))


def test_tree_shows_every_node(cluster, snapshot):
    out = shell("--snapshot", str(snapshot), "-c", "tree /")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "/"
    for node in ("  brokers/", "    1: ", "  topics/", "    orders/", "      2: ", "  configs/", "    topic/",
                 "  offset: "):
        assert any(line.startswith(node) for line in lines), node
    assert f'  offset: {{"offset":{cluster.image.offset},"epoch":1}}' in lines


def test_interactive_session(snapshot):
    out = shell("--snapshot", str(snapshot), stdin="cd /topics/orders\npwd\nls\ncd ..\nls\nbogus\nexit\n")
    assert out.returncode == 0
    assert "/topics/orders" in out.stdout and "id\n" in out.stdout and "orders/" in out.stdout
    assert "unknown command 'bogus'" in out.stderr


def test_bad_paths_and_files_are_clear_errors(snapshot, tmp_path):
    out = shell("--snapshot", str(snapshot), "cat", "/topics/nope/0")
    assert out.returncode == 1 and "no such file or directory" in out.stderr
    out = shell("--snapshot", str(snapshot), "cat", "/topics")
    assert out.returncode == 1 and "is a directory" in out.stderr
    out = shell("--snapshot", str(tmp_path / "missing.checkpoint"), "ls")
    assert out.returncode == 2 and "no such file" in out.stderr
    renamed = tmp_path / "copy.checkpoint"
    renamed.write_bytes(snapshot.read_bytes())
    out = shell("--snapshot", str(renamed), "ls")
    assert out.returncode == 2 and "not a snapshot file name" in out.stderr
    damaged = tmp_path / "damaged" / snapshot.name
    damaged.parent.mkdir()
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(data)
    out = shell("--snapshot", str(damaged), "ls")
    assert out.returncode == 2 and "CRC" in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.count(str(damaged)) == 1, "the file is named once"
    out = shell("--dir", str(damaged.parent), "ls")
    assert out.returncode == 2 and "CRC" in out.stderr and out.stderr.count(snapshot.name) == 1


def test_dir_reads_the_latest_snapshot_then_the_log_after_it(cluster, tmp_path):
    """A partition directory: a LeaderChange at offset 0, the cluster's batches after it, and a
    snapshot taken part way. The snapshot holds one topic the log never created, so its
    presence shows the shell started from the snapshot and did not replay the log before it."""
    partition_dir = tmp_path / "__cluster_metadata-0"
    taken_at = len(cluster.log)
    cluster.commit(ctl.delete_topic(cluster.image, "audit"))
    cluster.create("refunds", partitions=2, rf=2)
    log = FileLog(partition_dir)
    log.append_as_follower(build_control_batch(LeaderChangeMessage(1, (1,), (1,)), base_offset=0, partition_leader_epoch=1))
    cache = MetadataCache()
    cache.advance(base_offset=0, last_offset=0, epoch=1)
    for i, data in enumerate(cluster.log):
        shifted = bytearray(data)
        first = next(read_batches(data)).header
        assign_offsets(shifted, first.base_offset + 1, first.partition_leader_epoch)
        log.append_as_follower(shifted)
        if i < taken_at:
            h = next(read_batches(shifted)).header
            cache.apply_batch(next(read_batches(shifted)).records(), base_offset=h.base_offset,
                              last_offset=h.last_offset, epoch=1)
    log.flush()
    log.close()
    marker = ctl.create_topic(cache.image, ctl.NewTopic("from-snapshot", 1, 1), cluster.rng).records
    write_snapshot(partition_dir, apply_records(cache.image, marker, offset=cache.offset, epoch=1))

    out = shell("--dir", str(partition_dir), "-c", "ls /topics")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["from-snapshot/", "orders/", "refunds/"]
    offset = json.loads(shell("--dir", str(partition_dir), "cat", "/offset").stdout)
    assert offset == {"offset": cluster.image.offset + 1, "epoch": 1}
    log_dir = shell("--dir", str(tmp_path), "-c", "ls /topics")  # metadata.log.dir: the partition inside it
    assert log_dir.returncode == 0 and log_dir.stdout.split() == ["from-snapshot/", "orders/", "refunds/"]


def test_dir_without_snapshots_or_segments_is_an_error_not_an_empty_image(tmp_path):
    (tmp_path / "meta.properties").write_text("node.id=1\n")
    out = shell("--dir", str(tmp_path), "ls")
    assert out.returncode == 2 and out.stdout == ""
    assert f"{tmp_path}: no .checkpoint snapshots and no .log segments" in out.stderr
    assert "__cluster_metadata-0" in out.stderr


def test_the_cluster_wide_default_broker_config_is_shown_as_default(cluster, tmp_path):
    for name, threads in (("", "8"), ("2", "4")):
        resource = ConfigResource(ConfigResourceType.BROKER, name)
        cluster.commit(ctl.alter_configs(cluster.image, resource, [AlterConfigOp("num.io.threads", OpType.SET, threads)]))
    snapshot = write_snapshot(tmp_path, cluster.image)
    out = shell("--snapshot", str(snapshot), "-c", "ls /configs/broker")
    assert out.returncode == 0 and out.stdout.split() == ["2", "<default>"]
    out = shell("--snapshot", str(snapshot), "-c", "cat '/configs/broker/<default>' /configs/broker/2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n}\n")[0] == '{\n  "num.io.threads": "8"'
    out = shell("--snapshot", str(snapshot), "-c", "tree /configs/broker")
    assert out.stdout.splitlines() == ["/configs/broker", '  2: {"num.io.threads":"4"}',
                                       '  <default>: {"num.io.threads":"8"}']


def test_tree_of_a_file_prints_the_file(cluster, snapshot):
    out = shell("--snapshot", str(snapshot), "-c", "tree /topics/audit/id")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f'/topics/audit/id: "{uuid_str(cluster.image.topic("audit").id)}"\n'
