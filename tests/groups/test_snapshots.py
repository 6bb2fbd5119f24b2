"""Snapshots of a coordinator's committed state: written by a job, loaded by a fresh
coordinator, equal to replaying the log. The property test drives random members of random
groups (joining, syncing, heartbeating, leaving, committing, time passing, groups and offsets
deleted, leaders changing) and checks at a random point and at the end that a coordinator
restored from a snapshot, plus the batches after it, equals one that replayed every batch,
and that the leader's own image equals a follower's replay."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.groups import CoordinatorError, GroupCoordinator
from kraft.groups.group_messages import NONE
from kraft.protocol import ErrorCode
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from tests.groups.harness import Client, done, leader, replay, stable_group, subscription

ALWAYS = SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.0)  # a snapshot is due whenever asked


def snapshot(coordinator: GroupCoordinator, now: int):
    """Writes a snapshot of the committed image now; returns its id."""
    job = coordinator.start_snapshot(now)
    assert job is not None
    job.run()
    coordinator.finish_snapshot(job)
    return job.writer.snapshot_id


def restored(log, sid) -> GroupCoordinator:
    """A fresh coordinator that loaded snapshot `sid` and then the batches after it."""
    follower = GroupCoordinator(log.coordinator.partition)
    follower.handle_load_snapshot(log.snapshots.open_reader(sid))
    for batch in log.batches[: log.committed]:
        if batch.base_offset >= sid.end_offset:
            follower.handle_commit(batch)
    return follower


def snapshot_bytes(coordinator: GroupCoordinator) -> list:
    return list(coordinator.image.snapshot_records())


def test_a_restored_coordinator_equals_the_one_that_wrote_the_snapshot():
    coordinator, log = leader(policy=ALWAYS)
    clients, now = stable_group(log, 2)
    done(clients[0].commit(now, {("t", 0): (10, 3), ("u", 1): (4, 2)}))
    done(Client(log, group="simple").commit(now, {("t", 1): (5, 1)}, generation=-1))
    sid = snapshot(coordinator, now)
    assert sid.end_offset == coordinator.image.end_offset and log.snapshots.list() == [sid]
    copy = restored(log, sid)
    assert copy.image == coordinator.image
    assert copy.image.offsets_of("g")[("t", 0)].leader_epoch == 3
    assert snapshot_bytes(copy) == snapshot_bytes(coordinator)


def test_a_snapshot_is_written_only_when_the_policy_says_so():
    coordinator, log = leader(policy=SnapshotPolicy(max_bytes_between=10_000, min_changed_ratio=0.0))
    loner = Client(log, group="simple")
    done(loner.commit(0, {("t", 0): (1, 1)}, generation=-1))
    assert coordinator.start_snapshot(0) is None
    for i in range(100):
        done(loner.commit(i, {("t", 0): (i, 1)}, generation=-1))
    job = coordinator.start_snapshot(100)
    assert job is not None and "bytes committed since the last snapshot" in job.reason
    assert coordinator.start_snapshot(100) is None, "one snapshot at a time"
    job.run()
    coordinator.finish_snapshot(job)
    assert coordinator.start_snapshot(100) is None, "nothing committed since"


def test_a_failed_snapshot_leaves_no_file_and_is_retried_later():
    coordinator, log = leader(policy=SnapshotPolicy(max_bytes_between=1, min_changed_ratio=0.0, retry_backoff_ms=50))
    done(Client(log, group="simple").commit(0, {("t", 0): (1, 1)}, generation=-1))
    job = coordinator.start_snapshot(0)
    job.writer.abort()
    coordinator.finish_snapshot(job, OSError("disk full"))
    assert log.snapshots.list() == []
    assert coordinator.start_snapshot(10) is None and coordinator.start_snapshot(60) is not None


# ---------------------------------------------------------------- the property


class Member:
    """A consumer that does, each time it is asked, what a client would do next: join (for an
    id first, with JoinGroup v4+), sync once a generation is given (the leader with an
    assignment for everyone), then heartbeat, rejoining when told of a rebalance."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.join = None
        self.members: tuple = ()
        self.leader = False
        self.synced = False
        self.rejoin = True

    def forget(self) -> None:
        self.client.member_id, self.client.generation = "", -1
        self.join, self.rejoin, self.synced = None, True, False

    def absorb(self) -> None:
        """Takes the answer of its JoinGroup, if it came."""
        if self.join is None or not self.join.done:
            return
        reply, self.join = self.join, None
        try:
            answer = reply.result()
        except CoordinatorError:
            self.forget()
            return
        if answer.error == NONE:
            self.client.member_id, self.client.generation = answer.member_id, answer.generation
            self.leader, self.members = answer.leader == answer.member_id, answer.members
            self.rejoin, self.synced = False, False
        elif answer.error == ErrorCode.member_id_required:
            self.client.member_id = answer.member_id
        else:
            self.forget()

    def act(self, log, now: int, v4: bool) -> None:
        self.absorb()
        client = self.client
        if self.join is not None:
            return
        if self.rejoin:
            self.join = client.join(now, v4=v4)
            self.absorb()
            if self.join is None and self.rejoin:  # MEMBER_ID_REQUIRED: again, with the id
                self.join = client.join(now, v4=v4)
                self.absorb()
        elif not self.synced:
            assignments = [(m.member_id, b"a-" + m.member_id.encode()) for m in self.members] if self.leader else []
            client.sync(now, assignments)
            self.synced = True
        else:
            beat = log.step(lambda c, t: c.heartbeat(client.group, client.member_id, client.generation, None, t), now)
            if beat.done and beat.result() == ErrorCode.rebalance_in_progress:
                self.rejoin = True
            elif beat.done and beat.result() != NONE:
                self.forget()


GROUPS = ("g", "h")
TOPICS = (("t", 0), ("t", 1), ("u", 0))
member_index = st.integers(0, 3)
act = st.tuples(st.just("act"), member_index, st.booleans())
advance = st.tuples(st.just("advance"), st.sampled_from((1, 100, 100, 400, 2_000, 5_000)))
commit = st.tuples(st.just("commit"), member_index, st.sampled_from(TOPICS), st.integers(0, 1000),
                   st.integers(-1, 5), st.booleans())
WEIGHTS = [  # weighted towards what moves a group through its rebalances
    (40, act), (15, advance), (15, commit),
    (4, st.tuples(st.just("leave"), member_index)),
    (4, st.tuples(st.just("subscribe"), member_index, st.sampled_from((("t",), ("t", "u"))))),
    (4, st.tuples(st.just("delete_group"), st.sampled_from(GROUPS))),
    (4, st.tuples(st.just("delete_offsets"), st.sampled_from(GROUPS), st.sampled_from(("t", "u")))),
    (4, st.tuples(st.just("new_leader"), st.booleans())),
    (4, st.tuples(st.just("snapshot"))),
]


def _weighted(n: int) -> st.SearchStrategy:
    for weight, strategy in WEIGHTS:
        if n < weight:
            return strategy
        n -= weight
    raise AssertionError(n)


operation = st.integers(0, sum(w for w, _ in WEIGHTS) - 1).flatmap(_weighted)


def apply(op, members, log, now) -> int:
    kind = op[0]
    if kind == "advance":
        now += op[1]
        log.step(lambda c, t: None, now)
    elif kind == "delete_group":
        log.step(lambda c, t: c.delete_groups([op[1]], t), now)
    elif kind == "delete_offsets":
        log.step(lambda c, t: c.delete_offsets(op[1], [(op[2], [0, 1])], t), now)
    elif kind == "new_leader":
        log.elect(now)  # what was not committed is lost; the groups are loaded again
        if op[1]:
            log.commit()
    elif kind == "act":
        members[op[1]].act(log, now, op[2])
    elif kind == "leave":
        member = members[op[1]]
        if member.client.member_id:
            member.client.leave(now)
        member.forget()
    elif kind == "subscribe":
        member = members[op[1]]
        member.client.protocols = (("range", subscription(*op[2])),)
        member.rejoin = True
    elif kind == "commit":
        _, index, tp, offset, epoch, as_member = op
        members[index].client.commit(now, {tp: (offset, epoch)}, generation=None if as_member else -1)
    return now


def snapshot_at(coordinator, log, now):
    """A snapshot of the committed image now, or the latest if it already ends there."""
    latest = log.snapshots.latest()
    if latest is not None and latest.end_offset >= coordinator.image.end_offset:
        return latest
    return snapshot(coordinator, now)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=40, max_size=150), st.integers(0, 2**32))
def test_restoring_a_snapshot_equals_replaying_the_log(operations, seed):
    coordinator, log = leader(policy=ALWAYS, seed=seed)
    members = [Member(Client(log, group=GROUPS[i % 2], client_id=f"c{i}", session_ms=10_000, rebalance_ms=6_000))
               for i in range(4)]
    now = 0
    taken = []
    for op in operations:
        try:
            now = apply(op, members, log, now)
        except CoordinatorError:
            pass  # not the leader just now, or catching up: a client would retry
        if op[0] == "snapshot" and coordinator.image.offset >= 0:
            taken.append(snapshot_at(coordinator, log, now))
    log.commit()
    full = replay(log)
    assert full.image == coordinator.image, "a follower's replay differs from the leader's image"
    taken.append(snapshot_at(coordinator, log, now))
    for sid in taken:
        copy = restored(log, sid)
        assert copy.image == full.image
        assert snapshot_bytes(copy) == snapshot_bytes(full)
