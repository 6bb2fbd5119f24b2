"""A coordinator on a fake partition log, and the group handlers on a fake node: unit tests only.

`FakePartition` is what a coordinator needs of its Raft core (groups/partition.py), kept in
memory: appends become batches, and a test decides when they commit (`commit()`), are lost
to a new leader (`new_leader()`), or are committed at the end of every step (`auto_commit`).
Committed batches reach the coordinator as the core hands them over, control batches
included. `Node` holds one such coordinator per `__consumer_offsets` partition and is the
handlers' GroupContext; its requests and responses go through kio's encoders and decoders,
so what the handlers build is what a client would read. The real Raft core is used in
test_on_raft_core.py.
"""

import random
from types import SimpleNamespace
from typing import Any

from kraft.groups import GroupApi, GroupConfig, GroupCoordinator
from kraft.protocol.build import build_request
from kraft.protocol.codec import decode_request, decode_response, encode_request, response_class
from kraft.protocol.regions import encode_response_segments
from kraft.raft import CommittedBatch, LeaderAndEpoch
from kraft.records import Record
from kraft.security.acl import Authorizer
from kraft.statemachine.snapshot_policy import SnapshotPolicy
from kraft.storage import MemorySnapshotStore
from kraft.storage.snapshot import SnapshotId

# Short timeouts, so tests need not move the clock far: a new group's first join phase lasts
# DELAY ms (Kafka's default is 3 s).
DELAY = 100
CONFIG = GroupConfig(initial_rebalance_delay_ms=DELAY, min_session_timeout_ms=1)


class FakePartition:
    def __init__(self, coordinator: GroupCoordinator, node_id: int = 1, auto_commit: bool = False) -> None:
        self.coordinator = coordinator
        self.node_id = node_id
        self.auto_commit = auto_commit
        self.epoch = 0
        self.leader_id: int | None = None
        self.is_leader = False
        self.leader_state: Any = None
        self.log = SimpleNamespace(start_offset=0)
        self.snapshots = MemorySnapshotStore()
        self.batches: list[CommittedBatch] = []  # every batch of the log, committed or not
        self.committed = 0  # batches handed to the coordinator
        self.epochs: dict[int, int] = {}  # offset -> epoch, for snapshot ids
        coordinator.core = self

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    @property
    def high_watermark(self) -> int:
        return self.batches[self.committed - 1].last_offset + 1 if self.committed else 0

    def _batch(self, values: list, now: int, control: bool = False) -> CommittedBatch:
        base = self.next_offset
        records = [Record((base + i, now, key, value, ())) for i, (key, value) in enumerate(values)]
        batch = CommittedBatch(base, base + len(values) - 1, self.epoch, now,
                               sum(len(k or b"") + len(v or b"") + 20 for k, v in values) + 61, records, control)
        self.batches.append(batch)
        for r in records:
            self.epochs[r.offset] = self.epoch
        return batch

    def elect(self, now: int = 0, leader: bool = True) -> None:
        """A new epoch: this node leads it (its LeaderChange batch first) or follows."""
        del self.batches[self.committed:]  # what was not committed is lost
        self.epoch += 1
        self.is_leader = leader
        self.leader_id = self.node_id if leader else self.node_id + 1
        self.coordinator.handle_leader_change(LeaderAndEpoch(self.leader_id, self.epoch))
        if leader:
            batch = self._batch([(b"\x00\x00\x00\x02", b"")], now, control=True)
            self.leader_state = SimpleNamespace(epoch_start_offset=batch.base_offset)
        else:
            self.leader_state = None

    def append(self, records: list, now: int) -> tuple[int, int]:
        assert self.is_leader
        batch = self._batch(list(records), now)
        return self.epoch, batch.last_offset

    def commit(self) -> int:
        """Hands every batch not yet committed to the coordinator; returns how many."""
        n = 0
        while self.committed < len(self.batches):
            batch = self.batches[self.committed]
            self.committed += 1
            self.coordinator.handle_commit(batch)
            n += 1
        return n

    def step(self, action, now: int):
        """One step of the 'core': the action, the coordinator's poll, then (auto_commit) the commit."""
        result = action(self.coordinator, now)
        self.coordinator.poll(now)
        if self.auto_commit:
            self.commit()
        return result

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        return SnapshotId(end_offset, self.epochs.get(end_offset - 1, 0))

    def create_snapshot(self, snapshot_id: SnapshotId, last_contained_log_time: int):
        return self.snapshots.create_writer(snapshot_id, last_contained_log_time)


def leader(config: GroupConfig = CONFIG, auto_commit: bool = True, partition: int = 0, seed: int = 1,
           policy: SnapshotPolicy | None = None):
    """An active coordinator (elected, its LeaderChange committed) and its partition."""
    coordinator = GroupCoordinator(partition, config, policy, rng=random.Random(seed))
    log = FakePartition(coordinator, auto_commit=auto_commit)
    log.elect()
    log.commit()
    return coordinator, log


def replay(log: FakePartition, upto: int | None = None) -> GroupCoordinator:
    """A fresh coordinator fed the committed batches of `log`, as a follower would be."""
    follower = GroupCoordinator(log.coordinator.partition)
    for batch in log.batches[: log.committed if upto is None else upto]:
        follower.handle_commit(batch)
    return follower


class Node:
    """A node with a coordinator per partition, each its own fake log; the GroupContext of
    the handlers. Requests pass through kio's encoding both ways."""

    def __init__(self, partitions: int = 3, config: GroupConfig = CONFIG, topics: dict[str, int] | None = None,
                 node_id: int = 1, authorizer: Authorizer | None = None) -> None:
        self.partitions = partitions
        self.authorizer = authorizer  # None: the authorizer off
        self.principal = "User:ANONYMOUS"  # who sends the requests (tests switch it)
        self.now = 1_000_000
        self.topics = topics if topics is not None else {"t": 4, "u": 2}
        self.logs = []
        for p in range(partitions):
            coordinator, log = leader(config, partition=p, seed=p)
            log.node_id = node_id
            self.logs.append(log)
        self.api = GroupApi(self)
        self.led = set(range(partitions))
        self.endpoints = {p: (node_id, "localhost", 9092) for p in range(partitions)}

    # ---- GroupContext
    @property
    def offsets_partitions(self) -> int:
        return self.partitions

    async def run(self, partition, action):
        if partition not in self.led:
            return None
        return self.logs[partition].step(action, self.now)

    def coordinator_endpoint(self, partition):
        return self.endpoints.get(partition)

    def knows_partition(self, topic, partition):
        return 0 <= partition < self.topics.get(topic, 0)

    def allowed(self, operation, resource_type, name):
        return self.authorizer is None or self.authorizer.authorize(
            self.principal, "127.0.0.1", operation, resource_type, name)

    # ---- driving
    def coordinator(self, group_id: str) -> GroupCoordinator:
        return self.logs[self.api.partition_of(group_id)].coordinator

    def advance(self, ms: int) -> None:
        """Time passes: every coordinator's timers run, as the node's timer would."""
        self.now += ms
        for p in self.led:
            self.logs[p].step(lambda c, now: None, self.now)

    async def request(self, api_key: int, version: int, fields: dict, client_id: str = "client"):
        """Encodes the request, has the handler answer it, and decodes the answer."""
        request = build_request(api_key, version, fields)
        header, decoded = decode_request(encode_request(request, 7, client_id)[4:])
        handler = self.api_handlers()[api_key]
        response = await handler(header, decoded)
        frame = b"".join(encode_response_segments(7, response))  # as the server writes it, hand-written answers too
        correlation, parsed = decode_response(frame[4:], response_class(api_key, version))
        assert correlation == 7
        return parsed

    def api_handlers(self) -> dict:
        server = SimpleNamespace(handlers={})
        server.register = lambda key, low, high, handler: server.handlers.__setitem__(key, (low, high, handler))
        self.api.register(server)
        return {key: handler for key, (_, _, handler) in server.handlers.items()}


def subscription(*topics: str) -> bytes:
    """A consumer's subscription as kafka-python encodes it (ConsumerProtocolSubscription v0)."""
    from kafka.protocol.consumer import ConsumerProtocolSubscription

    return ConsumerProtocolSubscription(0, list(topics), b"").encode()


def done(reply):
    """The reply's answer, which must have been sent."""
    assert reply.done, "the reply is still waiting"
    return reply.result()


class Client:
    """One consumer's requests to a coordinator, as a client sends them: the member id and
    generation it was given are kept and sent back."""

    def __init__(self, log: FakePartition, group: str = "g", client_id: str = "c", topics=("t",),
                 protocols=None, session_ms: int = 10_000, rebalance_ms: int = 30_000, protocol_type="consumer"):
        self.log = log
        self.group = group
        self.client_id = client_id
        self.protocols = protocols if protocols is not None else (("range", subscription(*topics)),)
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.protocol_type = protocol_type
        self.member_id = ""
        self.generation = -1
        self.assignment = None

    def join(self, now: int, v4: bool = True):
        from kraft.groups.group_messages import JoinRequest

        request = JoinRequest(self.group, self.member_id, self.protocol_type, self.protocols, self.session_ms,
                              self.rebalance_ms, self.client_id, "/127.0.0.1", requires_known_member_id=v4)
        return self.log.step(lambda c, t: c.join_group(request, t), now)

    def joining(self, now: int):
        """JoinGroup v4+: asks for an id, then joins with it; returns that second reply."""
        from kraft.protocol import ErrorCode

        if not self.member_id:
            first = done(self.join(now))
            assert first.error == ErrorCode.member_id_required, first
            self.member_id = first.member_id
        return self.join(now)

    def joined(self, reply):
        """Takes the JoinGroup answer's generation."""
        answer = done(reply)
        self.generation = answer.generation
        self.member_id = answer.member_id or self.member_id
        return answer

    def sync(self, now: int, assignments=()):
        from kraft.groups.group_messages import SyncRequest

        request = SyncRequest(self.group, self.member_id, self.generation, tuple(assignments))
        return self.log.step(lambda c, t: c.sync_group(request, t), now)

    def heartbeat(self, now: int):
        return done(self.log.step(
            lambda c, t: c.heartbeat(self.group, self.member_id, self.generation, None, t), now))

    def leave(self, now: int):
        return self.log.step(lambda c, t: c.leave_group(self.group, [(self.member_id, None)], t), now)

    def commit(self, now: int, offsets: dict, generation: int | None = None):
        """offsets: (topic, partition) -> (offset, leader epoch)."""
        from kraft.groups.group_messages import CommitPartition, CommitRequest

        request = CommitRequest(self.group, self.generation if generation is None else generation, self.member_id,
                                tuple(CommitPartition(t, p, o, e, "meta") for (t, p), (o, e) in offsets.items()))
        return self.log.step(lambda c, t: c.commit_offsets(request, t), now)


def join_phase(log: FakePartition, replies, now: int) -> int:
    """Steps DELAY at a time until every JoinGroup is answered (a new group's first join
    phase is extended while members keep arriving); returns the time it ended."""
    for _ in range(100):
        if all(r.done for r in replies):
            return now
        now += DELAY
        log.step(lambda c, t: None, now)
    raise AssertionError("the join phase did not end")


def stable_group(log: FakePartition, n: int, now: int = 0, **client_options) -> tuple[list[Client], int]:
    """n members joined a new group at `now` and synced when its first join phase ended (some
    multiple of DELAY later), the first the leader; returns them and that time. Every record is committed as it is written."""
    auto_commit, log.auto_commit = log.auto_commit, True
    clients = [Client(log, client_id=f"c{i}", **client_options) for i in range(n)]
    replies = [c.joining(now) for c in clients]
    now = join_phase(log, replies, now)
    for client, reply in zip(clients, replies):
        client.joined(reply)
    leader_client = clients[0]
    assignments = [(c.member_id, f"A{i}".encode()) for i, c in enumerate(clients)]
    syncs = [c.sync(now, assignments if c is leader_client else ()) for c in clients[1:]]
    syncs.insert(0, leader_client.sync(now, assignments))
    for client, reply in zip(clients, syncs):
        client.assignment = done(reply).assignment
    log.auto_commit = auto_commit
    return clients, now
