"""`python -m kraft.sim`: run many seeds, or replay one.

    python -m kraft.sim --seeds 5000 --jobs 2     every mix, seeds 0..4999
    python -m kraft.sim --seed 17 --mix crash     replay one run exactly

A failure prints the one command that replays it.
"""

import argparse
import multiprocessing
import sys
import time
from collections import Counter

from kraft.sim.simulation import MIXES, WORKLOADS, SimParams, Simulation, SimulationFailure


def run_one(args: tuple[int, str, int, int, str]) -> tuple[int, str, str | None, dict]:
    seed, mix, voters, observers, workload = args
    params = SimParams(voters=voters, observers=observers)
    try:
        stats = Simulation(seed, mix, params, workload).run()
    except SimulationFailure as e:
        return seed, mix, str(e), {}
    return seed, mix, None, {
        "events": stats.events,
        "elections": stats.elections,
        "kills": stats.kills,
        "disks_lost": stats.disks_lost,
        "resignations": stats.resignations,
        "snapshots": stats.snapshots,
        "snapshots_fetched": stats.snapshots_fetched,
        "acknowledged": stats.acknowledged,
        "dropped": stats.dropped,
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
    args = parser.parse_args(argv)
    def workload(seed: int) -> str:
        return WORKLOADS[seed // len(MIXES) % len(WORKLOADS)] if args.workload == "both" else args.workload

    def job(seed: int) -> tuple[int, str, int, int, str]:
        return seed, args.mix or MIXES[seed % len(MIXES)], args.voters, args.observers, workload(seed)

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
