"""Committed offsets on a coordinator over a fake log: the committed leader epoch (KIP-320),
Kafka's checks of who may commit, what a fetch sees, and deleting offsets and groups."""

import pytest

from kraft.groups import CoordinatorError
from kraft.groups.group_messages import CommitPartition, CommitRequest
from kraft.groups.offsets_records import OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY, OffsetCommitKey, decode_value
from kraft.protocol import ErrorCode
from tests.groups.harness import Client, done, leader, stable_group

E = ErrorCode


def fetch(log, group="g", topics=None, now=0, stable=False):
    return done(log.step(lambda c, t: c.fetch_offsets(group, topics, t, require_stable=stable), now))


def offsets(answer):
    return {(o.topic, o.partition): (o.offset, o.leader_epoch, o.metadata) for o in answer.offsets}


def test_a_members_commit_keeps_the_leader_epoch_and_a_fetch_returns_it():
    coordinator, log = leader()
    (client,), now = stable_group(log, 1)
    assert done(client.commit(now, {("t", 0): (42, 5), ("t", 1): (7, -1)})) == (E.none, E.none)
    value = coordinator.image.offsets_of("g")[("t", 0)]
    assert (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp) == (42, 5, "meta", now)
    assert offsets(fetch(log, topics=[("t", [0, 1, 2])])) == {
        ("t", 0): (42, 5, "meta"), ("t", 1): (7, -1, "meta"), ("t", 2): (-1, -1, "")}
    assert offsets(fetch(log)) == {("t", 0): (42, 5, "meta"), ("t", 1): (7, -1, "meta")}  # all of them


def test_a_fetch_sees_only_committed_offsets_unless_it_asks_for_stable_ones():
    coordinator, log = leader(auto_commit=False)
    (client,), now = stable_group(log, 1)
    log.commit()
    commit = client.commit(now, {("t", 0): (42, 5)})
    assert offsets(fetch(log, now=now)) == {}, "not committed yet"
    stable = log.step(lambda c, t: c.fetch_offsets("g", None, t, require_stable=True), now)
    assert not stable.done and not commit.done
    log.commit()
    assert done(commit) == (E.none,)
    assert offsets(done(stable)) == {("t", 0): (42, 5, "meta")}


def test_a_commit_without_group_management_makes_a_simple_group():
    coordinator, log = leader()
    loner = Client(log, group="simple")
    assert done(loner.commit(0, {("t", 0): (3, 1)}, generation=-1)) == (E.none,)
    assert coordinator.image.has_group("simple") and coordinator.image.metadata("simple") is None
    listed = done(log.step(lambda c, t: c.list_groups(t), 0))
    assert [(g.group_id, g.protocol_type, g.state) for g in listed] == [("simple", "", "Empty")]


@pytest.mark.parametrize("not_found_error, expected", [(True, E.group_id_not_found), (False, E.illegal_generation)])
def test_a_generation_for_a_group_that_does_not_exist(not_found_error, expected):
    coordinator, log = leader()
    request = CommitRequest("nowhere", 3, "m", (CommitPartition("t", 0, 1),), group_id_not_found_error=not_found_error)
    assert done(log.step(lambda c, t: c.commit_offsets(request, t), 0)) == (expected,)


def test_who_may_commit_to_a_group_with_members():
    coordinator, log = leader()
    (c0, c1), now = stable_group(log, 2)
    assert done(c0.commit(now, {("t", 0): (1, 1)}, generation=c0.generation + 1)) == (E.illegal_generation,)
    stranger = Client(log, client_id="x")
    stranger.member_id, stranger.generation = "x-1", c0.generation
    assert done(stranger.commit(now, {("t", 0): (1, 1)})) == (E.unknown_member_id,)
    assert done(c0.commit(now, {("t", 0): (1, 1)}, generation=-1)) == (E.illegal_generation,)  # a member id
    anonymous = Client(log)
    assert done(anonymous.commit(now, {("t", 0): (1, 1)}, generation=-1)) == (E.unknown_member_id,)
    c0.join(now)  # the leader rejoins; c1 too: CompletingRebalance
    c1.joined(c1.join(now))
    assert done(c1.commit(now, {("t", 0): (1, 1)})) == (E.rebalance_in_progress,)


def test_a_commit_by_a_member_keeps_its_session_alive():
    coordinator, log = leader()
    (client,), now = stable_group(log, 1)
    for t in range(now, now + 3 * client.session_ms, client.session_ms // 2):
        done(client.commit(t, {("t", 0): (t, 1)}))
    assert client.heartbeat(now + 3 * client.session_ms) == E.none


def test_metadata_over_the_limit_is_refused_for_that_partition_only():
    coordinator, log = leader()
    request = CommitRequest("g", -1, "", (CommitPartition("t", 0, 1, metadata="x" * 4097),
                                          CommitPartition("t", 1, 1, metadata="\U0001F600" * 2049),
                                          CommitPartition("t", 2, 1, metadata="x" * 4096)))
    # A character outside the BMP counts twice, as Java's String.length() counts it.
    assert done(log.step(lambda c, t: c.commit_offsets(request, t), 0)) == (
        E.offset_metadata_too_large, E.offset_metadata_too_large, E.none)
    assert list(coordinator.image.offsets_of("g")) == [("t", 2)]


def test_a_retention_time_is_written_as_an_expire_timestamp():
    coordinator, log = leader()
    request = CommitRequest("g", -1, "", (CommitPartition("t", 0, 5, metadata=None),), retention_ms=60_000)
    done(log.step(lambda c, t: c.commit_offsets(request, t), 1000))
    value = coordinator.image.offsets_of("g")[("t", 0)]
    assert (value.expire_timestamp, value.metadata) == (61_000, "")
    written = log.batches[-1].records[0].value
    assert int.from_bytes(written[:2], "big") == OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    assert decode_value(OffsetCommitKey("g", "t", 0), written) == value


def test_an_answer_whose_records_do_not_commit_in_time_times_out():
    coordinator, log = leader(auto_commit=False)
    loner = Client(log)
    commit = loner.commit(0, {("t", 0): (1, 1)}, generation=-1)
    assert coordinator.next_deadline(0) == coordinator.config.commit_timeout_ms
    log.step(lambda c, t: None, coordinator.config.commit_timeout_ms)
    with pytest.raises(CoordinatorError) as timed_out:
        done(commit)
    assert timed_out.value.error == E.request_timed_out


def test_delete_groups_by_kafkas_rules():
    coordinator, log = leader()
    (member,), now = stable_group(log, 1)
    loner = Client(log, group="simple")
    done(loner.commit(now, {("t", 0): (1, 1), ("u", 1): (2, 1)}, generation=-1))
    (e0,), now = stable_group(log, 1, now=now, group="empty")
    done(e0.commit(now, {("t", 3): (9, 9)}))
    done(e0.leave(now))
    answer = done(log.step(lambda c, t: c.delete_groups(["g", "simple", "empty", "missing", "simple"], t), now))
    assert answer == (("g", E.non_empty_group), ("simple", E.none), ("empty", E.none),
                      ("missing", E.group_id_not_found), ("simple", E.none))
    image = coordinator.image
    assert not image.has_group("simple") and not image.has_group("empty") and image.has_group("g")
    tombstones = [r for r in log.batches[-1].records if r.value is None]
    assert len(tombstones) == 5  # two offsets and the group of "simple", one offset and the group of "empty"
    assert offsets(fetch(log, "empty", now=now)) == {}


def test_offset_delete_keeps_the_topics_members_read():
    coordinator, log = leader()
    (client,), now = stable_group(log, 1, topics=("t",))
    done(client.commit(now, {("t", 0): (1, 1), ("u", 0): (2, 1)}))
    answer = done(log.step(lambda c, t: c.delete_offsets("g", [("t", [0]), ("u", [0, 1])], t), now))
    assert answer.error == E.none
    assert answer.partitions == {("t", 0): E.group_subscribed_to_topic, ("u", 0): E.none, ("u", 1): E.none}
    assert set(coordinator.image.offsets_of("g")) == {("t", 0)}
    missing = done(log.step(lambda c, t: c.delete_offsets("missing", [("t", [0])], t), now))
    assert missing.error == E.group_id_not_found


def test_offset_delete_refuses_a_group_with_members_of_another_protocol():
    coordinator, log = leader()
    (client,), now = stable_group(log, 1, protocol_type="connect")
    done(client.commit(now, {("t", 0): (1, 1)}))
    answer = done(log.step(lambda c, t: c.delete_offsets("g", [("t", [0])], t), now))
    assert answer.error == E.non_empty_group
