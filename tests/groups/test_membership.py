"""The classic group protocol on a coordinator over a fake log: rebalances of 1 to 3 members,
the sticky leader, session and rebalance timeouts, Kafka's errors, and answers held until
their records commit."""

import pytest

from kraft.groups import CoordinatorError, GroupConfig
from kraft.groups.classic import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE
from kraft.groups.group_messages import JoinRequest, SyncRequest
from kraft.protocol import ErrorCode
from tests.groups.harness import DELAY, Client, done, join_phase, leader, stable_group, subscription

E = ErrorCode


def state(coordinator, group="g"):
    return coordinator.membership.describe(group, 0).state


def test_one_member_is_given_an_id_then_leads_a_group_of_one():
    coordinator, log = leader()
    client = Client(log)
    first = done(client.join(0))
    assert first.error == E.member_id_required and first.member_id.startswith("c-")  # KIP-394
    client.member_id = first.member_id
    waiting = client.join(0)
    assert not waiting.done, "a new group's first join phase lasts the initial rebalance delay"
    log.step(lambda c, t: None, DELAY)
    answer = client.joined(waiting)
    assert (answer.error, answer.generation, answer.leader, answer.protocol_name) == (
        E.none, 1, client.member_id, "range")
    assert [(m.member_id, m.metadata) for m in answer.members] == [(client.member_id, subscription("t"))]
    assert state(coordinator) == COMPLETING_REBALANCE.value
    synced = done(client.sync(DELAY, [(client.member_id, b"A")]))
    assert (synced.error, synced.assignment, synced.protocol_type) == (E.none, b"A", "consumer")
    assert state(coordinator) == STABLE.value
    written = coordinator.image.metadata("g")
    assert (written.generation, written.leader, written.protocol) == (1, client.member_id, "range")
    assert [(m.member_id, m.subscription, m.assignment, m.client_id, m.client_host, m.session_timeout)
            for m in written.members] == [(client.member_id, subscription("t"), b"A", "c", "/127.0.0.1", 10_000)]


def test_an_answer_waits_for_the_records_written_before_it():
    coordinator, log = leader(auto_commit=False)
    client = Client(log)
    first = client.join(0)
    assert not first.done, "the new group's record is not committed yet"
    assert not coordinator.image.has_group("g")
    log.commit()
    client.member_id = done(first).member_id
    assert coordinator.image.metadata("g").generation == 0  # Kafka writes a new group at once, empty
    waiting = client.join(0)
    log.step(lambda c, t: None, DELAY)
    client.joined(waiting)
    sync = client.sync(DELAY, [(client.member_id, b"A")])
    assert not sync.done and coordinator.image.metadata("g").members == ()
    log.commit()
    assert done(sync).assignment == b"A"
    assert coordinator.image.metadata("g").members[0].assignment == b"A"


def test_a_heartbeat_answer_waits_for_an_earlier_write():
    coordinator, log = leader(auto_commit=False)
    (client,), now = stable_group(log, 1)
    log.commit()
    commit = client.commit(now, {("t", 0): (5, 1)})
    beat = log.step(lambda c, t: c.heartbeat("g", client.member_id, client.generation, None, t), now)
    assert not commit.done and not beat.done
    log.commit()
    assert done(commit) == (E.none,) and done(beat) == E.none


def test_a_second_member_makes_the_group_rebalance_and_the_leader_stays():
    coordinator, log = leader()
    (first,), now = stable_group(log, 1)
    second = Client(log, client_id="d")
    waiting = second.joining(now)
    assert not waiting.done and state(coordinator) == PREPARING_REBALANCE.value
    assert first.heartbeat(now) == E.rebalance_in_progress
    rejoined = first.join(now)
    answer, other = first.joined(rejoined), second.joined(waiting)
    assert answer.generation == other.generation == 2
    assert answer.leader == other.leader == first.member_id  # sticky: the leader rejoined
    assert {m.member_id for m in answer.members} == {first.member_id, second.member_id}
    assert other.members == ()  # only the leader is told the subscriptions
    follower_sync = second.sync(now)
    assert not follower_sync.done, "a follower's SyncGroup waits for the leader's"
    assignments = [(first.member_id, b"A1"), (second.member_id, b"A2")]
    assert done(first.sync(now, assignments)).assignment == b"A1"
    assert done(follower_sync).assignment == b"A2"
    assert [m.assignment for m in coordinator.image.metadata("g").members] == [b"A1", b"A2"]


def test_a_member_that_does_not_rejoin_in_time_is_removed():
    coordinator, log = leader()
    # Sessions longer than the rebalance timeout, so c2 is removed by the join phase's end.
    clients, now = stable_group(log, 3, session_ms=30_000, rebalance_ms=10_000)
    c0, c1, c2 = clients
    assert state(coordinator) == STABLE.value
    r0 = c0.join(now)  # the leader rejoins: a rebalance
    r1 = c1.join(now + 10)
    assert not r0.done and not r1.done
    assert c2.heartbeat(now + 20) == E.rebalance_in_progress  # told, and does not rejoin
    log.step(lambda c, t: None, now + 9_999)
    assert not r0.done
    log.step(lambda c, t: None, now + 10_000)  # the rebalance timeout
    a0, a1 = c0.joined(r0), c1.joined(r1)
    assert a0.generation == 2 and {m.member_id for m in a0.members} == {c0.member_id, c1.member_id}
    assert a1.leader == c0.member_id
    assert c2.heartbeat(now + 10_000) == E.unknown_member_id


def test_a_leader_that_does_not_rejoin_is_replaced_by_one_that_did():
    coordinator, log = leader()
    (c0, c1), now = stable_group(log, 2, session_ms=30_000, rebalance_ms=10_000)
    c1.protocols = (("range", subscription("t", "u")),)  # a new subscription forces a rebalance
    r1 = c1.join(now)
    log.step(lambda c, t: None, now + c1.rebalance_ms)
    answer = c1.joined(r1)
    assert answer.leader == c1.member_id and [m.member_id for m in answer.members] == [c1.member_id]
    assert c0.heartbeat(now + c1.rebalance_ms) == E.unknown_member_id


def test_a_silent_member_is_removed_when_its_session_ends():
    coordinator, log = leader()
    (c0, c1), now = stable_group(log, 2)
    session = c1.session_ms
    for t in range(now, now + session, session // 4):
        assert c0.heartbeat(t) == E.none  # c0 keeps heartbeating, c1 does not
    log.step(lambda c, t: None, now + session - 1)
    assert state(coordinator) == STABLE.value
    log.step(lambda c, t: None, now + session)
    assert state(coordinator) == PREPARING_REBALANCE.value
    assert c0.heartbeat(now + session) == E.rebalance_in_progress
    answer = c0.joined(c0.join(now + session))
    assert answer.generation == 2 and [m.member_id for m in answer.members] == [c0.member_id]


def test_the_last_member_leaving_empties_the_group_and_writes_that():
    coordinator, log = leader()
    (client,), now = stable_group(log, 1)
    left = done(client.leave(now))
    assert left.members == ((client.member_id, None, E.none),)
    written = coordinator.image.metadata("g")
    assert (written.generation, written.members, written.protocol, written.leader) == (2, (), None, None)
    assert state(coordinator) == "Empty" and "g" not in coordinator.membership.groups


def test_a_pending_member_that_never_joins_expires():
    coordinator, log = leader()
    client = Client(log, session_ms=500)
    client.member_id = done(client.join(0)).member_id
    log.step(lambda c, t: None, 499)
    assert client.member_id in coordinator.membership.groups["g"].pending_join
    log.step(lambda c, t: None, 500)
    assert "g" not in coordinator.membership.groups
    assert done(client.join(500)).error == E.unknown_member_id


def test_a_member_that_joins_but_never_syncs_is_removed_after_the_rebalance_timeout():
    coordinator, log = leader()
    c0, c1 = (Client(log, client_id=name, session_ms=60_000, rebalance_ms=10_000) for name in "ab")
    r0, r1 = c0.joining(0), c1.joining(0)
    now = join_phase(log, [r0, r1], 0)
    c0.joined(r0), c1.joined(r1)
    done(c0.sync(now, [(c0.member_id, b"x"), (c1.member_id, b"y")]))
    assert state(coordinator) == STABLE.value
    log.step(lambda c, t: None, now + c1.rebalance_ms)  # c1 never sent SyncGroup
    assert c1.member_id not in coordinator.membership.groups["g"].members
    assert state(coordinator) == PREPARING_REBALANCE.value


def test_the_first_rebalance_waits_while_members_keep_arriving():
    config = GroupConfig(initial_rebalance_delay_ms=3000, min_session_timeout_ms=1)
    coordinator, log = leader(config)
    c0, c1 = Client(log, client_id="a", rebalance_ms=10_000), Client(log, client_id="b", rebalance_ms=10_000)
    r0 = c0.join(0, v4=False)
    r1 = c1.join(1000, v4=False)  # a new member during the first delay extends it
    log.step(lambda c, t: None, 3000)  # by another delay
    log.step(lambda c, t: None, 5999)
    assert not r0.done and not r1.done
    log.step(lambda c, t: None, 6000)
    assert len(c0.joined(r0).members) == 2 and c1.joined(r1).generation == 1


def test_the_protocol_is_the_one_most_members_prefer():
    coordinator, log = leader()
    sub = subscription("t")
    prefs = [(("range", sub), ("roundrobin", sub)), (("roundrobin", sub), ("range", sub)),
             (("roundrobin", sub), ("range", sub))]
    clients = [Client(log, client_id=f"c{i}", protocols=p) for i, p in enumerate(prefs)]
    replies = [c.joining(0) for c in clients]
    now = join_phase(log, replies, 0)
    assert {c.joined(r).protocol_name for c, r in zip(clients, replies)} == {"roundrobin"}
    lone = Client(log, client_id="x", protocols=(("sticky", sub),))
    assert done(lone.join(now)).error == E.inconsistent_group_protocol  # supports none of the group's


def join_request(**fields):
    base = dict(group_id="g", member_id="", protocol_type="consumer", protocols=(("range", b""),),
                session_timeout_ms=10_000, rebalance_timeout_ms=30_000, client_id="c")
    return JoinRequest(**(base | fields))


@pytest.mark.parametrize("fields, error", [
    ({"group_id": ""}, E.invalid_group_id),
    ({"session_timeout_ms": 0}, E.invalid_session_timeout),
    ({"session_timeout_ms": 1_800_001}, E.invalid_session_timeout),
    ({"group_instance_id": "static-1"}, E.unsupported_version),  # static membership is not served
    ({"member_id": "c-unknown"}, E.unknown_member_id),  # an id, for a group that does not exist
])
def test_join_group_errors(fields, error):
    coordinator, log = leader()
    assert done(log.step(lambda c, t: c.join_group(join_request(**fields), t), 0)).error == error


def test_a_group_at_its_max_size_takes_no_new_member():
    coordinator, log = leader(GroupConfig(initial_rebalance_delay_ms=DELAY, min_session_timeout_ms=1, max_size=1))
    (client,), now = stable_group(log, 1)
    full = done(Client(log, client_id="d").join(now, v4=False))
    assert (full.error, full.member_id) == (E.group_max_size_reached, "")
    assert client.heartbeat(now) == E.none


def test_errors_once_a_group_exists():
    coordinator, log = leader()
    (client, other), now = stable_group(log, 2)
    other_type = join_request(protocol_type="connect", requires_known_member_id=False)
    assert done(log.step(lambda c, t: c.join_group(other_type, t), now)).error == E.inconsistent_group_protocol
    stale = SyncRequest("g", client.member_id, client.generation + 1)
    assert done(log.step(lambda c, t: c.sync_group(stale, t), now)).error == E.illegal_generation
    stranger = SyncRequest("g", "c-stranger", client.generation)
    assert done(log.step(lambda c, t: c.sync_group(stranger, t), now)).error == E.unknown_member_id
    nowhere = SyncRequest("h", client.member_id, 1)
    assert done(log.step(lambda c, t: c.sync_group(nowhere, t), now)).error == E.unknown_member_id
    renamed = SyncRequest("g", client.member_id, client.generation, protocol_name="roundrobin")
    assert done(log.step(lambda c, t: c.sync_group(renamed, t), now)).error == E.inconsistent_group_protocol
    client.generation += 1
    assert client.heartbeat(now) == E.illegal_generation
    client.generation -= 1
    client.join(now)  # the leader rejoins: a rebalance, which waits for the other member
    assert done(other.sync(now)).error == E.rebalance_in_progress


def test_a_second_join_while_the_first_waits_answers_the_first():
    coordinator, log = leader()
    client = Client(log)
    first = client.joining(0)
    second = client.join(1)
    assert done(first).error == E.rebalance_in_progress and not second.done
    log.step(lambda c, t: None, DELAY)
    assert client.joined(second).generation == 1


def test_a_new_leader_loads_its_groups_and_loses_what_was_not_committed():
    coordinator, log = leader(auto_commit=False)
    (client,), now = stable_group(log, 1)
    log.commit()
    pending = client.commit(now, {("t", 0): (7, 3)})
    log.elect(now, leader=False)  # another node leads: the commit above is lost
    with pytest.raises(CoordinatorError) as refused:
        done(pending)
    assert refused.value.error == E.not_coordinator
    with pytest.raises(CoordinatorError) as not_leader:
        client.heartbeat(now)
    assert not_leader.value.error == E.not_coordinator
    log.elect(now + 1)  # this node leads again
    with pytest.raises(CoordinatorError) as loading:
        client.heartbeat(now + 1)
    assert loading.value.error == E.coordinator_load_in_progress
    log.commit()
    assert client.heartbeat(now + 1) == E.none  # the group was loaded, Stable, generation 1
    assert len(coordinator.image.offsets_of("g")) == 0
    log.step(lambda c, t: None, now + client.session_ms)
    assert state(coordinator) == STABLE.value
    log.step(lambda c, t: None, now + 1 + client.session_ms)  # no heartbeat since: the session ends
    log.commit()
    assert state(coordinator) == "Empty" and coordinator.image.metadata("g").generation == 2
