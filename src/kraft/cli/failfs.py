"""failfs.c, a file layer that fails chosen calls on demand, loaded into node processes
with LD_PRELOAD: for `kraft chaos` and the fault-injection tests (see failfs.c for the
rules). Built with the C compiler the package's own extensions need."""

import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("failfs.c")


def build(directory: Path) -> Path:
    """Compiles failfs.c into `directory`; returns the shared library."""
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / "libfailfs.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(library), str(SOURCE), "-ldl", "-lpthread"],
                   check=True)
    return library


def environment(library: Path, rules: Path, log: Path | None = None) -> dict[str, str]:
    """What a node's environment needs for failfs to apply the rules in `rules`."""
    env = {"LD_PRELOAD": str(library), "FAILFS_RULES": str(rules)}
    if log is not None:
        env["FAILFS_LOG"] = str(log)
    return env
