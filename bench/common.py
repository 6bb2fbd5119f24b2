"""Shared helpers for the benchmarks: timing, printing, and results files.

Every benchmark compares against a baseline measured in the same run and reports the
ratio, so numbers from different machines or loads still say something. Each figure that has
a goal or a peer is recorded in one shape (`goal`), so that run_all.py can put every
benchmark's figures in one summary without knowing any benchmark.
"""

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def best_of(fn: Callable[[], object], repeat: int = 5, min_seconds: float = 0.2) -> float:
    """Seconds per call: the best of `repeat` rounds, each long enough to be measurable."""
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds / 4:
            break
        calls *= 2
    best = elapsed / calls
    for _ in range(repeat - 1):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU of the processes (their waited-for children too), in seconds, from
    /proc: what a cluster's nodes spent, whatever else the machine ran meanwhile."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def machine() -> dict:
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}


def goal(figure: str, kraft: float, unit: str, *, goal: str | None = None, met: bool | None = None,
         peer: str | None = None, peer_value: float | None = None, ratio: float | None = None,
         note: str | None = None) -> dict:
    """One figure of kraft's beside its goal (as text, and whether it was `met`) and its peer (what
    it is, and its figure measured in the same run). `ratio` is kraft's figure over the peer's,
    in the same unit, so whether above 1 is good depends on the unit (ops/s or ms); a benchmark
    passes its own only where it measured it otherwise (the median of paired rounds)."""
    if ratio is None and peer_value:
        ratio = kraft / peer_value
    return {"figure": figure, "kraft": kraft, "unit": unit, "peer": peer, "peer_value": peer_value, "ratio": ratio,
            "goal": goal, "met": met, "note": note}


GOAL_COLUMNS = ["figure", "kraft", "unit", "peer", "peer_value", "ratio", "goal", "met"]


def compared(rows: list[dict]) -> list[dict]:
    """The figures among `goal` rows that have a goal or a peer: a benchmark's table may also
    hold figures that only give context, and those stay out of the goals and the summary."""
    return [r for r in rows if r["goal"] is not None or r["peer"] is not None]


def all_met(goals: list[dict]) -> bool:
    """No goal missed: a figure with only a peer beside it (met None) misses nothing."""
    return all(g["met"] is not False for g in goals)


def print_goals(goals: list[dict], columns: list[str] = GOAL_COLUMNS) -> None:
    """The goals as a table, `met` spelled out so that a miss stands out."""
    if goals:
        print()
        print_table([g | {"met": {True: "met", False: "MISSED", None: ""}[g["met"]]} for g in goals], columns)


def write_results(name: str, rows: list[dict], goals: list[dict] | None = None, **extra: object) -> Path:
    """bench/results/<name>.json; `goals` (see `goal`) is what run_all.py's summary reads."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), "rows": rows, "goals": goals or [], **extra},
                               indent=2))
    return path


def print_table(rows: list[dict], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        if 0 < abs(v) < 0.01:
            return f"{v:.2g}"  # a small ratio or time, not 0.00
        return f"{v:,.2f}" if v < 1000 else f"{v:,.0f}"
    return "" if v is None else str(v)
