"""A Spark standalone cluster on this machine: a master and a worker started from PySpark's
own launcher (`bin/spark-class`, which pip's pyspark ships with its jars) on 127.0.0.1.

`local[2]` runs tasks in the driver's JVM and its working directory; a standalone cluster
runs them in executor JVMs that a worker starts in directories of its own, with the Python
interpreter the session names. What differs there (paths, the workers' Python, what is
pickled to tasks) shows only on such a cluster, so the tests and bench/ use this one:

    with standalone_cluster(Path("spark")) as master:        # spark://127.0.0.1:port
        spark = kraft.spark.session(master=master)

Every port is bound by the JVM itself (port 0: the kernel's choice, so nothing can take it
between a choice and the bind; no fixed port, so clusters can run side by side), and the
master's is read from its log. Each JVM leads a process group of its own, so stopping
reaches everything it started (executors, their Python workers), however the caller ended.
"""

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+:\d+)")
_REGISTERED = re.compile(r"Successfully registered with master")


def _wait_logged(process: subprocess.Popen, log: Path, line: re.Pattern, timeout: float) -> re.Match:
    """The first match of `line` in `log`, once `process` has written it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = line.search(log.read_text(errors="replace"))
        if found:
            return found
        if process.poll() is not None:
            raise RuntimeError(f"{log}: exited ({process.returncode}) before {line.pattern!r}:\n"
                               f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"{log}: no {line.pattern!r} in {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def stop_group(process: subprocess.Popen, grace: float = 20.0) -> None:
    """Ends `process` and every process of its group (it must lead one: start_new_session):
    SIGTERM, then SIGKILL to what is left after `grace` seconds; raises if anything
    outlives that."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(process):
            time.sleep(0.2)
        if not _group_alive(process):
            return
    raise RuntimeError(f"process group {process.pid} ({process.args!r:.100}) survived SIGKILL")


def _group_alive(process: subprocess.Popen) -> bool:
    process.poll()  # reaps the leader once it exits
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


@contextmanager
def standalone_cluster(directory: Path, cores: int = 2, memory: str = "2g", timeout: float = 180) -> Iterator[str]:
    """Yields the master's URL (spark://127.0.0.1:port) once a worker with `cores` cores and
    `memory` for executors has registered; stops both, and all they started, on exit.
    `directory` holds their logs (master.log, worker.log) and the worker's directories."""
    directory.mkdir(parents=True, exist_ok=True)
    # No SPARK_CONF_DIR: a user's spark-defaults must not reach this cluster.
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    # The master's REST submission server would bind a fixed port (6066): off, it is not used.
    env |= {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes: list[subprocess.Popen] = []
    try:
        log = directory / "master.log"
        processes.append(_start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", "0", "--webui-port", "0"], env, log))
        url = _wait_logged(processes[-1], log, _MASTER_URL, timeout).group(1)
        log = directory / "worker.log"
        processes.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                 "--port", "0", "--webui-port", "0", "--cores", str(cores), "--memory", memory,
                                 "--work-dir", str(directory / "work"), url], env, log))
        _wait_logged(processes[-1], log, _REGISTERED, timeout)
        yield url
    finally:
        for process in reversed(processes):
            stop_group(process)
