"""`kraft metadata-shell` over Kafka-shaped and kraft-written metadata files.

Most tests run the shell in this process over a tree loaded from real files; those that
need the exit status, stderr or stdin run the kraft command as a user does.
"""

import io
import subprocess
import sys

import pytest

from kraft.cli.metadata_files import load
from kraft.cli.metadata_nodes import root_node
from kraft.cli.metadata_shell import Shell, columns, glob_pattern
from kraft.metadata import MetadataCache, apply_records, uuid_str
from kraft.metadata import operations as ctl
from kraft.metadata import records as r
from kraft.records import LeaderChangeMessage, assign_offsets, build_control_batch, read_batches
from kraft.storage import FileLog
from tests.cli.kafka_files import (
    ACL_ID,
    AUDIT,
    ORDERS,
    TIME,
    LogBuilder,
    cluster_log,
    write_cluster_dir,
    write_kafka_snapshot,
)
from tests.metadata.cluster import Cluster, write_snapshot

UNKNOWN_WARNING = "offset 43: unknown metadata record API key 90; left out of the image"


def shell(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "metadata-shell", *args], capture_output=True,
                          text=True, input=stdin, timeout=120)


class Session:
    """A shell over the image in `path` (a snapshot file or a directory), output captured."""

    def __init__(self, path, interactive: bool = False) -> None:
        loader = load("test", str(path) if path.is_file() else None, None if path.is_file() else str(path))
        self.out = io.StringIO()
        self.shell = Shell(root_node(loader.image, loader.time_ms), out=self.out, interactive=interactive)

    def __call__(self, line: str) -> list[str]:
        start = self.out.tell()
        assert self.shell.run(line), line
        self.out.seek(start)
        return self.out.read().splitlines()


@pytest.fixture
def log_dir(tmp_path):
    """A metadata.log.dir holding a Kafka-shaped __cluster_metadata-0."""
    write_cluster_dir(tmp_path)
    return tmp_path


@pytest.fixture
def kafka(log_dir):
    return Session(log_dir)


def test_ls_image_in_a_kafka_metadata_log_dir(log_dir):
    out = shell("--dir", str(log_dir), "ls", "/image")
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["acls", "clientQuotas", "cluster", "configs", "delegationToken", "features",
                                       "producerIds", "provenance", "scram", "topics"]
    partition = log_dir / "__cluster_metadata-0" / "00000000000000000000.log"
    assert out.stderr.splitlines() == [
        f"kraft metadata-shell: {partition}: {UNKNOWN_WARNING}",
        "kraft metadata-shell: 1 record(s) do not decode and were left out of the image",
    ]
    assert shell("--dir", str(log_dir), "-c", "ls /").stdout == "image\nlocal\n"


def test_cat_shows_kafkas_text_for_each_kind_of_node(kafka):
    orders, audit = uuid_str(ORDERS), uuid_str(AUDIT)
    d1, d2 = uuid_str(bytes([101]) * 15 + b"\x07"), uuid_str(bytes([102]) * 15 + b"\x07")
    assert kafka("cat /image/topics/byName/orders/0") == [
        f"PartitionRegistration(replicas=[1, 2], directories=[{d1}, {d2}], isr=[2], removingReplicas=[], "
        "addingReplicas=[], elr=[], lastKnownElr=[], leader=2, leaderRecoveryState=RECOVERED, leaderEpoch=1, "
        "partitionEpoch=1)"]
    assert kafka(f"cat /image/topics/byId/{audit}/0") == [
        "PartitionRegistration(replicas=[2], directories=[AAAAAAAAAAAAAAAAAAAAAA], isr=[2], removingReplicas=[], "
        "addingReplicas=[], elr=[], lastKnownElr=[], leader=2, leaderRecoveryState=RECOVERED, leaderEpoch=0, "
        "partitionEpoch=0)"]
    assert kafka(f"cat /image/topics/byId/{orders}/name /image/topics/byName/orders/id") == ["orders", orders]
    assert kafka(f"cat /image/acls/{uuid_str(ACL_ID)}") == [
        "StandardAcl(resourceType=TOPIC, resourceName=orders, patternType=LITERAL, principal=User:alice, host=*, "
        "operation=READ, permissionType=ALLOW)"]
    assert kafka("cat '/image/clientQuotas/user(alice)/producer_byte_rate'") == ["1.048576E7"]
    assert kafka("cat /image/cluster/brokers/1") == [
        "BrokerRegistration(id=1, epoch=11, incarnationId=AQEBAQEBAQEBAQEBAQEBBw, listeners=[Endpoint("
        "listenerName='PLAINTEXT', securityProtocol=PLAINTEXT, host='b1.example', port=9091)], supportedFeatures="
        f"{{metadata.version: 1-25}}, rack=Optional[rack-a], fenced=false, inControlledShutdown=false, "
        f"isMigratingZkBroker=false, directories=[{d1}])"]
    assert kafka("cat /image/cluster/controllers/3000") == [
        "ControllerRegistration(id=3000, incarnationId=Hx8fHx8fHx8fHx8fHx8fBw, zkMigrationReady=false, listeners=["
        "Endpoint(listenerName='CONTROLLER', securityProtocol=PLAINTEXT, host='c1.example', port=9093)], "
        "supportedFeatures={kraft.version: 0-1})"]
    assert kafka("cat /image/scram/SCRAM-SHA-256/alice") == [
        "ScramCredentialData(salt=0102, storedKey=aabb, serverKey=ccdd, iterations=4096)"]
    assert kafka("cat /image/delegationToken/tok-1") == [
        "DelegationTokenDatatokenId=tok-1(owner=User:alice(tokenRequester=User:admin(renewers=User:bob User:carol, "
        "issueTimestamp=1000, maxTimestamp=3000), expiryTimestamp=2000"]
    assert kafka("cat /image/configs/TOPIC:orders/retention.ms /image/configs/BROKER/num.io.threads "
                 "/image/configs/BROKER:2/num.io.threads /image/producerIds/nextProducerId") == ["60000", "8", "4", "5000"]
    assert kafka("cat /image/provenance") == ["offset 55, epoch 2, time 2024-10-25T03:33:01.123Z[UTC]"]
    assert TIME == 1_729_827_181_123


def test_the_image_is_what_kafka_replays(kafka):
    """Transactions apply at their end or not at all; removals remove; a fenced broker stays."""
    assert kafka("ls /image/topics/byName") == ["audit", "orders"], "ghost was aborted, tmp removed"
    assert kafka("ls /image/cluster/brokers /image/cluster/controllers") == [
        "brokers:", "1", "2", "3", "", "controllers:", "3000"]
    assert "fenced=true" in kafka("cat /image/cluster/brokers/3")[0]
    assert kafka("ls /image/acls /image/delegationToken") == ["acls:", uuid_str(ACL_ID), "", "delegationToken:", "tok-1"]
    assert kafka("ls /image/scram/SCRAM-SHA-512") == []
    assert kafka("ls /image/clientQuotas") == ["clientId(<default>)", "clientId(app)_user(bob)", "user(alice)"]


def test_find_tree_and_globs(kafka):
    assert kafka("find /image/features") == [
        "/image/features", "/image/features/finalized_group.version", "/image/features/metadataVersion",
        "/image/features/zkMigrationState"]
    assert kafka("tree /image/features") == [
        "finalized_group.version:", "  1", "metadataVersion:", "  3.9-IV0", "zkMigrationState:", "  NONE"]
    assert kafka("tree /image/clientQuotas/user(alice)") == ["producer_byte_rate:", "  1.048576E7"]
    assert kafka("cat /image/topics/byName/*/name") == ["audit", "orders"]
    assert kafka("find /image/topics/byName/{audit,orders}/0") == [
        "/image/topics/byName/audit/0", "/image/topics/byName/orders/0"]
    assert kafka("ls /image/producerIds/nextProducerId") == ["nextProducerId"]
    assert kafka("cd /image/topics; find byName/audit") == [
        "byName/audit", "byName/audit/0", "byName/audit/id", "byName/audit/name"]


def test_cd_and_pwd(kafka, log_dir):
    assert kafka("pwd") == ["/"]
    assert kafka("cd /image/topics/byName/orders; pwd; cd ..; pwd; cd; pwd") == [
        "/image/topics/byName/orders", "/image/topics/byName", "/"]
    assert kafka("cd image; cd cluster; ls") == ["brokers", "controllers"]
    out = shell("--dir", str(log_dir), "-c", "cd /image/topics; pwd")
    assert out.returncode == 0 and out.stdout == "/image/topics\n"


def test_errors_say_what_kafka_says_on_stderr_and_fail(log_dir):
    for command, error in [
        ("cat /image/topics/byName/nope/0", "cat: /image/topics/byName/nope/0: No such file or directory."),
        ("cat /image/topics", "cat: /image/topics: Is a directory"),
        ("cd /image/provenance", "cd: /image/provenance: not a directory."),
        ("cd /nope", "cd: /nope: no such directory."),
        ("ls /nope", "ls: /nope: no such file or directory."),
        ("history", "history: the history command requires a shell."),
        ("bogus", "error: unknown command 'bogus'; try help"),
    ]:
        out = shell("--dir", str(log_dir), "-c", command)
        assert out.returncode == 1 and out.stderr.splitlines()[-1] == error, command


def test_interactive_session_with_history(log_dir):
    out = shell("--dir", str(log_dir), stdin="cd /image/topics/byName\npwd\nls\ncd ..\nhistory 3\nbogus\nexit\nls\n")
    assert out.returncode == 0
    lines = out.stdout.replace(">> ", "").splitlines()
    assert lines[0] == "[ kraft metadata shell ]"
    assert lines[1:] == ["/image/topics/byName", "audit", "orders", "    2  ls", "    3  cd ..", "    4  history 3"]
    assert "unknown command 'bogus'" in out.stderr


def test_completion_offers_commands_and_paths(log_dir):
    session = Session(log_dir, interactive=True)
    complete = session.shell.complete
    assert complete("") == [f"{c} " for c in ("cat", "cd", "exit", "find", "help", "history", "ls", "man", "pwd", "tree")]
    assert complete("c") == ["cat ", "cd "]
    assert complete("ls /im") == ["/image/"]
    assert complete("cat /image/topics/byName/o") == ["/image/topics/byName/orders/"]
    assert complete("cat /image/topics/byName/orders/") == [
        f"/image/topics/byName/orders/{n}" for n in ("0 ", "1 ", "2 ", "id ", "name ")]
    assert complete("tree /image/c") == ["/image/clientQuotas/", "/image/cluster/", "/image/configs/"]
    assert complete("man hi") == ["history "]
    assert complete("pwd ") == [] and complete("ls /nope/") == []
    session("cd /image")
    assert complete("ls to") == ["topics/"]
    assert complete("cd ../lo") == ["../local/"]
    assert complete("cd /image ") == [], "cd takes one path"


def test_a_kafka_snapshot_shows_the_same_tree(log_dir, tmp_path):
    from tests.cli.kafka_files import cluster_image

    snapshot = write_kafka_snapshot(tmp_path / "snapshot", cluster_image(tmp_path / "again"), epoch=2)
    out = shell("--snapshot", str(snapshot), "-c", "tree /image")
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout == shell("--dir", str(log_dir), "-c", "tree /image").stdout
    assert shell("--dir", str(snapshot.parent), "-c", "tree /image").stdout == out.stdout, "a folder with a snapshot only"


def test_a_record_that_does_not_apply_is_left_out_and_counted_and_its_batch_applies(tmp_path):
    """As Kafka's MetadataLoader: the record is logged and left out, the rest goes on."""
    builder = LogBuilder()
    cluster_log(builder)
    builder.records([r.PartitionChangeRecord(partition_id=0, topic_id=bytes(16), leader=1),
                     r.TopicRecord(name="beside", topic_id=bytes(range(2, 18)))], epoch=2)
    builder.records([r.TopicRecord(name="after", topic_id=bytes(range(16)))], epoch=2)
    builder.write(tmp_path / "00000000000000000000.log")
    out = shell("--dir", str(tmp_path), "ls", "/image/topics/byName")
    assert out.returncode == 0 and out.stdout.split() == ["after", "audit", "beside", "orders"]
    assert "offset 56: PartitionChange" in out.stderr and "left out of the image" in out.stderr
    assert ("1 record(s) do not apply to the image and were left out, as Kafka's loader leaves them out: "
            "1 PartitionChangeRecord") in out.stderr


def test_a_transaction_applies_without_its_record_that_does_not(tmp_path):
    builder = LogBuilder()
    cluster_log(builder)
    builder.records([r.BeginTransactionRecord()], epoch=2)
    builder.records([r.TopicRecord(name="half", topic_id=bytes(range(16))),
                     r.PartitionChangeRecord(partition_id=0, topic_id=bytes(16), leader=1)], epoch=2)
    builder.records([r.EndTransactionRecord()], epoch=2)
    builder.records([r.TopicRecord(name="after", topic_id=bytes(range(1, 17)))], epoch=2)
    builder.write(tmp_path / "00000000000000000000.log")
    out = shell("--dir", str(tmp_path), "ls", "/image/topics/byName")
    assert out.returncode == 0 and out.stdout.split() == ["after", "audit", "half", "orders"]
    assert "offset 58: PartitionChange" in out.stderr


@pytest.mark.parametrize("glob, matches, misses", [
    ("abc", None, None),  # literal: looked up, not matched
    ("a*", ["a", "abc"], ["ba"]),
    ("a?c", ["abc"], ["ac", "abbc"]),
    ("{foo,bar}", ["foo", "bar"], ["foobar", "baz"]),
    ("x.{1,2}", ["x.1", "x.2"], ["xx1"]),
    ("\\*a*", ["*ab"], ["ab"]),
])
def test_globs_are_kafkas(glob, matches, misses):
    pattern = glob_pattern(glob)
    if matches is None:
        assert pattern is None
        return
    assert all(pattern.fullmatch(m) for m in matches) and not any(pattern.fullmatch(m) for m in misses)


def test_columns_fit_the_screen_as_kafkas_ls():
    names = ["a", "bb", "ccc", "dddd", "eeeee"]
    assert list(columns(names, None)) == names
    assert list(columns(names, 20)) == ["a   ccc   eeeee", "bb  dddd"]  # 3 columns of 2: 4 + 6 + 7 wide
    assert list(columns(names, 40)) == ["a  bb  ccc  dddd  eeeee"]


# ------------------------------------------------------------------------------ kraft-written files


@pytest.fixture
def cluster():
    c = Cluster(seed=2)
    c.add_brokers(1, 2, 3)
    c.create("orders", partitions=3, rf=2, configs={"retention.ms": "60000"})
    c.create("audit", partitions=1, rf=1)
    c.commit(ctl.fence_broker(c.image, 1))
    return c


def test_bad_files_are_one_clear_line(cluster, tmp_path):
    snapshot = write_snapshot(tmp_path, cluster.image)
    out = shell("--snapshot", str(tmp_path / "missing.checkpoint"), "ls")
    assert out.returncode == 2 and out.stderr == f"kraft metadata-shell: {tmp_path / 'missing.checkpoint'}: no such file\n"
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
    assert out.stderr.count("\n") == 1 and out.stderr.count(str(damaged)) == 1, "the file is named once"
    out = shell("--dir", str(damaged.parent), "ls")
    assert out.returncode == 2 and "CRC" in out.stderr and out.stderr.count(snapshot.name) == 1


def test_a_damaged_log_stops_with_the_file_and_position(tmp_path):
    partition = write_cluster_dir(tmp_path)
    segment = partition / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[400] ^= 0xFF  # inside the fourth batch
    segment.write_bytes(data)
    out = shell("--dir", str(tmp_path), "ls")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith(f"kraft metadata-shell: {segment}: corrupt record batch at position 366: CRC mismatch")


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

    out = shell("--dir", str(partition_dir), "-c", "ls /image/topics/byName")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["from-snapshot", "orders", "refunds"]
    provenance = shell("--dir", str(partition_dir), "cat", "/image/provenance").stdout
    assert provenance.startswith(f"offset {cluster.image.offset + 1}, epoch 1, time ")
    log_dir = shell("--dir", str(tmp_path), "-c", "ls /image/topics/byName")  # metadata.log.dir: the partition inside
    assert log_dir.returncode == 0 and log_dir.stdout.split() == ["from-snapshot", "orders", "refunds"]


def test_dir_without_snapshots_or_segments_is_an_error_not_an_empty_image(tmp_path):
    (tmp_path / "meta.properties").write_text("node.id=1\n")
    out = shell("--dir", str(tmp_path), "ls")
    assert out.returncode == 2 and out.stdout == ""
    assert f"{tmp_path}: no .checkpoint snapshots and no .log segments" in out.stderr
    assert "__cluster_metadata-0" in out.stderr


def test_configs_are_named_as_kafka_names_them(cluster, tmp_path):
    from kraft.metadata import ConfigResource, ConfigResourceType
    from kraft.metadata.configs import AlterConfigOp, OpType

    for name, threads in (("", "8"), ("2", "4")):
        resource = ConfigResource(ConfigResourceType.BROKER, name)
        cluster.commit(ctl.alter_configs(cluster.image, resource, [AlterConfigOp("num.io.threads", OpType.SET, threads)]))
    session = Session(write_snapshot(tmp_path, cluster.image))
    assert session("ls /image/configs") == ["BROKER", "BROKER:2", "TOPIC:orders"]
    assert session("tree /image/configs/BROKER*") == ["num.io.threads:", "  8", "num.io.threads:", "  4"]
