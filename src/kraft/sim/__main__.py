"""`python -m kraft.sim`: run many seeds, or replay one.

    python -m kraft.sim --seeds 5000 --jobs 2     every mix, seeds 0..4999
    python -m kraft.sim --seed 17 --mix crash     replay one run exactly
    python -m kraft.sim --seeds 100 --skip log-matching    without one invariant
    python -m kraft.sim --seeds 300 --mix rejoin --no-pre-vote   what pre-vote saves
    python -m kraft.sim --seeds 300 --membership   a dynamic quorum, voters added and removed
    python -m kraft.sim --seeds 300 --upgrade      a static quorum upgraded to kraft.version 1, then the same

A failure prints the one command that replays it.
"""

import argparse
import multiprocessing
import sys
import time
from collections import Counter

from kraft.sim.simulation import INVARIANTS, MIXES, WORKLOADS, SimParams, Simulation, SimulationFailure

Job = tuple[int, str, int, int, str, tuple[str, ...], bool, bool, bool]


def run_one(args: Job) -> tuple[int, str, str | None, dict]:
    seed, mix, voters, observers, workload, skipped, pre_vote, membership, upgrade = args
    params = SimParams(voters=voters, observers=observers, pre_vote=pre_vote, membership=membership, upgrade=upgrade)
    checked = [name for name in INVARIANTS if name not in skipped]
    try:
        stats = Simulation(seed, mix, params, workload, invariants=checked).run()
    except SimulationFailure as e:
        return seed, mix, str(e), {}
    return seed, mix, None, {
        "events": stats.events,
        "elections": stats.elections,
        "epochs": stats.epochs,
        "kills": stats.kills,
        "disks_lost": stats.disks_lost,
        "resignations": stats.resignations,
        "snapshots": stats.snapshots,
        "snapshots_fetched": stats.snapshots_fetched,
        "acknowledged": stats.acknowledged,
        "torn_writes": stats.torn_writes,
        "torn_batches": stats.torn_batches,
        "torn_tails_cut": stats.torn_tails_cut,
        "corruptions": stats.corruptions,
        "refused_starts": stats.refused_starts,
        "dropped": stats.dropped,
        "voter_changes": stats.voter_changes,
        "voter_changes_refused": stats.voter_changes_refused,
        "upgrades": stats.upgrades,
        "upgrades_healed": stats.upgrades_healed,
        "upgrades_refused": stats.upgrades_refused,
        "upgrades_truncated": stats.upgrades_truncated,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraft.sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, help="run seeds start..start+N-1, mixes in rotation")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seed", type=int, help="replay one seed")
    parser.add_argument("--mix", choices=MIXES, help="fault mix (default: rotate through all)")
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--workload", choices=WORKLOADS + ("both",), default="both",
                        help="what the cluster replicates (default: both, alternating by seed)")
    parser.add_argument("--skip", action="append", default=[], choices=list(INVARIANTS), metavar="INVARIANT",
                        help=f"do not check this invariant (repeatable): one of {', '.join(INVARIANTS)}")
    parser.add_argument("--no-pre-vote", dest="pre_vote", action="store_false",
                        help="voters campaign without asking first (KIP-996 off), to compare")
    family = parser.add_mutually_exclusive_group()
    family.add_argument("--membership", action="store_true",
                        help="a dynamic quorum (KIP-853): voters added and removed during the faults")
    family.add_argument("--upgrade", action="store_true",
                        help="a static quorum raised to kraft.version 1 during the faults, then voters changed")
    args = parser.parse_args(argv)
    def workload(seed: int) -> str:
        return WORKLOADS[seed // len(MIXES) % len(WORKLOADS)] if args.workload == "both" else args.workload

    def job(seed: int) -> Job:
        mix = args.mix or MIXES[seed % len(MIXES)]
        return (seed, mix, args.voters, args.observers, workload(seed), tuple(args.skip), args.pre_vote,
                args.membership, args.upgrade)

    if args.seed is not None:
        jobs = [job(args.seed)]
    elif args.seeds:
        jobs = [job(s) for s in range(args.start, args.start + args.seeds)]
    else:
        parser.error("give --seeds N or --seed S")
    started = time.time()
    totals: Counter = Counter()
    per_mix: Counter = Counter()
    failures = []
    with multiprocessing.Pool(args.jobs) if args.jobs > 1 else _Inline() as pool:
        for _seed, mix, failure, stats in pool.imap_unordered(run_one, jobs, chunksize=4):
            per_mix[mix] += 1
            if failure:
                failures.append(failure)
                print(failure, file=sys.stderr, flush=True)
            totals.update(stats)
    print(f"{len(jobs)} seeds in {time.time() - started:.0f} s: {len(failures)} failed")
    print("by mix: " + ", ".join(f"{m} {per_mix[m]}" for m in MIXES if per_mix[m]))
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    return 1 if failures else 0


class _Inline:
    def __enter__(self) -> "_Inline":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def imap_unordered(self, fn, items, chunksize=1):  # noqa: ANN001
        return map(fn, items)


if __name__ == "__main__":
    sys.exit(main())
