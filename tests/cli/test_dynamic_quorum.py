"""A dynamic quorum (KIP-853) of real node processes, as an operator builds one with Kafka's
commands: node 1 formatted --standalone, nodes 2 and 3 with --no-initial-controllers, which
find the leader through controller.quorum.bootstrap.servers and fetch as observers; node 2
is added with `metadata-quorum add-controller` once caught up, node 3 adds itself
(controller.quorum.auto.join.enable, KIP-1186); then node 2 is removed."""

import os
import signal
import subprocess
import sys
import time

from kraft.cli.local_cluster import LOCAL_DEFAULTS, free_port
from kraft.storage.meta_properties import kafka_text, random_cluster_id, read_directory_id


def kraft(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def until(check, timeout: float = 60.0, what: str = "condition"):
    """Polls `check` (returns a value or None) until it gives a value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_dynamic_quorum_grows_and_shrinks_through_the_commands(tmp_path):
    cluster_id = random_cluster_id()
    ports = {n: (free_port(), free_port(), free_port()) for n in (1, 2, 3)}  # controller, client, metrics
    bootstrap = f"127.0.0.1:{ports[1][0]}"
    # Node 3 adds itself (KIP-1186, Kafka 4.2): nobody runs add-controller for it.
    auto_join = {3: {"controller.quorum.auto.join.enable": "true"}}
    configs, processes = {}, {}
    for n, (controller, client, metrics) in ports.items():
        props = {"node.id": n, "process.roles": "broker,controller",
                 "controller.quorum.bootstrap.servers": bootstrap,
                 "listeners": f"CONTROLLER://127.0.0.1:{controller},PLAINTEXT://127.0.0.1:{client}",
                 "controller.listener.names": "CONTROLLER", "metadata.log.dir": tmp_path / f"data-{n}",
                 "kraft.metrics.port": metrics, **LOCAL_DEFAULTS, **auto_join.get(n, {})}
        configs[n] = tmp_path / f"node-{n}.properties"
        configs[n].write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        flag = "--standalone" if n == 1 else "--no-initial-controllers"
        formatted = kraft("storage", "format", "-t", cluster_id, "-c", str(configs[n]), flag)
        assert formatted.returncode == 0, formatted.stderr
    directories = {n: kafka_text(read_directory_id(tmp_path / f"data-{n}")) for n in ports}
    try:
        for n in ports:
            log = open(tmp_path / f"node-{n}.log", "ab")
            processes[n] = subprocess.Popen([sys.executable, "-m", "kraft.cli", "server", "start", str(configs[n])],
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        quorum = ("metadata-quorum", "--bootstrap-controller", bootstrap)

        def status() -> str | None:
            out = kraft(*quorum, "describe", "--status")
            return out.stdout if out.returncode == 0 else None

        first = until(status, what="node 1 leading its one-voter quorum")
        assert f'"id": 1, "directoryId": "{directories[1]}"' in first

        def added() -> str | None:
            out = kraft(*quorum, "--command-config", str(configs[2]), "add-controller")
            if out.returncode == 0:
                return out.stdout
            # Refused while the new controller has not caught up as an observer (or node 3's
            # own change is not committed yet).
            assert "REQUEST_TIMED_OUT" in out.stderr, out.stderr
            return None

        assert until(added, what="node 2 added") == (
            f"Added controller 2 with directory id {directories[2]} and endpoints: CONTROLLER://127.0.0.1:{ports[2][0]}\n")

        def voters() -> str | None:
            s = status()
            return s.split("CurrentObservers")[0] if s else None

        until(lambda: (v := voters()) and all(f'"id": {n}, "directoryId": "{directories[n]}"' in v for n in (1, 2, 3)),
              what="node 3 a voter by auto-join")
        assert "asking leader 1 to add it to the voters" in (tmp_path / "node-3.log").read_text()
        replication = kraft(*quorum, "describe", "--replication").stdout.splitlines()
        rows = [[c.strip() for c in line.split("\t")[:-1]] for line in replication]
        assert rows[0][:2] == ["NodeId", "DirectoryId"]
        assert sorted((r[0], r[1]) for r in rows[1:] if r[-1] in ("Leader", "Follower")) == [
            (str(n), directories[n]) for n in (1, 2, 3)]

        duplicate = kraft(*quorum, "--command-config", str(configs[2]), "add-controller")
        assert duplicate.returncode == 1 and "DUPLICATE_VOTER" in duplicate.stderr

        # Node 2 (no auto-join, so it stays out) through node 3's client listener, which
        # forwards to the leader as a Kafka broker does.
        via_3 = ("metadata-quorum", "--bootstrap-server", f"127.0.0.1:{ports[3][1]}")
        removed = kraft(*via_3, "remove-controller", "--controller-id", "2", "--controller-directory-id",
                        directories[2])
        assert removed.returncode == 0 and removed.stdout == (
            f"Removed KRaft controller 2 with directory id {directories[2]}\n"), removed.stderr
        gone = kraft(*quorum, "remove-controller", "-i", "2", "-d", directories[2])
        assert gone.returncode == 1 and "VOTER_NOT_FOUND" in gone.stderr
        left = until(lambda: (v := voters()) and '"id": 2' not in v and v, what="node 2 out of the voters")
        assert f'"id": 3, "directoryId": "{directories[3]}"' in left
    finally:
        for process in processes.values():
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
