"""Group authorization as Kafka's KafkaApis decides it, on the handlers of a fake node whose
authorizer holds real ACLs: admin's group is out of alice's reach through every API and
every version clients use (and nothing in its coordinator changes), a group alice is allowed
works, topics she may not read or describe are refused per partition or left out."""

from datetime import timedelta

import pytest

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
from kraft.security.acl import Acl, AclOperation, Authorizer, ResourceType
from kraft.security.acl import AclPermissionType as Permission
from kraft.security.acl import PatternType as Pattern
from tests.groups.harness import DELAY, Node, subscription
from tests.groups.test_api import run, started

E = ErrorCode
GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
ADMIN, ALICE = "User:admin", "User:alice"


def acl(resource: ResourceType, name: str, operation: AclOperation, permission: Permission = Permission.ALLOW,
        pattern: Pattern = Pattern.LITERAL, principal: str = ALICE) -> Acl:
    return Acl(resource, name, pattern, principal, "*", operation, permission)


# alice: READ on the groups named alice-*, but never alice-secret; READ on topic t; nothing on u.
ALICE_ACLS = [
    acl(GROUP, "alice-", READ, pattern=Pattern.PREFIXED),
    acl(GROUP, "alice-secret", AclOperation.ALL, Permission.DENY),
    acl(TOPIC, "t", READ),
]


def secured_node(*acls: Acl) -> Node:
    """A node with the authorizer on (admin a super user, allow.everyone.if.no.acl.found=false)."""
    return Node(authorizer=Authorizer([*ALICE_ACLS, *acls], frozenset({ADMIN}), allow_if_no_acl=False))


def join_fields(group: str, member_id: str = "") -> dict:
    return {"group_id": group, "session_timeout": timedelta(seconds=10), "rebalance_timeout": timedelta(seconds=30),
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": "range", "metadata": subscription("t")}]}


def commit_fields(group: str, offset: int, topics=("t",), generation: int = -1, member: str = "") -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": None, "retention_time": timedelta(milliseconds=-1),
            "topics": [{"name": name, "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": 1,
                 "committed_metadata": "m"}]} for name in topics]}


def fetch_fields(version: int, group: str, topics) -> dict:  # noqa: ANN001
    if version >= 8:
        return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
                "require_stable": False}
    return {"group_id": group, "topics": topics, "require_stable": False}


async def stable_group(node: Node, group: str) -> tuple[str, int]:
    """One member joined and synced `group` as the current principal: (member id, generation)."""
    first = await node.request(JOIN_GROUP, 5, join_fields(group))
    assert first.error_code == E.member_id_required, first
    waiting = await started(node.request(JOIN_GROUP, 5, join_fields(group, first.member_id)))
    node.advance(DELAY)
    joined = await waiting
    assert joined.error_code == E.none, joined
    synced = await node.request(SYNC_GROUP, 3, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": None, "assignments": [{"member_id": joined.member_id, "assignment": b"a"}]})
    assert synced.error_code == E.none
    return joined.member_id, joined.generation_id


def snapshot(node: Node, group: str) -> tuple:
    """Everything the group's coordinator holds of it, and how long its log is."""
    coordinator = node.coordinator(group)
    log = node.logs[node.api.partition_of(group)]
    return coordinator.image.has_group(group), dict(coordinator.image.offsets_of(group)), len(log.batches)


@run
async def test_alices_calls_on_admins_group_are_refused_at_every_version_and_change_nothing():
    node = secured_node()
    node.principal = ADMIN
    member, generation = await stable_group(node, "admin-group")
    committed = await node.request(OFFSET_COMMIT, 8, commit_fields("admin-group", 42, generation=generation,
                                                                    member=member))
    assert committed.topics[0].partitions[0].error_code == E.none
    before = snapshot(node, "admin-group")
    node.principal = ALICE

    for version in range(*_span(FIND_COORDINATOR)):
        if version >= 4:
            found = (await node.request(FIND_COORDINATOR, version, {"key_type": 0,
                                                                    "coordinator_keys": ["admin-group"]})).coordinators[0]
        else:
            found = await node.request(FIND_COORDINATOR, version, {"key": "admin-group", "key_type": 0})
        assert (found.error_code, found.node_id, found.host, found.port) == (E.group_authorization_failed, -1, "", -1)
    for version in range(*_span(JOIN_GROUP)):
        joined = await node.request(JOIN_GROUP, version, join_fields("admin-group"))
        assert (joined.error_code, joined.member_id, joined.generation_id, joined.leader) == (
            E.group_authorization_failed, "", -1, ""), version
    for version in range(*_span(SYNC_GROUP)):  # as leader of the generation, with an assignment of her own
        synced = await node.request(SYNC_GROUP, version, {
            "group_id": "admin-group", "generation_id": generation, "member_id": member, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"hers"}]})
        assert (synced.error_code, synced.assignment) == (E.group_authorization_failed, b""), version
    for version in range(*_span(HEARTBEAT)):
        beat = await node.request(HEARTBEAT, version, {"group_id": "admin-group", "generation_id": generation,
                                                       "member_id": member, "group_instance_id": None})
        assert beat.error_code == E.group_authorization_failed, version
    for version in range(*_span(LEAVE_GROUP)):
        left = await node.request(LEAVE_GROUP, version, {"group_id": "admin-group", "member_id": member, "members": [
            {"member_id": member, "group_instance_id": None, "reason": None}]})
        assert (left.error_code, getattr(left, "members", ())) == (E.group_authorization_failed, ()), version
    for version in range(*_span(OFFSET_COMMIT)):  # generation -1: a simple group's commit, the overwrite tried
        overwrite = await node.request(OFFSET_COMMIT, version, commit_fields("admin-group", 0, topics=("t", "u")))
        assert [(t.name, [p.error_code for p in t.partitions]) for t in overwrite.topics] == [
            ("t", [E.group_authorization_failed]), ("u", [E.group_authorization_failed])], version
    for version in range(*_span(OFFSET_FETCH)):
        for topics in ([{"name": "t", "partition_indexes": [0]}], None):
            if topics is None and version < 2:
                continue  # all topics came with v2
            fetched = await node.request(OFFSET_FETCH, version, fetch_fields(version, "admin-group", topics))
            group = fetched.groups[0] if version >= 8 else fetched
            offsets = [p.committed_offset for t in group.topics for p in t.partitions]
            assert 42 not in offsets, version
            if version >= 2:
                assert (group.error_code, group.topics) == (E.group_authorization_failed, ()), version
            else:  # v1 has no group error: each partition asked carries it
                assert [p.error_code for p in group.topics[0].partitions] == [E.group_authorization_failed]
    deleted_offsets = await node.request(OFFSET_DELETE, 0, {"group_id": "admin-group", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert (deleted_offsets.error_code, deleted_offsets.topics) == (E.group_authorization_failed, ())
    for version in range(*_span(DESCRIBE_GROUPS)):
        described = await node.request(DESCRIBE_GROUPS, version, {"groups": ["admin-group"],
                                                                  "include_authorized_operations": True})
        d = described.groups[0]
        assert (d.group_id, d.error_code, d.group_state, d.protocol_type, d.members) == (
            "admin-group", E.group_authorization_failed, "", "", ()), version
    for version in range(*_span(LIST_GROUPS)):
        listed = await node.request(LIST_GROUPS, version, {"states_filter": [], "types_filter": []})
        assert (listed.error_code, listed.groups) == (E.none, ()), version
    for version in range(*_span(DELETE_GROUPS)):
        deleted = await node.request(DELETE_GROUPS, version, {"groups_names": ["admin-group"]})
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("admin-group", E.group_authorization_failed)], version

    assert snapshot(node, "admin-group") == before  # not one record written, not one offset moved
    node.principal = ADMIN
    beat = await node.request(HEARTBEAT, 3, {"group_id": "admin-group", "generation_id": generation,
                                             "member_id": member, "group_instance_id": None})
    assert beat.error_code == E.none  # admin's member is still there


def _span(api: int) -> tuple[int, int]:
    low, high = VERSIONS[api]
    return low, high + 1


@run
async def test_a_group_alice_may_read_works_and_topics_are_decided_one_by_one():
    node = secured_node()
    node.principal = ALICE
    found = await node.request(FIND_COORDINATOR, 3, {"key": "alice-app", "key_type": 0})
    assert found.error_code == E.none  # READ implies DESCRIBE
    member, generation = await stable_group(node, "alice-app")
    committed = await node.request(OFFSET_COMMIT, 8, commit_fields("alice-app", 7, topics=("t", "u", "missing"),
                                                                    generation=generation, member=member))
    assert [(t.name, t.partitions[0].error_code) for t in committed.topics] == [
        ("t", E.none), ("u", E.topic_authorization_failed), ("missing", E.topic_authorization_failed)]
    assert set(node.coordinator("alice-app").image.offsets_of("alice-app")) == {("t", 0)}

    node.principal = ADMIN  # an offset on u that alice may not see
    assert (await node.request(OFFSET_COMMIT, 8, commit_fields("alice-app", 9, topics=("u",), generation=generation,
                                                               member=member))).topics[0].partitions[0].error_code == E.none
    node.principal = ALICE
    for version in (2, 5, 7, 8, 9):  # all topics: u left out
        fetched = await node.request(OFFSET_FETCH, version, fetch_fields(version, "alice-app", None))
        group = fetched.groups[0] if version >= 8 else fetched
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in group.topics] == [
            ("t", [(0, 7)])], version
    for version in (1, 5, 8):  # named: u refused per partition, without its offset
        fetched = await node.request(OFFSET_FETCH, version, fetch_fields(version, "alice-app", [
            {"name": "t", "partition_indexes": [0]}, {"name": "u", "partition_indexes": [0, 1]}]))
        group = fetched.groups[0] if version >= 8 else fetched
        assert sorted((t.name, p.partition_index, p.committed_offset, p.error_code)
                      for t in group.topics for p in t.partitions) == [
            ("t", 0, 7, E.none), ("u", 0, -1, E.topic_authorization_failed),
            ("u", 1, -1, E.topic_authorization_failed)], version

    described = await node.request(DESCRIBE_GROUPS, 5, {"groups": ["alice-app"], "include_authorized_operations": True})
    assert described.groups[0].group_state == "Stable"
    assert described.groups[0].authorized_operations == (1 << READ) | (1 << DESCRIBE)
    unasked = await node.request(DESCRIBE_GROUPS, 5, {"groups": ["alice-app"], "include_authorized_operations": False})
    assert unasked.groups[0].authorized_operations == -(2**31)
    # OffsetDelete and DeleteGroups need DELETE on the group, which READ does not give.
    refused = await node.request(OFFSET_DELETE, 0, {"group_id": "alice-app", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert refused.error_code == E.group_authorization_failed
    deleted = await node.request(DELETE_GROUPS, 2, {"groups_names": ["alice-app"]})
    assert deleted.results[0].error_code == E.group_authorization_failed
    left = await node.request(LEAVE_GROUP, 3, {"group_id": "alice-app", "members": [
        {"member_id": member, "group_instance_id": None}]})
    assert left.error_code == E.none


@run
async def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic():
    node = secured_node(acl(GROUP, "alice-app", DELETE))
    node.principal = ADMIN
    for topic in ("t", "u"):
        await node.request(OFFSET_COMMIT, 8, commit_fields("alice-app", 3, topics=(topic,)))
    node.principal = ALICE
    deleted = await node.request(OFFSET_DELETE, 0, {"group_id": "alice-app", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}, {"name": "u", "partitions": [{"partition_index": 0}]},
        {"name": "gone", "partitions": [{"partition_index": 0}]}]})
    assert deleted.error_code == E.none
    assert [(t.name, [p.error_code for p in t.partitions]) for t in deleted.topics] == [
        ("t", [E.none]), ("u", [E.topic_authorization_failed]), ("gone", [E.topic_authorization_failed])]
    assert set(node.coordinator("alice-app").image.offsets_of("alice-app")) == {("u", 0)}
    gone = await node.request(DELETE_GROUPS, 2, {"groups_names": ["admin-x", "alice-app", "alice-app"]})
    # each group once, the refused one after the others, as Kafka orders them
    assert [(r.group_id, r.error_code) for r in gone.results] == [
        ("alice-app", E.none), ("admin-x", E.group_authorization_failed)]
    assert not node.coordinator("alice-app").image.has_group("alice-app")


@run
async def test_a_deny_wins_over_the_prefixed_allow():
    node = secured_node()
    node.principal = ALICE
    joined = await node.request(JOIN_GROUP, 5, join_fields("alice-secret"))
    assert joined.error_code == E.group_authorization_failed
    found = await node.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["alice-secret", "alice-ok"]})
    assert [(c.key, c.error_code, c.error_message) for c in found.coordinators] == [
        ("alice-secret", E.group_authorization_failed, None), ("alice-ok", E.none, None)]
    old = await node.request(FIND_COORDINATOR, 2, {"key": "alice-secret", "key_type": 0})
    assert (old.error_code, old.error_message) == (E.group_authorization_failed, "Group authorization failed.")
    committed = await node.request(OFFSET_COMMIT, 8, commit_fields("alice-secret", 1))
    assert committed.topics[0].partitions[0].error_code == E.group_authorization_failed


@run
async def test_find_coordinator_of_a_transactional_id_needs_describe_on_it():
    node = secured_node(acl(ResourceType.TRANSACTIONAL_ID, "tx-ok", DESCRIBE))
    node.principal = ALICE
    found = await node.request(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx-no", "tx-ok"]})
    # allowed, kraft still has no transaction coordinator to name
    assert [(c.key, c.error_code) for c in found.coordinators] == [
        ("tx-no", E.transactional_id_authorization_failed), ("tx-ok", E.invalid_request)]


@run
async def test_list_groups_shows_what_alice_may_describe_or_everything_with_describe_on_the_cluster():
    node = secured_node(acl(GROUP, "shared", DESCRIBE))
    node.principal = ADMIN
    for group in ("admin-group", "alice-app", "shared"):
        await node.request(OFFSET_COMMIT, 8, commit_fields(group, 1))
    node.principal = ALICE
    listed = await node.request(LIST_GROUPS, 4, {"states_filter": []})
    assert sorted(g.group_id for g in listed.groups) == ["alice-app", "shared"]
    cluster = secured_node(acl(CLUSTER, "kafka-cluster", DESCRIBE))
    cluster.principal = ADMIN
    for group in ("admin-group", "alice-app"):
        await cluster.request(OFFSET_COMMIT, 8, commit_fields(group, 1))
    cluster.principal = ALICE
    listed = await cluster.request(LIST_GROUPS, 4, {"states_filter": []})
    assert sorted(g.group_id for g in listed.groups) == ["admin-group", "alice-app"]


@run
async def test_describe_groups_puts_the_refused_first_and_answers_the_others():
    node = secured_node()
    node.principal = ALICE
    described = await node.request(DESCRIBE_GROUPS, 5, {"groups": ["alice-a", "admin-group", "alice-b"],
                                                        "include_authorized_operations": False})
    assert [(d.group_id, d.error_code) for d in described.groups] == [
        ("admin-group", E.group_authorization_failed), ("alice-a", E.none), ("alice-b", E.none)]


@pytest.mark.parametrize("missing", ["protocol_type", "protocol_name"])
@run
async def test_sync_group_v5_without_its_protocol_is_inconsistent_before_authorization(missing):
    node = secured_node()
    node.principal = ALICE
    fields = {"group_id": "admin-group", "generation_id": 1, "member_id": "m", "group_instance_id": None,
              "protocol_type": "consumer", "protocol_name": "range", "assignments": []}
    synced = await node.request(SYNC_GROUP, 5, fields | {missing: None})
    assert synced.error_code == E.inconsistent_group_protocol
    assert (await node.request(SYNC_GROUP, 5, fields)).error_code == E.group_authorization_failed


@run
async def test_with_the_authorizer_off_everything_is_served_and_every_operation_listed():
    node = Node()
    described = await node.request(DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": True})
    operations = described.groups[0].authorized_operations
    assert operations == sum(1 << op for op in (READ, DESCRIBE, DELETE, AclOperation.DESCRIBE_CONFIGS,
                                                 AclOperation.ALTER_CONFIGS))
