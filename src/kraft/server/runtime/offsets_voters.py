"""The voters of the `__consumer_offsets` partitions on a dynamic quorum (KIP-853): each
partition's own voter set, made to follow the metadata partition's committed one.

On a static quorum every offsets partition votes with controller.quorum.voters. On a
dynamic one the voters are a fact of a log, and each offsets partition is a log of its
own: it is a KIP-853 log itself, its voter set the latest VotersRecord in its log or in the
snapshot it starts from, changed only by its own leader through the membership path that
AddRaftVoter and RemoveRaftVoter take (raft/voter_change_rules.py). So every safety rule of a
voter change holds for it unchanged: one change at a time, each committed before the next,
none before the leader has committed in its epoch, an added voter a caught-up observer.

- **Where a partition's voters start.** `kraft storage format --standalone` or
  `--initial-controllers` writes the metadata partition's bootstrap snapshot (0, 0) and the
  same one in every offsets partition's directory (`write_bootstrap_snapshots`);
  `--no-initial-controllers` writes none, so such a node's offsets partitions, like its
  metadata partition, start knowing no voter and observe, finding each partition's leader
  through controller.quorum.bootstrap.servers. The node never makes a bootstrap snapshot
  itself: a directory that lost its log must come back as an observer, and one made from
  the first voters would vote with a set the partition may have left long ago (two leaders
  in one epoch's worth of history, each with its own "majority").
- **Mirroring.** Every `INTERVAL_S` the node compares, for each offsets partition it leads,
  that partition's latest voter set with the metadata partition's latest set once that is
  committed (as this replica knows: a high watermark, the log holding it). If they differ,
  it puts one change into that partition's core as the RPC would (`next_change` picks it),
  waits for the answer, and looks again. Followers never act; a new leader takes over
  where the last left off, because the state is in the log. A replica whose metadata log
  lags may undo a change a moment (each undo is itself a safe change) and redo it once it
  has caught up.
- **Which change first:** an addition whose voter already fetches this partition as a
  caught-up observer; else the removal of another voter; else an entry whose endpoints
  changed (UpdateRaftVoter); else, once no addition is waiting, the leader's own removal,
  after which it resigns as the metadata partition's leader does.

Directory ids are the metadata partition's: every partition of a node is in the same log
directory (KIP-853 names the directory, not the partition).
"""

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.groups import OFFSETS_TOPIC
from kraft.raft import RaftCore
from kraft.raft.membership_messages import (
    MembershipRequest,
    add_raft_voter_request,
    remove_raft_voter_request,
    response_error,
    update_raft_voter_request,
)
from kraft.raft.voter_change_rules import caught_up
from kraft.raft.voters import VoterSet
from kraft.records.control import Voter
from kraft.server.runtime.partition_driver import PartitionDriver
from kraft.server.settings.server_config import Endpoint, ServerConfig
from kraft.storage.bootstrap_snapshot import write_bootstrap_snapshot

log = logging.getLogger("kraft.server")

INTERVAL_S = 0.1  # how often the leaders compare: a few comparisons of small tuples per partition led
ADD, REMOVE, UPDATE = "add", "remove", "update"
# Answers that only say "not now": the change is tried again at the next look.
RETRIED = frozenset({ErrorCode.none, ErrorCode.request_timed_out, ErrorCode.not_leader_or_follower})


def partition_dir(partition: int) -> str:
    """`__consumer_offsets-<p>`: the partition's directory inside metadata.log.dir."""
    return f"{OFFSETS_TOPIC}-{partition}"


def write_bootstrap_snapshots(log_dir: Path, voters: Iterable[Voter], partitions: int, timestamp_ms: int) -> None:
    """The bootstrap snapshot (0, 0) of each offsets partition, holding the first voters: what
    `kraft storage format --standalone` or `--initial-controllers` writes beside the
    metadata partition's."""
    first = tuple(voters)
    for p in range(partitions):
        write_bootstrap_snapshot(log_dir, first, timestamp_ms, partition_dir(p))


def committed_voters(core: RaftCore) -> VoterSet | None:
    """The metadata partition's latest voter set if this replica knows it is committed: a
    high watermark (a restarted replica has none until its leader answers), a log that holds
    everything below it (else a newer set may be in the part not fetched yet), and the
    set's record below it. None otherwise, or if the set is empty (an observer that has not
    fetched one yet)."""
    hw, voters = core.high_watermark, core.voters
    if hw is None or core.log.end_offset < hw or voters.latest_offset >= hw or not voters.latest.voters:
        return None
    return voters.latest


@dataclass(frozen=True)
class Change:
    """One voter change, as the RPC asks it."""

    kind: str  # ADD, REMOVE or UPDATE
    voter: Voter

    def request(self, cluster_id: str | None, epoch: int, timeout_ms: int) -> MembershipRequest:
        v = self.voter
        directory = uuid.UUID(bytes=v.directory_id)
        if self.kind == ADD:
            return add_raft_voter_request(cluster_id, timeout_ms, v.voter_id, directory, v.endpoints)
        if self.kind == REMOVE:
            return remove_raft_voter_request(cluster_id, v.voter_id, directory)
        return update_raft_voter_request(cluster_id, epoch, v.voter_id, directory, v.endpoints,
                                         (v.min_kraft_version, v.max_kraft_version))

    def __str__(self) -> str:
        return f"{self.kind} voter {self.voter.voter_id}"


def next_change(target: VoterSet, current: VoterSet, leader_id: int, ready: Callable[[int], bool]) -> Change | None:
    """The one change the leader `leader_id` of a partition whose voters are `current` makes
    next toward `target` (None: none now). A voter of `current` whose directory differs from
    the target's (its node was formatted again) is removed before its new entry is added."""
    additions = [v for v in target.voters if current.get(v.voter_id) is None]
    removals = [v for v in current.voters
                if (wanted := target.get(v.voter_id)) is None or wanted.directory_id != v.directory_id]
    for v in additions:
        if ready(v.voter_id):
            return Change(ADD, v)
    for v in removals:
        if v.voter_id != leader_id:
            return Change(REMOVE, v)
    for v in target.voters:
        held = current.get(v.voter_id)
        if held is not None and held.directory_id == v.directory_id and held != v:
            return Change(UPDATE, v)
    if additions:
        return None  # the leader leaves only after every addition it waits for
    return Change(REMOVE, removals[0]) if removals else None


def voter_endpoint(drivers: Iterable[PartitionDriver], node_id: int, config: ServerConfig) -> Endpoint | None:
    """`node_id`'s controller endpoint as some offsets partition's latest voter set has it: a
    voter the metadata partition has removed stays one of an offsets partition until its
    leader removes it there too, and its peers must reach it meanwhile. (A leader that
    removes itself is in no set its followers know once they hold the change, and must
    still be fetched from until it commits: the node keeps each peer's last endpoint for it.)"""
    names = config.controller_listener_names
    for driver in drivers:
        found = driver.core.voters.latest.endpoint(node_id, names[0] if names else None)
        if found is not None:
            return Endpoint(found.host, found.port)
    return None


class OffsetsVoters:
    """The mirror, for one node: started only on a dynamic quorum."""

    def __init__(self, node_id: int, cluster_id: str | None, metadata: PartitionDriver,
                 partitions: Mapping[int, PartitionDriver], fetch_timeout_ms: int, request_timeout_ms: int,
                 now: Callable[[], int], spawn: Callable[[Any], asyncio.Task]) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.metadata = metadata
        self.partitions = partitions
        self.fetch_timeout_ms = fetch_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.now = now
        self.spawn = spawn
        self._busy: set[int] = set()  # partitions with a change of ours in flight
        self._warned: set[tuple[int, str, ErrorCode]] = set()

    async def run(self) -> None:
        while self.metadata.running:
            self.poll()
            await asyncio.sleep(INTERVAL_S)

    def poll(self) -> None:
        """Starts the next change of each partition this node leads whose voters differ."""
        target = committed_voters(self.metadata.core)
        if target is None:
            return
        now = self.now()
        for p, driver in self.partitions.items():
            core = driver.core
            leader = core.leader_state
            # Leading, with an offset committed in its epoch (a change before that is unsafe:
            # an uncommitted one of the previous leader may be in other logs; the leader's own
            # high watermark, as the core's may still be the one it learned as a follower),
            # and its own latest change committed (the membership path would refuse it).
            if (p in self._busy or leader is None or leader.high_watermark is None
                    or core.voters.latest_offset >= leader.high_watermark or core.voters.latest == target):
                continue
            ready = partial(caught_up, leader, fetch_timeout_ms=self.fetch_timeout_ms, now=now)
            change = next_change(target, core.voters.latest, self.node_id, ready)
            if change is not None:
                self._busy.add(p)
                self.spawn(self._apply(p, driver, change))

    async def _apply(self, partition: int, driver: PartitionDriver, change: Change) -> None:
        try:
            log.info("node %d: %s of %s, to follow the metadata partition's voters", self.node_id, change,
                     driver.partition)
            request = change.request(self.cluster_id, driver.core.epoch, self.request_timeout_ms)
            try:
                response = await driver.handle_request(request)
            except Exception:  # the node failed: it logged why, and nothing steps any more
                return
        finally:
            self._busy.discard(partition)
        error, message = response_error(response)
        if error not in RETRIED and (partition, str(change), error) not in self._warned:
            self._warned.add((partition, str(change), error))
            log.warning("node %d: %s of %s refused: %s %s", self.node_id, change, driver.partition, error.name,
                        message or "")
