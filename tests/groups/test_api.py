"""The group handlers on a fake node (a coordinator per partition, each on a fake log): every
version clients use, through kio's encoders both ways, with Kafka's errors."""

import asyncio
import functools
from datetime import timedelta

import pytest

from kraft.groups import partition_for
from kraft.groups.api import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    VERSIONS,
)
from kraft.protocol import ErrorCode
from kraft.protocol.codec import request_class, response_class
from tests.groups.harness import DELAY, Node, subscription

E = ErrorCode


def run(test):
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return wrapper


async def started(coroutine) -> asyncio.Task:
    """The request, running until it waits for its answer."""
    task = asyncio.ensure_future(coroutine)
    await asyncio.sleep(0)  # a yield, not a wait: everything up to the reply runs at once
    return task


def groups_on_partitions(partitions: int, count: int) -> list[str]:
    """`count` group ids on `count` different partitions."""
    found: dict[int, str] = {}
    for i in range(1000):
        found.setdefault(partition_for(f"group-{i}", partitions), f"group-{i}")
        if len(found) == count:
            return list(found.values())
    raise AssertionError("too few partitions")


def test_every_version_served_exists_in_kio_both_ways():
    for key, (low, high) in VERSIONS.items():
        for version in range(low, high + 1):
            request_class(key, version), response_class(key, version)


# ---------------------------------------------------------------- FindCoordinator


@pytest.mark.parametrize("version", range(0, 4))
@run
async def test_find_coordinator_for_one_group(version):
    node = Node()
    node.endpoints[partition_for("g", 3)] = (7, "node7", 9097)
    found = await node.request(FIND_COORDINATOR, version, {"key": "g", "key_type": 0})
    assert (found.error_code, found.node_id, found.host, found.port) == (E.none, 7, "node7", 9097)


@pytest.mark.parametrize("version", range(4, 7))
@run
async def test_find_coordinator_for_several_groups(version):
    node = Node()
    g, h = groups_on_partitions(3, 2)
    del node.endpoints[partition_for(h, 3)]  # no leader known for h's partition
    found = await node.request(FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": [g, h]})
    assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
        (g, E.none, 1), (h, E.coordinator_not_available, -1)]
    transactional = await node.request(FIND_COORDINATOR, version, {"key_type": 1, "coordinator_keys": ["tx"]})
    assert transactional.coordinators[0].error_code == E.invalid_request


# ---------------------------------------------------------------- a group through every API

# (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups):
# the highest each client speaks of the first six, read from its source (a client uses the
# highest version both sides speak); the last two are admin calls, at versions of their range.
CLIENTS = {
    "oldest served": (0, 0, 0, 0, 2, 1, 0, 0),
    "librdkafka 2.x": (5, 3, 3, 1, 9, 9, 4, 4),
    "kafkajs 2.2": (5, 3, 3, 3, 5, 4, 2, 2),
    "kafka-python 2.x": (5, 3, 3, 3, 7, 5, 3, 2),
    "kafka-python 3.x": (7, 5, 4, 5, 8, 8, 5, 5),
    "newest served": (9, 5, 4, 5, 9, 9, 5, 5),
}


@pytest.mark.parametrize("client", CLIENTS)
@run
async def test_a_consumer_group_through_every_api(client):
    join_v, sync_v, beat_v, leave_v, commit_v, fetch_v, describe_v, list_v = CLIENTS[client]
    node = Node()
    sub = subscription("t")
    join = {"group_id": "g", "session_timeout": timedelta(seconds=10), "rebalance_timeout": timedelta(seconds=30),
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": "range", "metadata": sub}]}
    if join_v >= 4:
        first = await node.request(JOIN_GROUP, join_v, join)
        assert first.error_code == E.member_id_required and first.member_id.startswith("client-")
        join["member_id"] = first.member_id
    waiting = await started(node.request(JOIN_GROUP, join_v, join))
    assert not waiting.done()
    node.advance(DELAY)
    joined = await waiting
    member = joined.member_id
    assert (joined.error_code, joined.generation_id, joined.leader) == (E.none, 1, member)
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, sub)]
    assert joined.protocol_name == "range"

    synced = await node.request(SYNC_GROUP, sync_v, {
        "group_id": "g", "generation_id": 1, "member_id": member, "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b"assigned"}]})
    assert (synced.error_code, synced.assignment) == (E.none, b"assigned")
    beat = await node.request(HEARTBEAT, beat_v, {"group_id": "g", "generation_id": 1, "member_id": member,
                                                  "group_instance_id": None})
    assert beat.error_code == E.none

    committed = await node.request(OFFSET_COMMIT, commit_v, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": member, "group_instance_id": None,
        "retention_time": timedelta(milliseconds=-1),
        "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 3, "committed_metadata": "m"},
            {"partition_index": 9, "committed_offset": 1, "committed_leader_epoch": 3, "committed_metadata": ""}]}]})
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, E.none), (9, E.unknown_topic_or_partition)]  # t has 4 partitions
    epoch = 3 if commit_v >= 6 else -1  # CommittedLeaderEpoch came with OffsetCommit v6
    assert node.coordinator("g").image.offsets_of("g")[("t", 0)].leader_epoch == epoch

    topics = [{"name": "t", "partition_indexes": [0, 1]}]
    if fetch_v >= 8:
        fetched = await node.request(OFFSET_FETCH, fetch_v, {
            "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1, "topics": topics}],
            "require_stable": False})
        assert fetched.groups[0].error_code == E.none
        partitions = fetched.groups[0].topics[0].partitions
    else:
        fetched = await node.request(OFFSET_FETCH, fetch_v, {"group_id": "g", "topics": topics,
                                                             "require_stable": False})
        partitions = fetched.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in partitions] == [(0, 42, "m"), (1, -1, "")]
    if fetch_v >= 5:  # the committed epoch, returned (KIP-320)
        assert [p.committed_leader_epoch for p in partitions] == [epoch, -1]

    described = await node.request(DESCRIBE_GROUPS, describe_v, {"groups": ["g", "nobody"],
                                                                 "include_authorized_operations": False})
    g, nobody = described.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in g.members] == [
        (member, "client", "/0.0.0.0", sub, b"assigned")]
    assert (nobody.error_code, nobody.group_state) == (E.none, "Dead")
    listed = await node.request(LIST_GROUPS, list_v, {"states_filter": [], "types_filter": []})
    assert [(x.group_id, x.protocol_type) for x in listed.groups] == [("g", "consumer")]

    left = await node.request(LEAVE_GROUP, leave_v, {"group_id": "g", "member_id": member, "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})
    assert left.error_code == E.none
    described = await node.request(DESCRIBE_GROUPS, describe_v, {"groups": ["g"],
                                                                 "include_authorized_operations": False})
    assert described.groups[0].group_state == "Empty"
    deleted = await node.request(DELETE_GROUPS, 1, {"groups_names": ["g"]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", E.none)]
    assert not node.coordinator("g").image.has_group("g")


# ---------------------------------------------------------------- refusals


@run
async def test_a_group_whose_partition_this_node_does_not_lead_is_not_coordinator():
    node = Node()
    node.led.discard(partition_for("g", 3))
    join = await node.request(JOIN_GROUP, 5, {"group_id": "g", "session_timeout": timedelta(seconds=10),
                                              "rebalance_timeout": timedelta(seconds=30), "member_id": "",
                                              "protocol_type": "consumer", "protocols": []})
    assert join.error_code == E.not_coordinator
    beat = await node.request(HEARTBEAT, 0, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    assert beat.error_code == E.not_coordinator
    fetch = await node.request(OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert [(p.partition_index, p.error_code) for p in fetch.topics[0].partitions] == [(0, E.not_coordinator)]
    fetch = await node.request(OFFSET_FETCH, 3, {"group_id": "g", "topics": None})
    assert (fetch.error_code, fetch.topics) == (E.not_coordinator, ())


@run
async def test_a_coordinator_still_loading_says_so():
    node = Node()
    log = node.logs[partition_for("g", 3)]
    log.elect(node.now)  # a new epoch: its LeaderChange is not committed yet
    beat = await node.request(HEARTBEAT, 3, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                             "group_instance_id": None})
    assert beat.error_code == E.coordinator_load_in_progress
    listed = await node.request(LIST_GROUPS, 3, {})
    assert listed.error_code == E.coordinator_load_in_progress


@run
async def test_offset_fetch_v8_answers_each_group_from_its_own_partition():
    node = Node()
    g, h, k = groups_on_partitions(3, 3)
    node.led.discard(partition_for(k, 3))
    await node.request(OFFSET_COMMIT, 8, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                          "group_instance_id": None, "topics": [{"name": "u", "partitions": [
                                              {"partition_index": 1, "committed_offset": 5,
                                               "committed_leader_epoch": 2, "committed_metadata": None}]}]})
    fetched = await node.request(OFFSET_FETCH, 8, {"require_stable": True, "groups": [
        {"group_id": g, "topics": None}, {"group_id": h, "topics": None}, {"group_id": k, "topics": None}]})
    assert [(x.group_id, x.error_code) for x in fetched.groups] == [(g, E.none), (h, E.none), (k, E.not_coordinator)]
    (topic,) = fetched.groups[0].topics
    assert (topic.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata)
                         for p in topic.partitions]) == ("u", [(1, 5, 2, "")])
    assert fetched.groups[1].topics == ()


@run
async def test_leave_group_v0_answers_the_members_error_at_the_top():
    node = Node()
    left = await node.request(LEAVE_GROUP, 0, {"group_id": "g", "member_id": "nobody"})
    assert left.error_code == E.unknown_member_id
    many = await node.request(LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": "a", "group_instance_id": None}, {"member_id": "b", "group_instance_id": None}]})
    assert many.error_code == E.none and [(m.member_id, m.error_code) for m in many.members] == [
        ("a", E.unknown_member_id), ("b", E.unknown_member_id)]


@pytest.mark.parametrize("version", [0, 6, 7])
@run
async def test_an_error_answer_encodes_at_every_join_group_version(version):
    """protocol_name is not nullable before v7: an error answer says "" there."""
    node = Node()
    answer = await node.request(JOIN_GROUP, version, {
        "group_id": "", "session_timeout": timedelta(seconds=10), "rebalance_timeout": timedelta(seconds=30),
        "member_id": "", "protocol_type": "consumer", "protocols": []})
    assert answer.error_code == E.invalid_group_id
    assert answer.protocol_name == ("" if version < 7 else None)


@run
async def test_offset_delete_and_topics_the_cluster_does_not_have():
    node = Node()
    await node.request(OFFSET_COMMIT, 2, {"group_id": "s", "generation_id_or_member_epoch": -1, "member_id": "",
                                          "retention_time": timedelta(milliseconds=-1), "topics": [
                                              {"name": "t", "partitions": [{"partition_index": 0,
                                                                            "committed_offset": 5,
                                                                            "committed_metadata": ""}]}]})
    deleted = await node.request(OFFSET_DELETE, 0, {"group_id": "s", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]},
        {"name": "gone", "partitions": [{"partition_index": 0}]}]})
    assert deleted.error_code == E.none
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in deleted.topics] == [
        ("t", [(0, E.none)]), ("gone", [(0, E.unknown_topic_or_partition)])]
    assert not node.coordinator("s").image.has_group("s")  # its only offset is gone
    missing = await node.request(OFFSET_DELETE, 0, {"group_id": "missing", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert missing.error_code == E.group_id_not_found


@run
async def test_list_groups_filters_by_state_and_type():
    node = Node()
    for group in groups_on_partitions(3, 2):
        await node.request(OFFSET_COMMIT, 2, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time": timedelta(milliseconds=-1),
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_metadata": ""}]}]})
    everything = await node.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert sorted((g.group_id, g.group_state, g.group_type) for g in everything.groups) == sorted(
        (g, "Empty", "classic") for g in groups_on_partitions(3, 2))
    stable = await node.request(LIST_GROUPS, 4, {"states_filter": ["stable"]})
    empty = await node.request(LIST_GROUPS, 4, {"states_filter": ["EMPTY"]})
    consumer = await node.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    classic = await node.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["Classic"]})
    assert (len(stable.groups), len(empty.groups), len(consumer.groups), len(classic.groups)) == (0, 2, 0, 2)
