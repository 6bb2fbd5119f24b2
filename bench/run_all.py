"""`make bench`: every bench/*_bench.py in turn, then one summary of every goal they recorded.

Each benchmark prints its own tables and writes results/<name>.json with its figures in one
shape (common.goal). The summary reads only the files a benchmark wrote while it ran, told by
their modification times before and after it: a file left from an earlier run says nothing
about this one, so a benchmark that failed or wrote nothing is named as such rather than summed
up from old figures.
The exit status is non-zero if a goal was missed, a benchmark failed or wrote nothing.
"""

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import GOAL_COLUMNS, RESULTS, print_goals

HERE = Path(__file__).parent
SUMMARY = RESULTS / "summary.json"


@dataclass
class Run:
    """One benchmark's run: its exit status, wall time and the results files it wrote."""

    script: str
    returncode: int
    seconds: float
    results: list[Path] = field(default_factory=list)


def run(script: Path) -> Run:
    """Run one benchmark; the results files it created or modified are its."""
    print(f"\n=== {script.name} ===", flush=True)
    before = modified()
    started = time.monotonic()
    returncode = subprocess.call([sys.executable, str(script)], cwd=HERE)
    seconds = time.monotonic() - started
    written = sorted(path for path, mtime in modified().items() if before.get(path) != mtime)
    return Run(script.name, returncode, seconds, written)


def modified() -> dict[Path, int]:
    """Each results file's modification time (ns: two writes a moment apart still differ)."""
    return {path: path.stat().st_mtime_ns for path in RESULTS.glob("*.json") if path != SUMMARY}


def summarize(runs: list[Run]) -> dict:
    """Every goal of every run's results, each tagged with its benchmark; and the runs that
    failed or wrote nothing."""
    results = [json.loads(path.read_text()) for r in runs for path in r.results]
    goals = [{"benchmark": result["benchmark"], **g} for result in results for g in result.get("goals", [])]
    return {
        "goals": goals,
        "runs": [{"script": r.script, "returncode": r.returncode, "seconds": r.seconds,
                  "results": [p.name for p in r.results]} for r in runs],
        "exited_non_zero": [r.script for r in runs if r.returncode != 0],
        "wrote_nothing": [r.script for r in runs if not r.results],
        "missed": sum(g["met"] is False for g in goals),
    }


def report(summary: dict) -> int:
    """Print the summary, write it to results/summary.json, and say whether everything held."""
    print("\n=== summary: every goal of this run (ratio = kraft / peer) ===")
    print_goals(summary["goals"], ["benchmark", *GOAL_COLUMNS])
    print()
    for r in summary["runs"]:
        print(f"{r['script']}: {r['seconds']:,.0f} s, exit {r['returncode']}, "
              f"{', '.join(r['results']) or 'no results written'}")
    RESULTS.mkdir(exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=2))
    print(f"\n{summary['missed']} goals missed; summary: {SUMMARY}")
    if summary["exited_non_zero"]:
        print(f"exited non-zero (a goal missed or a failure): {', '.join(summary['exited_non_zero'])}")
    if summary["wrote_nothing"]:
        print(f"failed, wrote no results in this run: {', '.join(summary['wrote_nothing'])}")
    return 1 if summary["missed"] or summary["exited_non_zero"] or summary["wrote_nothing"] else 0


if __name__ == "__main__":
    sys.exit(report(summarize([run(script) for script in sorted(HERE.glob("*_bench.py"))])))
