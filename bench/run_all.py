"""`make bench`: every bench/*_bench.py in turn; each prints its ratios and writes results/."""

import subprocess
import sys
from pathlib import Path

here = Path(__file__).parent
failed = []
for script in sorted(here.glob("*_bench.py")):
    print(f"\n=== {script.name} ===", flush=True)
    if subprocess.call([sys.executable, str(script)], cwd=here) != 0:
        failed.append(script.name)
if failed:
    print(f"\nbelow target or failed: {', '.join(failed)}")
sys.exit(1 if failed else 0)
