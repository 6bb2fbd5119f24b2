"""Every version Kafka defines of the KRaft RPCs, answered by a running cluster.

The core speaks one version of each (RAFT_APIS); kraft.server.apis.raft_versions converts the
others to it and its answers back. Each request here is built with kio's class of its
version and sent over TCP to a node's controller listener, and each answer is decoded by
kio's response class of that version: what a Kafka controller of that version would send
and read. One cluster for the module: 3 voters, whose log holds two leader epochs (the
first leader is stopped and comes back as a follower) and a snapshot.
"""

from datetime import timedelta
from typing import Any, NamedTuple

import pytest

from kraft.cli.cluster_client import create_topic, describe_quorum, leader, request
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request, convert
from kraft.protocol.codec import decode, encode, request_class
from kraft.raft.messages import METADATA_TOPIC, METADATA_TOPIC_ID
from kraft.records import iter_batches
from kraft.server.apis.raft_versions import (
    ABSENT,
    BEGIN_QUORUM_EPOCH,
    DESCRIBE_QUORUM,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    KAFKA_VERSIONS,
    NO_DIRECTORY,
    VOTE,
    served_range,
)
from kraft.storage import parse_snapshot_file_name

from .cluster_helpers import QUIET, wait_for
from .test_client_reads import ask

API_VERSIONS = 18
TOPIC = {"topic_name": METADATA_TOPIC}


def versions(name: str) -> list[int]:
    """Every version Kafka 4.x's controller listener serves of `name`."""
    _, low, high = KAFKA_VERSIONS[name]
    return list(range(low, high + 1))


class Quorum(NamedTuple):
    cluster: LocalCluster
    leader: int
    epoch: int
    follower: int  # the first leader, back as a follower
    first_epoch: int
    first_epoch_end: int  # where the next epoch's batches start, read from the leader's segment

    def controller(self, node_id: int) -> int:
        return self.cluster.nodes[node_id].controller_port

    def other(self) -> int:
        """The voter that is neither the leader nor the follower."""
        return next(n for n in self.cluster.voter_ids if n not in (self.leader, self.follower))

    def segment(self) -> bytes:
        files = sorted(self.cluster.nodes[self.leader].partition_dir.glob("*.log"))
        assert len(files) == 1, "the tests assume one segment"
        return files[0].read_bytes()

    def endpoint(self, node_id: int) -> dict[str, Any]:
        return {"node_id": node_id, "host": "127.0.0.1", "port": self.controller(node_id)}


@pytest.fixture(scope="module")
def quorum(tmp_path_factory) -> Any:
    c = LocalCluster(tmp_path_factory.mktemp("versions") / "cluster", voters=3, observers=0, overrides={
        **QUIET,  # no idle NoOps: the log moves only when the fixture writes
        "metadata.log.max.record.bytes.between.snapshots": "2000",
        "metadata.snapshot.min.changed_records.ratio": "0",
    })
    c.start()
    try:
        for i in range(10):
            assert create_topic(c.nodes[leader(c)[0]].client_port, f"before-{i}").error_code == ErrorCode.none
        # Taken after the writes: on a loaded machine an election may come between them, and
        # the epoch the tests call the first must be one the log holds.
        first, first_epoch = leader(c)
        c.stop(first)  # gracefully: a successor is elected in a newer epoch
        second, epoch = leader(c, exclude=(first,))
        for i in range(10):
            assert create_topic(c.nodes[second].client_port, f"after-{i}").error_code == ErrorCode.none
        c.start(first)
        wait_for(lambda: describe_quorum(c, first).leader_id == second, what="the first leader to follow")
        wait_for(lambda: list(c.nodes[second].partition_dir.glob("*.checkpoint")), what="a snapshot on the leader")
        q = Quorum(c, second, epoch, first, first_epoch, -1)
        boundary = next(h.base_offset for h in iter_batches(q.segment(), partial_tail="stop")
                        if h.partition_leader_epoch > first_epoch)
        yield q._replace(first_epoch_end=boundary)
    finally:
        c.stop()


def latest_snapshot(quorum: Quorum) -> tuple[tuple[int, int], bytes]:
    """The leader's latest snapshot: (end offset, epoch), and its bytes on disk."""
    files = sorted(quorum.cluster.nodes[quorum.leader].partition_dir.glob("*.checkpoint"))  # by end offset
    snapshot = parse_snapshot_file_name(files[-1].name)
    return (snapshot.end_offset, snapshot.epoch), files[-1].read_bytes()


def partition(answer: Any) -> Any:
    topics = answer.topics if hasattr(answer, "topics") else answer.responses
    return topics[0].partitions[0]


def endpoints(answer: Any) -> list[dict[str, Any]]:
    """The endpoints an answer names (none in a version without them)."""
    return [{"node_id": e.node_id, "host": e.host, "port": e.port} for e in getattr(answer, "node_endpoints", ())]


# ---------------------------------------------------------------- what is advertised


def test_the_controller_listener_advertises_every_version_served(quorum):
    answer = ask(quorum.controller(quorum.leader), API_VERSIONS, 3,
                 {"client_software_name": "test", "client_software_version": "1"})
    advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert {key: advertised[key] for key in (VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, FETCH_SNAPSHOT,
                                             DESCRIBE_QUORUM)} == {
        VOTE: (0, 2), BEGIN_QUORUM_EPOCH: (0, 1), END_QUORUM_EPOCH: (0, 1), FETCH: (13, 18),
        FETCH_SNAPSHOT: (0, 1), DESCRIBE_QUORUM: (0, 2),
    }
    client = ask(quorum.cluster.nodes[quorum.leader].client_port, API_VERSIONS, 3,
                 {"client_software_name": "test", "client_software_version": "1"})
    on_client = {k.api_key: (k.min_version, k.max_version) for k in client.api_keys}
    assert on_client[FETCH_SNAPSHOT] == (0, 1) and on_client[DESCRIBE_QUORUM] == (0, 2)
    assert on_client[FETCH] == (4, 18), "Fetch v18 (KIP-1166) on the client listener too"
    assert VOTE not in on_client, "the election RPCs are the controller listener's only"


def test_a_version_above_the_core_is_served_only_if_the_core_can_hear_it():
    assert served_range(VOTE, 0, 2, 0) == (0, 1), "PreVote would be lost on the way to a v0 core"
    assert served_range(VOTE, 0, 2, 1) == (0, 1)
    assert served_range(VOTE, 0, 2, 2) == (0, 2)
    assert served_range(FETCH, 13, 17, 13) == (13, 17), "a replica's broker epoch and directory id may be dropped"


# ---------------------------------------------------------------- elections


@pytest.mark.parametrize("version", versions("Vote"))
def test_a_stale_candidate_is_refused_with_the_current_leader_and_epoch(quorum, version):
    p = {"partition_index": 0, "replica_epoch": quorum.first_epoch, "replica_id": quorum.other(),
         "replica_directory_id": NO_DIRECTORY, "voter_directory_id": NO_DIRECTORY,
         "last_offset_epoch": quorum.first_epoch - 1, "last_offset": quorum.first_epoch_end, "pre_vote": False}
    body = {"cluster_id": quorum.cluster.cluster_id, "voter_id": quorum.follower,
            "topics": [TOPIC | {"partitions": [p]}]}
    for pre_vote in (False, True) if version >= 2 else (False,):
        p["pre_vote"] = pre_vote
        answer = ask(quorum.controller(quorum.follower), VOTE, version, body)
        assert type(answer).__version__ == version and answer.error_code == ErrorCode.none
        got = partition(answer)
        assert (got.error_code, got.leader_id, got.leader_epoch, got.vote_granted) == (
            ErrorCode.fenced_leader_epoch, quorum.leader, quorum.epoch, False)
        if version >= 1:
            assert endpoints(answer) == [quorum.endpoint(quorum.leader)]


def announce_old_epoch(quorum, api_key: int, version: int, partition_fields: dict, top_fields: dict) -> None:
    """A BeginQuorumEpoch or EndQuorumEpoch of an epoch the quorum has left is fenced,
    naming the leader and its epoch (and, v1, its endpoint)."""
    p = {"partition_index": 0, "leader_id": quorum.other(), "leader_epoch": quorum.first_epoch} | partition_fields
    body = {"cluster_id": quorum.cluster.cluster_id, "topics": [TOPIC | {"partitions": [p]}],
            "leader_endpoints": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": quorum.controller(quorum.other())}],
            **top_fields}
    answer = ask(quorum.controller(quorum.follower), api_key, version, body)
    got = partition(answer)
    assert (answer.error_code, got.error_code, got.leader_id, got.leader_epoch) == (
        ErrorCode.none, ErrorCode.fenced_leader_epoch, quorum.leader, quorum.epoch)
    if version >= 1:
        assert endpoints(answer) == [quorum.endpoint(quorum.leader)]


@pytest.mark.parametrize("version", versions("BeginQuorumEpoch"))
def test_begin_quorum_epoch_of_an_old_epoch_is_fenced(quorum, version):
    announce_old_epoch(quorum, BEGIN_QUORUM_EPOCH, version, {"voter_directory_id": NO_DIRECTORY},
                       {"voter_id": quorum.follower})


@pytest.mark.parametrize("version", versions("EndQuorumEpoch"))
def test_end_quorum_epoch_of_an_old_epoch_is_fenced(quorum, version):
    successors = {"preferred_successors": [quorum.follower],
                  "preferred_candidates": [{"candidate_id": quorum.follower, "candidate_directory_id": NO_DIRECTORY}]}
    announce_old_epoch(quorum, END_QUORUM_EPOCH, version, successors, {})


# ---------------------------------------------------------------- replication


def fetch(quorum: Quorum, node_id: int, version: int, replica_id: int, offset: int, last_epoch: int) -> Any:
    """A Fetch as a follower sends it: its id (ReplicaState from v15), the leader epoch it
    knows, where its log ends and the epoch of its last batch, no waiting."""
    p = {"partition": 0, "current_leader_epoch": quorum.epoch, "fetch_offset": offset,
         "last_fetched_epoch": last_epoch, "log_start_offset": 0, "partition_max_bytes": 1 << 20,
         "replica_directory_id": NO_DIRECTORY}
    return ask(quorum.controller(node_id), FETCH, version, {
        "cluster_id": quorum.cluster.cluster_id, "replica_id": replica_id,
        "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
        "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [p]}],
        "forgotten_topics_data": [], "rack_id": "",
    })


@pytest.mark.parametrize("version", versions("Fetch"))
def test_a_follower_fetch_gets_the_leaders_records(quorum, version):
    """A follower that holds the first epoch whole gets the second's batches, as on the leader's disk."""
    observer = 100 + version  # an id no voter has: the leader keeps it as an observer
    start = quorum.first_epoch_end
    answer = fetch(quorum, quorum.leader, version, observer, start, quorum.first_epoch)
    got = partition(answer)
    assert (answer.error_code, got.error_code) == (ErrorCode.none, ErrorCode.none)
    assert (got.current_leader.leader_id, got.current_leader.leader_epoch) == (quorum.leader, quorum.epoch)
    assert got.diverging_epoch.epoch == -1 and got.snapshot_id.epoch == -1
    batches = list(iter_batches(got.records))
    # Records past the high watermark may come too (the controller may have just appended
    # one of its own, not yet committed), as from Kafka's leader.
    assert batches and batches[0].base_offset == start and got.high_watermark > start
    segment = quorum.segment()
    at = next(h.position for h in iter_batches(segment, partial_tail="stop") if h.base_offset == start)
    assert got.records == segment[at : at + len(got.records)]
    # Kafka's KRaft leader names itself in the endpoints from v17 (v16's field is the brokers').
    assert endpoints(answer) == ([quorum.endpoint(quorum.leader)] if version >= 17 else [])
    # The replica's id reached the core, from ReplicaState too: the leader lists it.
    observers = {r.replica_id: r.log_end_offset for r in describe_quorum(quorum.cluster, quorum.leader).observers}
    assert observers.get(observer) == start


@pytest.mark.parametrize("version", versions("Fetch"))
def test_an_empty_follower_is_sent_to_the_latest_snapshot(quorum, version):
    got = partition(fetch(quorum, quorum.leader, version, 100 + version, 0, 0))
    assert got.error_code == ErrorCode.none and not got.records
    assert (got.snapshot_id.end_offset, got.snapshot_id.epoch) == latest_snapshot(quorum)[0]


@pytest.mark.parametrize("version", versions("Fetch"))
def test_a_follower_that_diverged_is_told_where(quorum, version):
    end = quorum.first_epoch_end
    got = partition(fetch(quorum, quorum.leader, version, 100 + version, end + 1, quorum.first_epoch))
    assert got.error_code == ErrorCode.none and not got.records
    assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == (quorum.first_epoch, end)


@pytest.mark.parametrize("version", versions("Fetch"))
def test_a_fetch_at_a_follower_is_told_the_leader(quorum, version):
    answer = fetch(quorum, quorum.follower, version, 100 + version, 0, 0)
    got = partition(answer)
    assert got.error_code == ErrorCode.not_leader_or_follower and not got.records
    assert (got.current_leader.leader_id, got.current_leader.leader_epoch) == (quorum.leader, quorum.epoch)
    assert endpoints(answer) == ([quorum.endpoint(quorum.leader)] if version >= 17 else [])


@pytest.mark.parametrize("version", versions("FetchSnapshot"))
def test_a_snapshot_is_served_in_every_version(quorum, version):
    (end_offset, epoch), on_disk = latest_snapshot(quorum)
    p = {"partition": 0, "current_leader_epoch": quorum.epoch, "snapshot_id": {"end_offset": end_offset, "epoch": epoch},
         "position": 0, "replica_directory_id": NO_DIRECTORY}
    answer = ask(quorum.controller(quorum.leader), FETCH_SNAPSHOT, version, {
        "cluster_id": quorum.cluster.cluster_id, "replica_id": 200 + version, "max_bytes": 1 << 20,
        "topics": [{"name": METADATA_TOPIC, "partitions": [p]}]})
    got = partition(answer)
    assert (answer.error_code, got.error_code) == (ErrorCode.none, ErrorCode.none)
    assert (got.snapshot_id.end_offset, got.snapshot_id.epoch) == (end_offset, epoch)
    assert (got.current_leader.leader_id, got.current_leader.leader_epoch) == (quorum.leader, quorum.epoch)
    assert got.size == len(on_disk) and bytes(got.unaligned_records) == on_disk[: len(got.unaligned_records)]
    assert len(got.unaligned_records) > 0
    if version >= 1:
        assert endpoints(answer) == [quorum.endpoint(quorum.leader)]


def test_a_snapshot_on_the_client_listener_names_no_controller_endpoint(quorum):
    (end_offset, epoch), on_disk = latest_snapshot(quorum)
    p = {"partition": 0, "current_leader_epoch": quorum.epoch, "snapshot_id": {"end_offset": end_offset, "epoch": epoch},
         "position": 0, "replica_directory_id": NO_DIRECTORY}
    answer = ask(quorum.cluster.nodes[quorum.leader].client_port, FETCH_SNAPSHOT, 1, {
        "cluster_id": None, "replica_id": -1, "max_bytes": 1 << 20, "topics": [{"name": METADATA_TOPIC, "partitions": [p]}]})
    got = partition(answer)
    assert got.error_code == ErrorCode.none and got.size == len(on_disk)
    assert endpoints(answer) == [], "a consumer could not reach the leader's controller listener"


@pytest.mark.parametrize("version", versions("DescribeQuorum"))
def test_describe_quorum_at_the_controller_listener(quorum, version):
    answer = ask(quorum.controller(quorum.leader), DESCRIBE_QUORUM, version,
                 {"topics": [TOPIC | {"partitions": [{"partition_index": 0}]}]})
    got = partition(answer)
    assert (got.error_code, got.leader_id, got.leader_epoch) == (ErrorCode.none, quorum.leader, quorum.epoch)
    assert got.high_watermark >= quorum.first_epoch_end
    voters = {r.replica_id: r for r in got.current_voters}
    assert set(voters) == set(quorum.cluster.voter_ids)
    assert voters[quorum.leader].log_end_offset >= got.high_watermark
    if version >= 1:
        assert all(voters[n].last_fetch_timestamp > 0 for n in voters if n != quorum.leader)
    if version >= 2:
        assert answer.error_message is None and got.error_message is None
        assert {r.replica_directory_id for r in got.current_voters + got.observers} == {NO_DIRECTORY}
        assert [(n.node_id, [(e.name, e.host, e.port) for e in n.listeners]) for n in answer.nodes] == [
            (n, [("CONTROLLER", "127.0.0.1", quorum.controller(n))]) for n in sorted(quorum.cluster.voter_ids)]


# ---------------------------------------------------------------- the conversions themselves


def test_fields_a_version_carries_in_another_shape_convert_both_ways():
    """ReplicaState and ReplicaId (Fetch v15), successors and candidates (EndQuorumEpoch v1):
    what a core at either version would be handed, and kio encodes each."""
    v15 = build_request(1, 15, {
        "replica_state": {"replica_id": 7, "replica_epoch": 12}, "max_wait": timedelta(0), "min_bytes": 1,
        "topics": [{"topic_id": METADATA_TOPIC_ID,
                    "partitions": [{"partition": 0, "fetch_offset": 3, "partition_max_bytes": 100}]}],
        "forgotten_topics_data": []})
    v13 = convert(v15, request_class(1, 13), ABSENT[FETCH])
    assert v13.replica_id == 7 and v13.topics[0].partitions[0].fetch_offset == 3
    v17 = convert(v13, request_class(1, 17), ABSENT[FETCH])
    assert (v17.replica_state.replica_id, v17.replica_state.replica_epoch) == (7, -1), "a controller has no broker epoch"
    assert v17.topics[0].partitions[0].replica_directory_id == NO_DIRECTORY

    v1 = build_request(END_QUORUM_EPOCH, 1, {"topics": [TOPIC | {"partitions": [{
        "partition_index": 0, "leader_id": 1, "leader_epoch": 5,
        "preferred_candidates": [{"candidate_id": 3, "candidate_directory_id": NO_DIRECTORY},
                                 {"candidate_id": 2, "candidate_directory_id": NO_DIRECTORY}]}]}],
        "leader_endpoints": []})
    v0 = convert(v1, request_class(END_QUORUM_EPOCH, 0), ABSENT[END_QUORUM_EPOCH])
    assert tuple(v0.topics[0].partitions[0].preferred_successors) == (3, 2), "in the leader's order of preference"
    assert convert(v0, request_class(END_QUORUM_EPOCH, 1), ABSENT[END_QUORUM_EPOCH]) == v1
    for entity in (v13, v17, v0):
        read, _ = decode(type(entity), encode(entity))
        assert encode(read) == encode(entity), "kio writes and reads back what a conversion makes"


def test_a_replica_names_the_leader_it_knows_before_it_holds_the_voter_set():
    """A node formatted --no-initial-controllers learns its leader from a bootstrap server
    before it has replicated the voter set. A node bootstrapping through it is told where
    that leader is, not only its id: with the id alone it sent its next Fetch to a node it
    had no endpoint for ('no endpoint for node 1', then a retry through the bootstrap)."""
    import asyncio

    from kraft.protocol.server import KafkaServer
    from kraft.raft import messages as m
    from kraft.server.apis.raft_versions import RaftVersions
    from kraft.server.runtime.node import RAFT_APIS
    from kraft.server.settings.server_config import Endpoint, load_config

    config = load_config({"node.id": "2", "process.roles": "controller", "controller.listener.names": "CONTROLLER",
                          "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                          "listeners": "CONTROLLER://127.0.0.1:9095,PLAINTEXT://127.0.0.1:9094",
                          "metadata.log.dir": "/nonexistent"})
    learned = {1: Endpoint("127.0.0.1", 9093)}  # from its own bootstrap Fetch; no voter set yet
    versions = RaftVersions(config, RAFT_APIS, voters=dict, endpoint_of=learned.get)

    async def not_the_leader(header: Any, request: Any) -> Any:
        return m.fetch_response(ErrorCode.not_leader_or_follower, leader_id=1, epoch=3)

    async def bootstrap_fetch(version: int) -> Any:
        server = KafkaServer()
        versions.register(server, "Fetch", not_the_leader)
        _, port = await server.start()
        try:
            return await request(port, build_request(FETCH, version, {
                "cluster_id": None, "replica_id": 3, "replica_state": {"replica_id": 3, "replica_epoch": -1},
                "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20, "replica_directory_id": NO_DIRECTORY}]}],
            }))
        finally:
            await server.close()

    answer = asyncio.run(bootstrap_fetch(17))
    assert partition(answer).current_leader.leader_id == 1
    assert endpoints(answer) == [{"node_id": 1, "host": "127.0.0.1", "port": 9093}]
