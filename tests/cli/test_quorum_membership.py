"""`kraft metadata-quorum add-controller | remove-controller` and `describe` with directory
ids (KIP-853), as Kafka's kafka-metadata-quorum: the requests on the wire (kio's schemas), the
new controller read from its own files, every argument error in one line, and the answers of
a real static-quorum kraft cluster, which cannot change its voters (one line, never a hang).
The success and leader-error paths are checked against a real listener (kraft's protocol
server on loopback) that answers as a KIP-853 leader does, until kraft's own leader serves
these APIs."""

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from kraft.cli.local_cluster import LocalCluster, free_port
from kraft.cli.quorum_cmd import replication_lines, status_lines
from kraft.protocol import ErrorCode, KafkaServer
from kraft.protocol.build import build_response
from kraft.protocol.codec import decode_request, encode_request
from kraft.raft.membership_messages import (
    ADD_RAFT_VOTER,
    REMOVE_RAFT_VOTER,
    UPDATE_RAFT_VOTER,
    add_raft_voter_request,
    add_raft_voter_response,
    remove_raft_voter_request,
    remove_raft_voter_response,
    request_directory_id,
    request_endpoints,
    request_kraft_versions,
    response_error,
    response_for,
    update_raft_voter_request,
    update_raft_voter_response,
)
from kraft.records import VoterEndpoint
from kraft.storage.meta_properties import format_storage, kafka_text, read_directory_id
from tests.protocol.conftest import ServerThread

from ..server.cluster_helpers import wait_for

DIRECTORY = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)


def quorum_tool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The tool as an operator runs it; `timeout` only guards the test run against a hang."""
    return subprocess.run([sys.executable, "-m", "kraft.cli", "metadata-quorum", *args], capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("kraft metadata-quorum")
    return out.stderr


def new_controller_config(directory: Path, node_id: int = 4, port: int = 9095, *, formatted: bool = True,
                          **extra: str) -> Path:
    """A controller's server.properties as add-controller reads it, its directory formatted."""
    data = directory / f"data-{node_id}"
    props = {"node.id": str(node_id), "process.roles": "controller", "metadata.log.dir": str(data),
             "controller.listener.names": "CONTROLLER", "listeners": f"CONTROLLER://127.0.0.1:{port}",
             "controller.quorum.bootstrap.servers": "127.0.0.1:9093", **extra}
    path = directory / f"controller-{node_id}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items() if v))
    if formatted:
        format_storage(data, "MkU3OEVBNTcwNTJENDM2Qk", node_id)
    return path


# ---------------------------------------------------------------- the messages


def round_trip(request, version: int = 0):
    """The request as a leader reads it off the wire."""
    frame = encode_request(request, 7, "kraft-metadata-quorum")
    header, decoded = decode_request(memoryview(frame)[4:])
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
        type(request).__api_key__, version, 7)
    return decoded


def test_add_controller_speaks_v0_to_a_controller_that_serves_only_v0():
    """AckWhenCommitted true is what v0 means, so a Kafka 4.0 or 4.1 controller gets v0, as
    Kafka's admin client picks the version; a node without the API is one line."""
    from kraft.cli.admin_connection import NodeConnection, ToolError
    from kraft.cli.quorum_client import in_a_version_served

    def node(versions: dict) -> NodeConnection:
        return NodeConnection(("127.0.0.1", 9093), None, versions, None)  # type: ignore[arg-type]

    request = add_raft_voter_request(None, 30_000, 4, DIRECTORY, (VoterEndpoint("CONTROLLER", "c4", 9095),))
    assert type(in_a_version_served(node({ADD_RAFT_VOTER: (0, 1)}), request)).__version__ == 1
    older = in_a_version_served(node({ADD_RAFT_VOTER: (0, 0)}), request)
    assert type(older).__version__ == 0 and (older.voter_id, request_directory_id(older)) == (4, DIRECTORY)
    with pytest.raises(ToolError, match="does not support AddRaftVoter v1 .its ApiVersions lists no API key 80"):
        in_a_version_served(node({}), request)


def test_the_three_requests_cross_the_wire_as_kafkas_schemas_define_them():
    endpoints = (VoterEndpoint("CONTROLLER", "c4.example", 9095), VoterEndpoint("REPLICATION", "10.0.0.4", 9096))
    add = round_trip(add_raft_voter_request(None, 30_000, 4, DIRECTORY, endpoints), 1)  # v1: KIP-1186
    assert type(add).__api_key__ == ADD_RAFT_VOTER and add.cluster_id is None and add.ack_when_committed
    assert (add.voter_id, add.timeout.total_seconds(), request_directory_id(add)) == (4, 30.0, DIRECTORY)
    assert request_endpoints(add) == endpoints

    remove = round_trip(remove_raft_voter_request("MkU3OEVBNTcwNTJENDM2Qk", 2, DIRECTORY))
    assert type(remove).__api_key__ == REMOVE_RAFT_VOTER
    assert (remove.cluster_id, remove.voter_id, request_directory_id(remove)) == ("MkU3OEVBNTcwNTJENDM2Qk", 2, DIRECTORY)
    # Kafka's zero UUID ("no directory") comes back as kio's None; the reader gives it back.
    assert request_directory_id(round_trip(remove_raft_voter_request(None, 2, uuid.UUID(int=0)))) == uuid.UUID(int=0)

    update = round_trip(update_raft_voter_request(None, 9, 3, DIRECTORY, endpoints[:1], (0, 1)))
    assert type(update).__api_key__ == UPDATE_RAFT_VOTER and update.current_leader_epoch == 9
    assert (request_endpoints(update), request_kraft_versions(update)) == (endpoints[:1], (0, 1))


def test_answers_carry_the_error_and_the_leaders_message():
    assert response_error(add_raft_voter_response(ErrorCode.duplicate_voter, "node 4 is already a voter")) == (
        ErrorCode.duplicate_voter, "node 4 is already a voter")
    assert response_error(remove_raft_voter_response(ErrorCode.none)) == (ErrorCode.none, None)
    update = update_raft_voter_response(ErrorCode.not_leader_or_follower, leader_id=2, leader_epoch=5,
                                        host="c2.example", port=9093)
    assert (update.current_leader.leader_id, update.current_leader.host) == (2, "c2.example")
    add = add_raft_voter_request(None, 1000, 4, DIRECTORY, ())
    assert response_for(add, ErrorCode.request_timed_out, "lagging") == add_raft_voter_response(
        ErrorCode.request_timed_out, "lagging")


# ---------------------------------------------------------------- arguments and the new controller's files


def test_dry_run_reads_the_new_controller_from_its_own_files(tmp_path):
    config = new_controller_config(tmp_path, 4, 9095, **{"advertised.listeners": "CONTROLLER://c4.example:9195"})
    directory = kafka_text(read_directory_id(tmp_path / "data-4"))
    out = quorum_tool("--bootstrap-controller", "127.0.0.1:1", "--command-config", str(config), "add-controller",
                      "--dry-run")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"DRY RUN of adding controller 4 with directory id {directory} and endpoints: "
                          "CONTROLLER://c4.example:9195\n")
    # --command-config after the sub-command, as the issue writes it, is the same file.
    after = quorum_tool("--bootstrap-controller", "127.0.0.1:1", "add-controller", "--command-config", str(config),
                        "--dry-run")
    assert after.stdout == out.stdout
    removed = quorum_tool("--bootstrap-server", "127.0.0.1:1", "remove-controller", "-i", "4", "-d", directory,
                          "--dry-run")
    assert removed.returncode == 0 and removed.stdout == (
        f"DRY RUN of removing KRaft controller 4 with directory id {directory}\n")


@pytest.mark.parametrize("change,args,expected", [
    pytest.param({}, ["add-controller"], "You must supply the configuration file of the controller", id="no-config"),
    pytest.param({"node.id": ""}, None, "node.id not found in configuration file", id="no-node-id"),
    pytest.param({"node.id": "x"}, None, "invalid value for node.id", id="bad-node-id"),
    pytest.param({"process.roles": "broker"}, None, "process.roles did not contain 'controller'", id="not-a-controller"),
    pytest.param({"formatted": False}, None, "Unable to read meta.properties from", id="not-formatted"),
    pytest.param({"controller.listener.names": "OTHER"}, None,
                 "Cannot find information about controller listener name: OTHER", id="no-such-listener"),
    pytest.param({"listeners": "CONTROLLER://127.0.0.1"}, None, "invalid value for listeners", id="bad-listener"),
    pytest.param({}, ["remove-controller", "-i", "-1", "-d", kafka_text(DIRECTORY)],
                 "Invalid negative --controller-id: -1", id="negative-id"),
    pytest.param({}, ["remove-controller", "--controller-id", "two", "-d", kafka_text(DIRECTORY)],
                 "--controller-id 'two' is not a node id", id="id-not-a-number"),
    pytest.param({}, ["remove-controller", "-i", "2", "--controller-directory-id", "nope"],
                 "Failed to parse --controller-directory-id", id="bad-directory-id"),
])
def test_argument_errors_are_one_line(tmp_path, change, args, expected):
    formatted = change.pop("formatted", True)
    config = new_controller_config(tmp_path, formatted=formatted, **change)
    command = args if args is not None else ["--command-config", str(config), "add-controller"]
    err = one_line_error(quorum_tool("--bootstrap-controller", "127.0.0.1:1", *command))
    assert expected in err


def test_a_directory_formatted_before_directory_ids_is_named(tmp_path):
    config = new_controller_config(tmp_path, formatted=False)
    (tmp_path / "data-4").mkdir()
    (tmp_path / "data-4" / "meta.properties").write_text("version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\nnode.id=4\n")
    err = one_line_error(quorum_tool("--bootstrap-controller", "127.0.0.1:1", "--command-config", str(config),
                                     "add-controller"))
    assert f"No directory id found in {tmp_path / 'data-4'}" in err


def test_nothing_listening_is_one_line(tmp_path):
    config = new_controller_config(tmp_path)
    err = one_line_error(quorum_tool("--bootstrap-controller", f"127.0.0.1:{free_port()}", "--command-config",
                                     str(config), "add-controller"))
    assert "no bootstrap controller answered" in err


# ---------------------------------------------------------------- a real static quorum


@pytest.fixture
def static_cluster(tmp_path) -> Iterator[LocalCluster]:
    """One voter of controller.quorum.voters (kraft.version 0): its voters cannot change."""
    c = LocalCluster(tmp_path / "cluster", voters=1, observers=0)
    c.start()
    yield c
    c.stop()


def test_a_static_quorum_refuses_voter_changes_in_one_line(static_cluster, tmp_path):
    node = static_cluster.nodes[1]
    wait_for(lambda: quorum_tool("--bootstrap-server", node.client, "describe", "--status").returncode == 0,
             timeout=60, what="a leader")
    config = new_controller_config(tmp_path, 2, free_port())
    directory = kafka_text(read_directory_id(tmp_path / "data-2"))
    asks = [
        ("AddRaftVoter", ["--bootstrap-controller", f"127.0.0.1:{node.controller_port}", "--command-config",
                          str(config), "add-controller"]),
        ("AddRaftVoter", ["--bootstrap-server", node.client, "--command-config", str(config), "add-controller"]),
        ("RemoveRaftVoter", ["--bootstrap-controller", f"127.0.0.1:{node.controller_port}", "remove-controller",
                             "--controller-id", "1", "--controller-directory-id", directory]),
    ]
    for api, args in asks:
        err = one_line_error(quorum_tool(*args))
        # A build whose leader serves the API answers UNSUPPORTED_VERSION (kraft.version 0);
        # one that does not serve it is told from its ApiVersions.
        assert (f"{api} failed with UNSUPPORTED_VERSION" in err
                or f"does not support {api} v0 (its ApiVersions lists no API key" in err), err
    # The quorum is as it was.
    status = quorum_tool("--bootstrap-server", node.client, "describe", "--status")
    assert status.returncode == 0 and "CurrentVoters:          [1]" in status.stdout, status.stderr


# ---------------------------------------------------------------- a listener answering as a KIP-853 leader


class Leader:
    """A controller listener (kraft's protocol server, real TCP on loopback) that names
    itself the active controller and answers AddRaftVoter and RemoveRaftVoter from a script:
    one answer per request, in order; None: never answer."""

    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.requests: list = []
        self.server = KafkaServer(max_frame_bytes=1 << 20)
        self.port = 0
        self.server.register(60, 0, 1, self._describe_cluster)
        self.server.register(ADD_RAFT_VOTER, 0, 1, self._change)  # v1: KIP-1186, as kraft serves it
        self.server.register(REMOVE_RAFT_VOTER, 0, 0, self._change)

    async def _describe_cluster(self, header, request):
        return build_response(60, header.request_api_version, {
            "throttle_time": timedelta(0), "error_code": ErrorCode.none, "error_message": None, "endpoint_type": 2,
            "cluster_id": "c",
            "controller_id": 1, "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": self.port, "rack": None}],
            "cluster_authorized_operations": -2147483648})

    async def _change(self, header, request):
        self.requests.append(request)
        answer = self.answers.pop(0)
        if answer is None:
            await asyncio.Event().wait()  # the leader never answers
        error, message = answer
        return response_for(request, error, message)


@pytest.fixture
def leader() -> Iterator[tuple[Leader, ServerThread]]:
    holder = Leader([])
    with ServerThread(holder.server) as thread:
        holder.port = thread.port
        yield holder, thread


def test_add_controller_sends_the_new_controller_to_the_leader(tmp_path, leader):
    holder, thread = leader
    holder.answers[:] = [(ErrorCode.not_controller, None), (ErrorCode.none, None)]  # the leader moved, then it did
    config = new_controller_config(tmp_path, 4, 9095, **{"request.timeout.ms": "20000"})
    directory = read_directory_id(tmp_path / "data-4")
    out = quorum_tool("--bootstrap-controller", f"127.0.0.1:{thread.port}", "--command-config", str(config),
                      "add-controller")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"Added controller 4 with directory id {kafka_text(directory)} and endpoints: "
                          "CONTROLLER://127.0.0.1:9095\n")
    assert len(holder.requests) == 2
    for request in holder.requests:
        assert (request.voter_id, request.voter_directory_id, request.cluster_id) == (4, directory, None)
        assert request_endpoints(request) == (VoterEndpoint("CONTROLLER", "127.0.0.1", 9095),)
        assert request.timeout.total_seconds() == 20.0  # request.timeout.ms of --command-config


@pytest.mark.parametrize("args,answer,expected", [
    pytest.param(["add-controller"], (ErrorCode.duplicate_voter, "node 4 is already a voter in [1, 4]"),
                 "AddRaftVoter failed with DUPLICATE_VOTER: node 4 is already a voter in [1, 4]", id="duplicate"),
    pytest.param(["add-controller"], (ErrorCode.unsupported_version, "kraft.version is 0"),
                 "AddRaftVoter failed with UNSUPPORTED_VERSION: kraft.version is 0", id="static"),
    pytest.param(["remove-controller", "-i", "3", "-d", kafka_text(DIRECTORY)], (ErrorCode.voter_not_found, None),
                 "RemoveRaftVoter failed with VOTER_NOT_FOUND", id="not-found"),
    pytest.param(["add-controller"], (ErrorCode.request_timed_out, "node 4 is lagging behind"),
                 "AddRaftVoter failed with REQUEST_TIMED_OUT: node 4 is lagging behind", id="lagging"),
    pytest.param(["add-controller"], None, "AddRaftVoter failed: REQUEST_TIMED_OUT: no answer within 1500 ms",
                 id="no-answer"),
])
def test_the_leaders_refusals_are_one_line(tmp_path, leader, args, answer, expected):
    holder, thread = leader
    holder.answers[:] = [answer]
    config = new_controller_config(tmp_path, 4, 9095, **{"request.timeout.ms": "1500"})
    err = one_line_error(quorum_tool("--bootstrap-controller", f"127.0.0.1:{thread.port}", "--command-config",
                                     str(config), *args))
    assert expected in err, err
    assert len(holder.requests) == 1


# ---------------------------------------------------------------- describe, once the leader names directory ids


def test_describe_shows_directory_ids_and_endpoints_as_kafkas_tool():
    d1, d2, d4 = (uuid.UUID(int=n << 64 | n) for n in (1, 2, 4))

    def replica(node, directory, end):
        return {"replica_id": node, "replica_directory_id": directory, "log_end_offset": end,
                "last_fetch_timestamp": 5000, "last_caught_up_timestamp": 5000}

    response = build_response(55, 2, {
        "error_code": 0, "error_message": None,
        "topics": [{"topic_name": "__cluster_metadata", "partitions": [{
            "partition_index": 0, "error_code": 0, "error_message": None, "leader_id": 1, "leader_epoch": 3,
            "high_watermark": 100, "current_voters": [replica(1, d1, 100), replica(2, d2, 90)],
            "observers": [replica(4, d4, 80)]}]}],
        "nodes": [{"node_id": 1, "listeners": [{"name": "CONTROLLER", "host": "c1", "port": 9093}]},
                  {"node_id": 2, "listeners": [{"name": "CONTROLLER", "host": "::1", "port": 9094}]}]})
    quorum = response.topics[0].partitions[0]
    lines = status_lines("abc", quorum, response.nodes)
    assert lines[6] == (
        f'CurrentVoters:          [{{"id": 1, "directoryId": "{kafka_text(d1)}", "endpoints": ["CONTROLLER://c1:9093"]}}, '
        f'{{"id": 2, "directoryId": "{kafka_text(d2)}", "endpoints": ["CONTROLLER://[::1]:9094"]}}]')
    assert lines[7] == f'CurrentObservers:       [{{"id": 4, "directoryId": "{kafka_text(d4)}"}}]'
    table = [[cell.strip() for cell in line.split("\t")[:-1]] for line in replication_lines(quorum)]
    assert table[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                        "LastCaughtUpTimestamp", "Status"]
    assert [row[:4] + row[6:] for row in table[1:]] == [
        ["1", kafka_text(d1), "100", "0", "Leader"], ["2", kafka_text(d2), "90", "10", "Follower"],
        ["4", kafka_text(d4), "80", "20", "Observer"]]
