"""A Spark standalone cluster for tests: a master and one worker, started from PySpark's own
launcher (`bin/spark-class`, which pip's pyspark ships with its jars) on 127.0.0.1 with free
ports, each in a process group of its own so that teardown reaches every JVM they start
(the worker's executors, their Python workers) however the test ended."""

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from kraft.cli.local_cluster import free_port

SPARK_HOME = Path(pyspark.__file__).parent
STARTED = {"master": "I have been elected leader", "worker": "Successfully registered with master"}


def _wait_logged(process: subprocess.Popen, log: Path, line: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if line in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise RuntimeError(f"{log.name}: exited ({process.returncode}) before {line!r}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"{log.name}: no {line!r} in {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def stop_group(process: subprocess.Popen) -> None:
    """Ends `process` and every process of its group (it must lead one: start_new_session):
    SIGTERM, then SIGKILL to what is left after 20 s; raises if anything outlives that."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(process):
            time.sleep(0.2)
        if not _group_alive(process):
            break
    if _group_alive(process):
        raise RuntimeError(f"process group {process.pid} ({process.args[:2]}) survived SIGKILL")


def _group_alive(process: subprocess.Popen) -> bool:
    process.poll()  # reaps the leader once it exits
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def standalone_cluster(directory: Path, cores: int = 2, memory: str = "1g", timeout: float = 180) -> Iterator[str]:
    """Yields the master's URL (spark://127.0.0.1:port) once the worker has registered."""
    directory.mkdir(parents=True, exist_ok=True)
    # No SPARK_CONF_DIR: a user's spark-defaults must not reach the test's cluster.
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    env |= {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_port = free_port()
    url = f"spark://127.0.0.1:{master_port}"
    commands = {
        "master": [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(master_port), "--webui-port", str(free_port())],
        "worker": [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                   "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(cores),
                   "--memory", memory, "--work-dir", str(directory / "work"), url],
    }
    processes: list[subprocess.Popen] = []
    try:
        for name, command in commands.items():
            log = directory / f"{name}.log"
            with open(log, "wb") as out:
                process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
            processes.append(process)
            _wait_logged(process, log, STARTED[name], timeout)
        yield url
    finally:
        for process in reversed(processes):
            stop_group(process)
