"""`kraft storage format --standalone | --initial-controllers | --no-initial-controllers`
(KIP-853), as Kafka's StorageTool and Formatter: meta.properties' directory.id, the bootstrap
snapshot's bytes read back by kraft's dump-log and by kio (Kafka's schemas), and every
combination the rules refuse: one line, exit 1, nothing written."""

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord as KioKRaftVersion
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord as KioFooter
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord as KioHeader
from kio.schema.voters_record.v0.data import VotersRecord as KioVoters
from kio.serial import entity_reader

from kraft.controller.bootstrap import read_bootstrap
from kraft.metadata.records import FeatureLevelRecord, UserScramCredentialRecord
from kraft.records import read_batches
from kraft.records.control import ControlType, parse_control_key
from kraft.storage.meta_properties import kafka_text, read_directory_id, read_meta_entries, uuid_from_kafka_text

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
SNAPSHOT = Path("__cluster_metadata-0") / "00000000000000000000-0000000000.checkpoint"
DIRS = ["JEXY6aqzQY-32P5TStzaFg", "MvDxzVmcRsaTz33bUuRU6A", "07R5amHmR32VDA6jHkGbTA"]


def storage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", "storage", *args], capture_output=True, text=True,
                          timeout=60)


def node_config(directory: Path, node_id: int, *, roles: str = "broker,controller", voters: str | None = None,
                bootstrap: str | None = "127.0.0.1:9093", controller: str = "127.0.0.1:9093",
                advertised: str | None = None, listener_name: str = "CONTROLLER") -> Path:
    """A node's server.properties; its metadata.log.dir is `directory`/data-<id>."""
    lines = [f"node.id={node_id}", f"process.roles={roles}", f"metadata.log.dir={directory / f'data-{node_id}'}",
             f"controller.listener.names={listener_name}",
             f"listeners={listener_name}://{controller},PLAINTEXT://127.0.0.1:{19092 + node_id}"
             if "controller" in roles else f"listeners=PLAINTEXT://127.0.0.1:{19092 + node_id}",
             f"listener.security.protocol.map={listener_name}:PLAINTEXT,PLAINTEXT:PLAINTEXT"]
    if voters is not None:
        lines.append(f"controller.quorum.voters={voters}")
    if bootstrap is not None:
        lines.append(f"controller.quorum.bootstrap.servers={bootstrap}")
    if advertised is not None:
        lines.append(f"advertised.listeners={listener_name}://{advertised}")
    path = directory / f"server-{node_id}.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def data(directory: Path, node_id: int) -> Path:
    return directory / f"data-{node_id}"


def snapshot_records(path: Path) -> list[tuple[int, int, int, int, object]]:
    """(batch base offset, batch epoch, offset, control type, the value as kio reads it) of
    every record: Kafka's own schemas, not kraft's control record code, decode the values."""
    readers = {ControlType.SNAPSHOT_HEADER: KioHeader, ControlType.KRAFT_VERSION: KioKRaftVersion,
               ControlType.KRAFT_VOTERS: KioVoters, ControlType.SNAPSHOT_FOOTER: KioFooter}
    found = []
    for batch in read_batches(path.read_bytes()):
        h = batch.header
        assert h.is_control and not h.is_transactional and h.compression.name == "NONE"
        for record in batch.records():
            kind = parse_control_key(record.key)
            raw = bytes(record.value)
            value, size = entity_reader(readers[ControlType(kind)])(raw, 0)
            assert size == len(raw)
            found.append((h.base_offset, h.partition_leader_epoch, record.offset, kind, value))
            assert record.timestamp == h.max_timestamp
    return found


def voters_of(value: KioVoters) -> list[tuple[int, str, list[tuple[str, str, int]], tuple[int, int]]]:
    return [(v.voter_id, kafka_text(v.voter_directory_id), [(e.name, e.host, e.port) for e in v.endpoints],
             (v.k_raft_version_feature.min_supported_version, v.k_raft_version_feature.max_supported_version))
            for v in value.voters]


def dump(path: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "dump-log", "--deep-iteration", "--files", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_standalone_writes_kafkas_bootstrap_snapshot_and_the_directory_id(tmp_path):
    config = node_config(tmp_path, 1, controller="127.0.0.1:9093", advertised="node1.example:9193")
    out = storage("format", "-t", CLUSTER_ID, "-c", str(config), "--standalone")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"Formatting dynamic metadata voter directory {data(tmp_path, 1)} "
                          "with metadata.version 3.3-IV3.\n")
    entries = read_meta_entries(data(tmp_path, 1))
    assert (entries["version"], entries["cluster.id"], entries["node.id"]) == ("1", CLUSTER_ID, "1")
    directory = entries["directory.id"]
    assert read_directory_id(data(tmp_path, 1)) == uuid_from_kafka_text(directory)
    assert uuid_from_kafka_text(directory).int >= 100 and len(directory) == 22

    # Kafka's RecordsSnapshotWriter layout: header, kraft.version and voters in one batch at
    # offsets 0-2, the footer alone at offset 3, every batch in epoch 0 with one timestamp.
    records = snapshot_records(data(tmp_path, 1) / SNAPSHOT)
    layout = [(base, epoch, offset, kind) for base, epoch, offset, kind, _ in records]
    assert layout == [(0, 0, 0, ControlType.SNAPSHOT_HEADER), (0, 0, 1, ControlType.KRAFT_VERSION),
                      (0, 0, 2, ControlType.KRAFT_VOTERS), (3, 0, 3, ControlType.SNAPSHOT_FOOTER)]
    header, kraft_version, voters, footer = (value for *_, value in records)
    assert header.version == 0 and header.last_contained_log_timestamp > 1_700_000_000_000
    assert (kraft_version.version, kraft_version.k_raft_version) == (0, 1)
    assert footer.version == 0
    # The advertised controller endpoint, under controller.listener.names' first name.
    assert voters.version == 0
    assert voters_of(voters) == [(1, directory, [("CONTROLLER", "node1.example", 9193)], (0, 1))]

    # kraft's dump-log reads the same values, and validates the file as a snapshot.
    lines = dump(data(tmp_path, 1) / SNAPSHOT)
    assert lines[1] == "Snapshot end offset: 0, epoch: 0" and lines[-1] == "Snapshot validates: true"
    assert lines[4].endswith('KRaftVersion {"version":0,"kRaftVersion":1}')
    assert lines[5].endswith(
        f'KRaftVoters {{"version":0,"voters":[{{"voterId":1,"voterDirectoryId":"{directory}","endpoints":'
        '[{"name":"CONTROLLER","host":"node1.example","port":9193}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    # The format wrote no bootstrap.checkpoint: kraft.version is no FeatureLevelRecord (Kafka's
    # BootstrapMetadata leaves it out), and without --add-scram kraft writes none.
    assert read_bootstrap(data(tmp_path, 1)) == ()


def test_initial_controllers_give_every_node_the_same_voters_and_its_own_directory_id(tmp_path):
    listed = ",".join(f"{n}@127.0.0.1:{9092 + n}:{DIRS[n - 1]}" for n in (1, 2, 3))
    voter_sets = []
    for node_id in (1, 2, 3, 4):
        config = node_config(tmp_path, node_id, controller=f"127.0.0.1:{9092 + node_id}",
                             bootstrap="127.0.0.1:9093,127.0.0.1:9094")
        out = storage("format", "--cluster-id", CLUSTER_ID, "--config", str(config), "--initial-controllers", listed)
        assert out.returncode == 0, out.stderr
        kind = "dynamic metadata voter directory" if node_id <= 3 else "dynamic metadata directory"
        assert out.stdout == f"Formatting {kind} {data(tmp_path, node_id)} with metadata.version 3.3-IV3.\n"
        *_, (_, _, _, _, voters), _footer = snapshot_records(data(tmp_path, node_id) / SNAPSHOT)
        voter_sets.append(voters_of(voters))
        directory = kafka_text(read_directory_id(data(tmp_path, node_id)))
        if node_id <= 3:
            assert directory == DIRS[node_id - 1]
        else:  # a controller outside the initial set: a directory id of its own, no vote
            assert directory not in DIRS
    expected = [(n, DIRS[n - 1], [("CONTROLLER", "127.0.0.1", 9092 + n)], (0, 1)) for n in (1, 2, 3)]
    assert voter_sets == [expected] * 4


def test_no_initial_controllers_formats_without_a_voter_set(tmp_path):
    config = node_config(tmp_path, 5)
    out = storage("format", "-t", CLUSTER_ID, "-c", str(config), "-N")
    assert out.returncode == 0 and out.stdout == f"Formatting metadata directory {data(tmp_path, 5)} " \
                                                 "with metadata.version 3.3-IV3.\n", out.stderr
    assert read_directory_id(data(tmp_path, 5)) is not None
    assert not (data(tmp_path, 5) / SNAPSHOT.parent).exists()


def test_each_offsets_partition_starts_from_the_metadata_partitions_first_voters(tmp_path):
    """Each `__consumer_offsets` partition is a dynamic Raft log of its own: the format writes
    the same bootstrap snapshot in its directory; --no-initial-controllers writes none there
    either (its partitions observe until their leaders add it)."""
    listed = ",".join(f"{n}@127.0.0.1:{9092 + n}:{DIRS[n - 1]}" for n in (1, 2))
    for node_id, flags in ((1, ("--standalone",)), (2, ("--initial-controllers", listed)), (3, ("-N",))):
        (tmp_path / f"n{node_id}").mkdir()
        config = node_config(tmp_path / f"n{node_id}", node_id, controller=f"127.0.0.1:{9092 + node_id}")
        with config.open("a") as f:
            f.write("offsets.topic.num.partitions=2\n")
        out = storage("format", "-t", CLUSTER_ID, "-c", str(config), *flags)
        assert out.returncode == 0, out.stderr
        root = data(tmp_path / f"n{node_id}", node_id)
        offsets = sorted(p.name for p in root.glob("__consumer_offsets-*"))
        if node_id == 3:
            assert offsets == [] and not (root / SNAPSHOT.parent).exists()
            continue
        assert offsets == ["__consumer_offsets-0", "__consumer_offsets-1"]
        metadata = (root / SNAPSHOT).read_bytes()
        for name in offsets:
            assert [p.name for p in (root / name).iterdir()] == [SNAPSHOT.name]
            assert (root / name / SNAPSHOT.name).read_bytes() == metadata


def test_a_static_quorum_is_formatted_as_before_with_a_directory_id(tmp_path):
    config = node_config(tmp_path, 1, voters="1@127.0.0.1:9093", bootstrap=None)
    assert storage("format", "-t", CLUSTER_ID, "-c", str(config)).returncode == 0
    first = read_directory_id(data(tmp_path, 1))
    assert first is not None and first.int >= 100
    assert not (data(tmp_path, 1) / SNAPSHOT.parent).exists()
    other = node_config(tmp_path, 2, voters="1@127.0.0.1:9093", bootstrap=None, roles="broker")
    assert storage("format", "-t", CLUSTER_ID, "-c", str(other)).returncode == 0
    assert read_directory_id(data(tmp_path, 2)) not in (None, first)


def test_formatting_again_leaves_the_voter_set_alone(tmp_path):
    config = node_config(tmp_path, 1)
    assert storage("format", "-t", CLUSTER_ID, "-c", str(config), "--standalone").returncode == 0
    before = (data(tmp_path, 1) / SNAPSHOT).read_bytes(), read_directory_id(data(tmp_path, 1))
    again = storage("format", "-t", CLUSTER_ID, "-c", str(config), "--standalone")
    assert again.returncode == 1 and "is already formatted" in again.stderr
    ignored = storage("format", "-t", CLUSTER_ID, "-c", str(config), "--standalone", "-g")
    assert ignored.returncode == 0 and ignored.stdout == "All of the log directories are already formatted.\n"
    assert ((data(tmp_path, 1) / SNAPSHOT).read_bytes(), read_directory_id(data(tmp_path, 1))) == before


def test_add_scram_with_standalone_writes_no_kraft_version_feature_record(tmp_path):
    config = node_config(tmp_path, 1)
    out = storage("format", "-t", CLUSTER_ID, "-c", str(config), "-s", "-S",
                  "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert out.returncode == 0, out.stderr
    records = read_bootstrap(data(tmp_path, 1))
    assert [type(r) for r in records] == [FeatureLevelRecord, UserScramCredentialRecord]
    assert [r.name for r in records if isinstance(r, FeatureLevelRecord)] == ["metadata.version"]
    assert (data(tmp_path, 1) / SNAPSHOT).exists()


D = DIRS[0]


@pytest.mark.parametrize("config_args,flags,expected", [
    pytest.param({}, ["--standalone", "--initial-controllers", f"1@127.0.0.1:9093:{D}"],
                 "--standalone and --initial-controllers cannot be used together", id="standalone-and-initial"),
    pytest.param({}, ["-s", "-N"], "--standalone and --no-initial-controllers cannot be used together",
                 id="standalone-and-none"),
    pytest.param({"roles": "broker", "voters": "2@127.0.0.1:9093", "bootstrap": None}, ["--standalone"],
                 "You can only use --standalone on a controller", id="standalone-on-a-broker"),
    pytest.param({"roles": "broker"}, ["--initial-controllers", f"2@127.0.0.1:9093:{D}"],
                 "You can only use --initial-controllers on a controller", id="initial-on-a-broker"),
    pytest.param({"voters": "1@127.0.0.1:9093", "bootstrap": None}, ["--standalone"],
                 "sets controller.quorum.voters, which makes the quorum static", id="standalone-with-static-voters"),
    pytest.param({"voters": "1@127.0.0.1:9093", "bootstrap": None},
                 ["--initial-controllers", f"1@127.0.0.1:9093:{D}"],
                 "sets controller.quorum.voters, which makes the quorum static", id="initial-with-static-voters"),
    pytest.param({"bootstrap": None}, ["--standalone"], "controller.quorum.bootstrap.servers",
                 id="standalone-without-bootstrap-servers"),
    pytest.param({}, [], "Because controller.quorum.voters is not set on this controller, you must specify one of "
                 "the following: --standalone, --initial-controllers, or --no-initial-controllers.", id="no-flag"),
    pytest.param({"controller": "127.0.0.1:0"}, ["--standalone"], "port 0", id="standalone-on-port-0"),
    pytest.param({}, ["-I", "1@127.0.0.1"], "No colon following hostname could be found.", id="no-port"),
    pytest.param({}, ["-I", f"x@127.0.0.1:9093:{D}"], "Failed to parse node id", id="bad-node-id"),
    pytest.param({}, ["-I", f"1@127.0.0.1:99999:{D}"], "Invalid port 99999", id="bad-port"),
    pytest.param({}, ["-I", "1@127.0.0.1:9093:not-a-uuid"], "Failed to parse directory ID", id="bad-directory-id"),
    pytest.param({}, ["-I", "1@127.0.0.1:9093:AAAAAAAAAAAAAAAAAAAAAA"], "is reserved", id="reserved-directory-id"),
    pytest.param({}, ["-I", f"1@127.0.0.1:9093:{D},1@127.0.0.1:9094:{DIRS[1]}"],
                 "Node id 1 was specified more than once.", id="duplicate-node"),
    pytest.param({}, ["-I", ","], "No voters given.", id="empty-list"),
    pytest.param({}, ["-I", f"1@127.0.0.1:9999:{D}"], "but its controller listener is advertised at 127.0.0.1:9093",
                 id="own-entry-elsewhere"),
])
def test_refused_combinations_are_one_line_and_write_nothing(tmp_path, config_args, flags, expected):
    config = node_config(tmp_path, 1, **config_args)
    out = storage("format", "-t", CLUSTER_ID, "-c", str(config), *flags)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("kraft storage format: "), out.stderr
    assert expected in out.stderr
    assert not data(tmp_path, 1).exists()


def test_initial_controllers_take_ipv6_hosts_in_brackets(tmp_path):
    from kraft.cli.initial_controllers import parse_initial_controllers

    (first, second) = parse_initial_controllers(f" 2@[::1]:9094:{DIRS[1]}, 1@h1:9093:{D} ")
    assert (first.node_id, first.host, first.port, first.directory_id) == (1, "h1", 9093, uuid_from_kafka_text(D))
    assert (second.host, str(second)) == ("::1", f"2@[::1]:9094:{DIRS[1]}")
    assert uuid.UUID(bytes=uuid_from_kafka_text(D).bytes) == first.directory_id
