"""`kraft cluster up`: a local cluster of processes on loopback, until Ctrl-C.

The nodes run in sessions of their own (so a Ctrl-C meant for this command does not hit
them half-way through their own shutdown), which means nothing but this command stops
them: whatever ends it (Ctrl-C or SIGTERM at any moment, start-up included, or a node
that fails to start) stops every node it started before it exits.
"""

import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from kraft.cli.local_cluster import LocalCluster
from kraft.storage.dirlock import DirectoryInUseError, DirectoryLock, check_free
from kraft.storage.meta_properties import StorageNotFormattedError


class _Interrupted(Exception):
    """Ctrl-C or SIGTERM: stop the cluster and exit."""


class _StopSignals:
    """SIGINT and SIGTERM end the command by raising _Interrupted where it is, except
    while processes are being spawned: a signal then waits for the spawning to finish, so
    no node process exists that the command has not recorded (and cannot stop)."""

    def __init__(self) -> None:
        self._deferring = False
        self._pending = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, *_: object) -> None:
        if self._deferring:
            self._pending = True
        else:
            raise _Interrupted

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self._pending:
            raise _Interrupted

    @staticmethod
    def ignore() -> None:
        """A second Ctrl-C must not cut the stopping of the nodes short."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def _claim(directory: Path) -> DirectoryLock:
    """The cluster directory's lock, for the life of this command, taken before anything is
    written there; and none of its nodes' data directories may be in use either (nodes left
    running by a `cluster up` that was killed hold theirs)."""
    lock = DirectoryLock(directory).acquire()
    try:
        for data in sorted(directory.glob("node-*/data")):
            check_free(data)
    except BaseException:
        lock.release()
        raise
    return lock


def cluster_up(directory: str, voters: int, observers: int) -> int:
    if voters < 1 or observers < 0:
        print(f"kraft cluster up: --voters {voters} --observers {observers}: a cluster needs at least one voter "
              "and no fewer than zero observers", file=sys.stderr)
        return 2
    try:
        lock = _claim(Path(directory))
    except (DirectoryInUseError, OSError) as e:
        print(f"kraft cluster up: {e}", file=sys.stderr)
        return 1
    try:
        return _cluster_up(Path(directory), voters, observers)
    finally:
        lock.release()


def _cluster_up(directory: Path, voters: int, observers: int) -> int:
    signals = _StopSignals()
    cluster: LocalCluster | None = None
    try:
        try:
            cluster = LocalCluster(directory, voters, observers)
            with signals.deferred():
                cluster.start(wait=False)
            for node_id in cluster.nodes:
                cluster.wait_listening(node_id)
            _print_nodes(cluster)
            _watch(cluster)
        finally:
            signals.ignore()
    except _Interrupted:
        return 0
    except (RuntimeError, TimeoutError, OSError, StorageNotFormattedError) as e:  # the others stop too
        print(f"kraft cluster up: {e}", file=sys.stderr)
        return 1
    finally:
        if cluster is not None:
            print("\nstopping...", flush=True)
            cluster.stop()
            print("stopped", flush=True)


def _watch(cluster: LocalCluster) -> NoReturn:
    """Reports nodes that exit on their own, until a signal ends the command (by raising)."""
    while True:
        time.sleep(0.2)
        for node in cluster.nodes.values():
            if not node.running and node.process is not None and node.process.returncode not in (None, 0):
                print(f"node {node.node_id} exited with {node.process.returncode}; see {node.log_path}", flush=True)
                node.process = None


def _print_nodes(cluster: LocalCluster) -> None:
    print(f"kraft cluster {cluster.cluster_id}: {cluster.voters} voters, {cluster.observers} observers, on 127.0.0.1\n")
    print(f"{'node':>4}  {'role':<8}  {'controller':<16}  {'client':<16}  {'metrics':<30}  log")
    for node in cluster.nodes.values():
        controller = f"127.0.0.1:{node.controller_port}" if node.voter else "-"
        print(
            f"{node.node_id:>4}  {'voter' if node.voter else 'observer':<8}  {controller:<16}  {node.client:<16}  "
            f"http://127.0.0.1:{node.metrics_port}/metrics  {node.log_path}"
        )
    print(f"\ndata in {cluster.directory}/node-*/data; bootstrap servers {cluster.bootstrap_servers()}")
    print("Ctrl-C stops the cluster.", flush=True)
