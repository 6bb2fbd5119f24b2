"""The faults of a run, all drawn from its seed: the network's, crashes, and the disk's.

A mix names which faults a run gets. Network faults are settings (drop, delay, duplicate)
or episodes (partitions: two-way, one-way, a split, the leader isolated); node faults
are episodes too: a crash (kill -9 and a power cut: every unflushed batch lost), a
resignation, an observer's lost disk, and two storage faults:

* torn-write: a crash after which a random prefix of the unflushed batches survived,
  and a random part of the next one (a torn batch, which recovery must cut);
* bit-flip: a crash after which a byte of flushed data is flipped. Recovery must detect
  it and refuse to open the log, as FileLog does. An observer's operator then moves its
  data away and the node re-replicates from the quorum (by snapshot). A voter cannot do
  that safely (it would forget what it acknowledged and what it voted), so it stays down;
  only a minority of voters is ever hit, so no committed data can be lost.

Three scenarios are mixes of their own, one episode each, for what pre-vote (KIP-996) is
for; with no other fault beside them their figures compare runs with and without it:

* leader-loss: the leader is killed and never comes back, so the voters left must elect
  another (liveness-after-heal then checks it happened);
* rejoin: one follower is cut off from every node for several election timeouts, then
  comes back (without pre-vote it bumps its epoch meanwhile and deposes the leader);
* restart-all: every node is killed at once and all restart together.

Everything heals at `fault_ms`: the network is whole again and every node is started,
but a voter lost for good.
"""

import functools
from random import Random

from kraft.sim.cluster import Cluster
from kraft.sim.network import Clock, Network
from kraft.sim.params import SimParams
from kraft.sim.run_history import History
from kraft.sim.simulated_node import SimNode

NETWORK_SETTINGS = ("drop", "delay", "duplicate")
EPISODES = ("partition", "oneway", "split", "isolate-leader", "crash", "disk-loss", "resign", "torn-write", "bit-flip")
SCENARIOS = ("leader-loss", "rejoin", "restart-all")  # not in "all": each is judged alone
MIXES = (
    "none",
    "drop",
    "delay",
    "duplicate",
    "partition",
    "oneway",
    "split",
    "isolate-leader",
    "crash",
    "late-join",
    "disk-loss",
    "resign",
    "torn-write",
    "bit-flip",
    "all",
    *SCENARIOS,
)
_TORN_WRITE_WAIT_MS = 50


class Faults:
    def __init__(
        self, mix: str, params: SimParams, rng: Random, clock: Clock, network: Network, cluster: Cluster,
        history: History,
    ) -> None:
        if mix not in MIXES:
            raise ValueError(f"unknown fault mix {mix!r}; one of {', '.join(MIXES)}")
        self.mix = mix
        self.params = params
        self.rng = rng
        self.clock = clock
        self.network = network
        self.cluster = cluster
        self.history = history
        self.lost: set[int] = set()  # voters that never come back

    def schedule(self) -> None:
        rng, p, mix = self.rng, self.params, self.mix
        net = self.network.faults
        kinds = set(NETWORK_SETTINGS) | set(EPISODES)
        active = kinds if mix == "all" else ({mix} & kinds)
        if "drop" in active:
            net.drop = rng.uniform(0.05, 0.3)
        if "duplicate" in active:
            net.duplicate = rng.uniform(0.05, 0.3)
        if "delay" in active:
            net.min_delay, net.max_delay = 1, rng.randint(20, 250)
        if mix in SCENARIOS:
            self.clock.at(rng.randint(1000, 3000), functools.partial(self._scenario, mix))
        episodic = active & set(EPISODES)
        t = rng.randint(200, 800)
        while episodic and t < p.fault_ms:
            kind = rng.choice(sorted(episodic))
            length = rng.randint(100, 1500)
            self.clock.at(t, functools.partial(self._episode, kind, length))
            t += rng.randint(300, 1500)
        self.clock.at(p.fault_ms, self._heal)

    def start_empty(self, node: SimNode) -> None:
        """Starts a node that has nothing (it joins late, or lost its disk). If the leader's
        log starts past offset 0 by then, the node must catch up by fetching a snapshot
        (KIP-630: a fetch at offset 0 is answered with the latest snapshot):
        catch-up-by-snapshot checks it. (A leader holding only a dynamic quorum's bootstrap
        snapshot, (0, 0), still has offset 0 in its log.)"""
        if not node.alive and any(
            n.core is not None and n.core.is_leader and n.log.start_offset > 0
            for n in self.cluster.nodes.values()
        ):
            self.history.stats.empty_starts += 1
        node.start()

    # ---------------------------------------------------------------- episodes

    def _episode(self, kind: str, length: int) -> None:
        rng, net, ids = self.rng, self.network.faults, sorted(self.cluster.nodes)
        if kind in ("crash", "torn-write", "bit-flip"):
            self._crash(kind, length)
            return
        if kind == "resign":
            # A graceful shutdown's first step: the leader hands over with EndQuorumEpoch.
            for node in self.cluster.leaders():
                node.step(lambda core, now: core.resign(now))
                self.history.stats.resignations += 1
            return
        if kind == "disk-loss":
            # Observers only: a voter that forgets its votes could vote twice in an epoch,
            # which Raft (and KRaft before KIP-853) cannot survive.
            observers = [n for n in self.cluster.nodes.values() if n.node_id not in self._voters_anywhere() and n.alive]
            if observers:
                victim = rng.choice(observers)
                victim.lose_disk()
                self.history.stats.disks_lost += 1
                self.clock.at(self.clock.now + length, lambda: self.start_empty(victim))
            return
        if kind == "partition":
            a, b = rng.sample(ids, 2)
            links = {(a, b), (b, a)}
        elif kind == "oneway":
            a, b = rng.sample(ids, 2)
            links = {(a, b)}
        elif kind == "split":
            shuffled = rng.sample(ids, len(ids))
            cut = rng.randint(1, len(ids) - 1)
            before = set(net.cut)
            net.split(shuffled[:cut], shuffled[cut:])
            links = net.cut - before
        else:  # isolate-leader
            leaders = [n.node_id for n in self.cluster.leaders()]
            victim_id = leaders[0] if leaders else rng.choice(ids)
            before = set(net.cut)
            net.isolate(victim_id, ids)
            links = net.cut - before
        net.cut |= links
        self.clock.at(self.clock.now + length, lambda: net.cut.difference_update(links))

    def _crash(self, kind: str, length: int, tries: int = 0) -> None:
        """A crash, the leader half the time; a torn write keeps part of the unflushed
        tail, a bit flip then damages what was flushed (on a node allowed to lose it)."""
        rng, stats = self.rng, self.history.stats
        alive = [n for n in self.cluster.nodes.values() if n.alive and (kind != "bit-flip" or self._may_rot(n))]
        if kind == "torn-write":
            # Only what is still unflushed can tear, and a flush takes a few ms: wait for a
            # node that has some (while the disk writes), for a while, then crash anyway.
            unflushed = [n for n in alive if n.log.unflushed_batch_sizes()]
            if not unflushed and tries < _TORN_WRITE_WAIT_MS:
                self.clock.at(self.clock.now + 1, lambda: self._crash(kind, length, tries + 1))
                return
            alive = unflushed or alive
        if not alive:
            return
        leaders = [n for n in alive if n.core is not None and n.core.is_leader]
        victim = leaders[0] if leaders and rng.random() < 0.5 else rng.choice(alive)
        kept = torn = 0
        if kind == "torn-write":
            sizes = victim.log.unflushed_batch_sizes()
            kept = rng.randint(0, len(sizes))
            if kept < len(sizes):  # the next batch was being written: some of it, or none, got there
                torn = rng.randint(0, sizes[kept] - 1)
            stats.torn_writes += bool(kept or torn)
            stats.torn_batches += bool(torn)
        victim.kill(kept, torn)
        stats.kills += 1
        if kind == "bit-flip" and victim.log.flushed_bytes:
            victim.rot(rng.randrange(victim.log.flushed_bytes), rng.randint(1, 255))
            stats.corruptions += 1
        self.clock.at(self.clock.now + length, lambda: self._restart(victim))

    def _voters_anywhere(self) -> set[int]:
        """Every node some voter set names: the newest leader's, or, with membership changes,
        any node's latest (a removal not yet everywhere may be undone, and a stale set still
        counts the node toward its majority); everyone while a node is down and unread."""
        if not self.params.voters_move:
            return set(self.cluster.voter_ids)
        cores = [n.core for n in self.cluster.nodes.values()]
        if any(core is None for core in cores):
            return set(self.cluster.nodes)
        return {v for core in cores if core is not None for v in core.voters.ids}

    def _may_rot(self, node: SimNode) -> bool:
        """Observers may always lose their data; voters only while fewer than a minority did."""
        voters = self.cluster.voter_ids
        if self.params.voters_move:  # whoever was a voter may be one again: one damaged disk a run, anywhere
            return self.history.stats.corruptions == 0
        if node.node_id not in voters:
            return True
        damaged = sum(1 for v in voters if self.cluster.nodes[v].damaged_at is not None)
        return damaged < (len(voters) - 1) // 2

    def _restart(self, node: SimNode) -> None:
        node.start()
        if node.refused is not None and node.node_id not in self._voters_anywhere():
            # The operator's answer to a log that refuses to open: move it away, and let
            # the node fetch everything again from the quorum.
            node.lose_disk()
            self.start_empty(node)

    def _scenario(self, kind: str) -> None:
        rng, net = self.rng, self.network.faults
        voters = [self.cluster.nodes[v] for v in self.cluster.voter_ids]
        leaders = [n for n in voters if n.alive and n.core is not None and n.core.is_leader]
        if kind == "leader-loss":
            victim = leaders[0] if leaders else rng.choice(voters)
            victim.kill()
            self.lost.add(victim.node_id)
            self.history.stats.kills += 1
        elif kind == "rejoin":
            followers = [n for n in voters if n not in leaders]
            ids = sorted(self.cluster.nodes)
            before = set(net.cut)
            net.isolate(rng.choice(followers).node_id, ids)
            links = net.cut - before
            self.clock.at(self.clock.now + rng.randint(3000, 5000), lambda: net.cut.difference_update(links))
        else:  # restart-all
            everyone = [n for n in self.cluster.nodes.values() if n.alive]
            for node in everyone:
                node.kill()
                self.history.stats.kills += 1
            back = self.clock.now + rng.randint(100, 1500)
            for node in everyone:
                self.clock.at(back, functools.partial(self._restart, node))

    def _heal(self) -> None:
        self.network.faults.heal()
        for node in self.cluster.nodes.values():
            if node.node_id not in self.lost:
                self._restart(node)
        self.history.healed_at = self.clock.now
