"""One seeded run: a cluster, a client, a fault schedule, and the invariants.

Everything random comes from the seed, so a run replays exactly: the same seed and mix
give the same events in the same order. The parts are apart: the cluster is the
transport (cluster.py, over network.py), the History records what happened
(history.py), the faults come from faults.py, and the named invariants (invariants.py)
judge the run after every event and once at the end; a run may switch any of them off.
A failure names its invariant and prints the one command that replays it.
"""

import functools
import logging
import traceback
import uuid
from collections import deque
from collections.abc import Collection
from random import Random

from kio.schema.errors import ErrorCode

from kraft.raft import NotLeaderError, RaftConfig, RaftCore
from kraft.raft import messages as m
from kraft.raft.kraft_upgrade import UpgradeRefused
from kraft.raft.membership_messages import add_raft_voter_request, remove_raft_voter_request
from kraft.raft.voters import KRAFT_VERSION_DYNAMIC, VoterSet
from kraft.records.control import Voter, VoterEndpoint
from kraft.sim.cluster import OPERATOR, Cluster
from kraft.sim.faults import MIXES, Faults
from kraft.sim.invariants import INVARIANTS, Invariant, build
from kraft.sim.network import Clock, Network
from kraft.sim.params import SimParams
from kraft.sim.run_history import History, Stats, Violation
from kraft.sim.simulated_node import CoreFactory, SimNode
from kraft.sim.workloads import WORKLOADS, Workload, make_workload

__all__ = ["INVARIANTS", "MIXES", "WORKLOADS", "SimParams", "Simulation", "SimulationFailure", "replay_command"]


class SimulationFailure(AssertionError):
    pass


class _Trace(logging.Handler):
    """Keeps the last log lines, stamped with virtual time, for the failure report."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.lines: deque[str] = deque(maxlen=60)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"t={self.clock.now:>6} {record.getMessage()}")


def replay_command(
    seed: int, mix: str, params: SimParams, workload: str = "counter", skipped: Collection[str] = ()
) -> str:
    return (
        f".venv/bin/python -m kraft.sim --seed {seed} --mix {mix} --workload {workload} "
        f"--voters {params.voters} --observers {params.observers}"
        + ("" if params.pre_vote else " --no-pre-vote")
        + (" --membership" if params.membership else "")
        + (" --upgrade" if params.upgrade else "")
        + "".join(f" --skip {name}" for name in skipped)
    )


def _endpoints(node_id: int) -> tuple[VoterEndpoint, ...]:
    return (VoterEndpoint("CONTROLLER", "sim", node_id),)


def _upgrade(core: RaftCore, now: int) -> bool | None:
    """The controller's call for UpdateFeatures kraft.version=1: True if appended, False if
    the log already says 1 (not yet committed), None if refused."""
    try:
        return core.upgrade_kraft_version(KRAFT_VERSION_DYNAMIC, False, now)
    except (NotLeaderError, UpgradeRefused):
        return None


class Simulation:
    def __init__(
        self,
        seed: int,
        mix: str,
        params: SimParams | None = None,
        workload: str = "counter",
        *,
        invariants: Collection[str] | None = None,
        core_factory: CoreFactory = RaftCore,
    ) -> None:
        """`invariants` names the invariants to check (default: every one, see INVARIANTS);
        `core_factory` builds each node's core (tests hand it a deliberately broken one)."""
        if mix not in MIXES:
            raise ValueError(f"unknown fault mix {mix!r}; one of {', '.join(MIXES)}")
        self.seed = seed
        self.mix = mix
        self.workload_name = workload
        self.params = params or SimParams()
        self.workload: Workload = make_workload(workload, self.params)
        self.invariants = build(invariants)
        self._step_checks = [i for i in self.invariants if type(i).step is not Invariant.step]
        self.rng = Random(f"{seed}/sim")
        fault_rng = Random(f"{seed}/faults")
        self.clock = Clock()
        self.network = Network(self.clock, Random(f"{seed}/net"))
        self.history = History()
        voters = tuple(range(1, self.params.voters + 1))
        ids = list(voters) + list(range(self.params.voters + 1, self.params.voters + self.params.observers + 1))
        self.cluster = Cluster(self.network, voters)
        self.faults = Faults(mix, self.params, fault_rng, self.clock, self.network, self.cluster, self.history)
        bootstrap = VoterSet(tuple(Voter(v, uuid.UUID(int=v).bytes, _endpoints(v), 0, 1)
                                   for v in voters)) if self.params.membership else None
        self.history.observe_voters(-1, bootstrap or VoterSet.static(voters))
        for node_id in ids:
            config = RaftConfig(
                node_id=node_id,
                voters=() if bootstrap is not None else voters,
                cluster_id="sim",
                election_timeout_ms=300,
                election_backoff_max_ms=300,
                fetch_timeout_ms=600,
                request_timeout_ms=300,
                fetch_max_wait_ms=100,
                # Retention moves the log start (readers' offsets go only by it): kept small
                # here, so logs start past snapshots and replicas that fall behind fetch them.
                max_retention_bytes=2000,
                pre_vote=self.params.pre_vote,
                bootstrap_servers=len(voters) if bootstrap is not None else 0,
                # What a voter tells the leader of a static quorum for the upgrade (KIP-853's
                # UpdateRaftVoter), and what an operator's AddRaftVoter names.
                directory_id=uuid.UUID(int=node_id).bytes if self.params.upgrade else None,
                endpoints=_endpoints(node_id) if self.params.upgrade else (),
            )
            late = mix == "late-join" and node_id in (voters[-1], ids[-1])
            node = SimNode(
                config, seed=seed, clock=self.clock, rng=self.rng, transport=self.cluster, workload=self.workload,
                history=self.history, core_factory=core_factory, start=not late, bootstrap=bootstrap,
            )
            self.cluster.nodes[node_id] = node
            if late:
                self.clock.at(fault_rng.randint(1000, self.params.fault_ms - 1000),
                              functools.partial(self.faults.start_empty, node))
        self.trace = _Trace(self.clock)
        self._upgrade_appended = 0

    @property
    def nodes(self) -> dict[int, SimNode]:
        return self.cluster.nodes

    @property
    def stats(self) -> Stats:
        return self.history.stats

    def _client_append(self) -> None:
        if self.clock.now >= self.params.quiet_from_ms:
            return
        self.workload.client_step(self.cluster, self.history, self.rng)
        self.clock.at(self.clock.now + self.params.append_every_ms, self._client_append)

    def _newest_leader(self) -> SimNode | None:
        leaders = sorted(self.cluster.leaders(), key=lambda n: n.core.epoch if n.core is not None else -1)
        return leaders[-1] if leaders else None

    def _upgrade_kraft_version(self) -> None:
        """An operator raising kraft.version to 1 (`kraft features upgrade --feature
        kraft.version=1`: the controller's UpdateFeatures calls RaftCore.upgrade_kraft_version
        on the leader): asks the newest leader, and a while later again while the upgrade
        is not committed; refusals are expected (no leader, a voter that has not told this
        leader its entry, a leader deposed) and counted, and so are upgrades appended and
        then truncated away. Once it is committed, voters are changed as with membership."""
        stats = self.history.stats
        if self.history.upgraded_at is not None:
            self._change_voters()
            return
        if self.clock.now >= self.params.quiet_from_ms:
            return
        self.clock.at(self.clock.now + self.rng.randint(*self.params.upgrade_retry_ms), self._upgrade_kraft_version)
        leader = self._newest_leader()
        upgraded = leader.step(_upgrade) if leader is not None else None
        if upgraded is None:
            stats.upgrades_refused += 1
        elif upgraded:
            self._upgrade_appended += 1
            stats.upgrades_truncated = self._upgrade_appended - 1

    def _change_voters(self) -> None:
        """An operator at work (KIP-853): asks the newest leader to add a caught-up observer
        when the set has `voters` members, or to remove a random voter (perhaps the leader
        itself) when it has one more. Refusals are expected (a change pending, a node lagging,
        a leader that lost its majority) and counted; the invariants judge the rest."""
        if self.clock.now >= self.params.fault_ms:
            return
        self.clock.at(self.clock.now + self.rng.randint(1, self.params.change_every_ms * 2), self._change_voters)
        leader = self._newest_leader()
        if leader is None or leader.core is None:
            return
        core = leader.core
        current = core.voters.latest
        if len(current.voters) > self.params.voters:
            victim = self.rng.choice(current.voters)
            request: m.RaftRequest = remove_raft_voter_request("sim", victim.voter_id,
                                                               uuid.UUID(bytes=victim.directory_id))
        else:
            # A running node only: one whose disk was just lost may still look caught up to the
            # leader for a fetch timeout, and would come back a voter that knows nothing (seed 4280).
            others = [n for n, node in sorted(self.cluster.nodes.items()) if current.get(n) is None and node.alive]
            if not others:
                return
            new = self.rng.choice(others)
            request = add_raft_voter_request("sim", self.params.change_every_ms, new, uuid.UUID(int=new),
                                             _endpoints(new))
        leader.step(lambda c, now: c.handle_request((OPERATOR, now), request, now))

    def _count_operator_answers(self) -> None:
        for _, response in self.cluster.operator_answers:
            if response.error_code == ErrorCode.none:
                self.history.stats.voter_changes += 1
            else:
                self.history.stats.voter_changes_refused += 1
        self.cluster.operator_answers.clear()

    def _after_event(self) -> None:
        self.history.observe_leaders(
            [(n.core.epoch, n.node_id) for n in self.cluster.nodes.values() if n.core is not None and n.core.is_leader]
        )
        for invariant in self._step_checks:
            invariant.step(self)

    def _failure(self, message: str) -> SimulationFailure:
        trace = "\n".join(self.trace.lines)
        skipped = [name for name in INVARIANTS if name not in {i.name for i in self.invariants}]
        return SimulationFailure(
            f"seed {self.seed}, mix {self.mix}, t={self.clock.now}: {message}\n"
            f"replay: {replay_command(self.seed, self.mix, self.params, self.workload_name, skipped)}\n"
            f"--- last events ---\n{trace}"
        )

    def run(self) -> Stats:
        raft_log = logging.getLogger("kraft.raft")
        raft_log.addHandler(self.trace)
        level, propagate = raft_log.level, raft_log.propagate
        raft_log.setLevel(logging.INFO)
        raft_log.propagate = False
        try:
            self.faults.schedule()
            self.clock.at(0, self._client_append)
            if self.params.membership:
                self.clock.at(500, self._change_voters)
            if self.params.upgrade:
                self.clock.at(self.rng.randint(*self.params.upgrade_from_ms), self._upgrade_kraft_version)
            self.clock.run_until(self.params.end_ms, self._after_event)
            self.history.stats.epochs = max(
                (state.epoch for n in self.cluster.nodes.values() if (state := n.store.read()) is not None), default=0)
            for invariant in self.invariants:
                invariant.end(self)
        except Violation as e:
            raise self._failure(str(e)) from None
        except Exception:  # a node that crashed is a failure too, with its replay command
            raise self._failure(f"a step raised:\n{traceback.format_exc()}") from None
        finally:
            raft_log.removeHandler(self.trace)
            raft_log.setLevel(level)
            raft_log.propagate = propagate
        self._count_operator_answers()
        history = self.history
        if self.params.upgrade and history.upgraded_at is not None:
            history.stats.upgrades = 1
            history.stats.upgrades_healed = int(history.healed_at is not None
                                                and history.upgraded_time >= history.healed_at)
        self.history.stats.dropped = self.network.dropped
        self.history.stats.delivered = self.network.delivered
        return self.history.stats
