"""Shared helpers for the benchmarks: timing, printing, and results files.

Every benchmark compares against a baseline measured in the same run and reports the
ratio, so numbers from different machines or loads still say something.
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


def write_results(name: str, rows: list[dict], **extra: object) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), "rows": rows, **extra}, indent=2))
    return path


def print_table(rows: list[dict], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}" if v < 1000 else f"{v:,.0f}"
    return "" if v is None else str(v)
