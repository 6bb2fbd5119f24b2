"""A local cluster on loopback: one `kraft server start` process per node.

Used by `kraft cluster up`, the demo, the integration tests and the cluster benchmark.
Each node gets a directory with its server.properties, its data (metadata.log.dir) and
its log file; ports are picked free on 127.0.0.1.
"""

import fcntl
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kraft.cli.scram_args import parse_add_scram
from kraft.controller.bootstrap import write_bootstrap
from kraft.server.settings.server_config import parse_properties
from kraft.storage.meta_properties import format_storage, random_cluster_id

# Small timeouts: a local cluster elects and fails over in a fraction of a second.
LOCAL_DEFAULTS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.append.linger.ms": "1",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


# Ports handed out by this process, each held by a lock on a file shared with every other
# process of this user, for as long as this process lives.
_PORT_CLAIMS = Path(tempfile.gettempdir()) / f"kraft-ports-{os.getuid()}"
_claimed: dict[int, int] = {}


def _claim(port: int) -> bool:
    """Claims `port` for this process, unless this or another live process already has it.

    A bind test alone cannot tell a port another process has picked but not yet bound (a
    cluster writes every node's config before any node starts): CI lost a node to a port
    that two test workers picked at once. The lock is released by the kernel when the
    claiming process exits, however it exits.
    """
    if port in _claimed:
        return False
    _PORT_CLAIMS.mkdir(exist_ok=True)
    fd = os.open(_PORT_CLAIMS / str(port), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _claimed[port] = fd
    return True


def free_port() -> int:
    """A free port on 127.0.0.1 below the kernel's ephemeral range, claimed for this process.

    A port the kernel hands out for bind(0) is also one it may hand to the next outgoing
    connection (or to Spark's JVM) in the moment between our check and the node's bind;
    CI lost a node to exactly that. Below the ephemeral range only another explicit
    picker can collide, and the claim (see `_claim`) keeps kraft's own pickers apart.
    """
    low, _high = _ephemeral_range()
    for _ in range(1000):
        port = random.randrange(max(1024, low - 12000), low) if low > 2048 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = s.getsockname()[1]
        if _claim(port):
            return port
    raise OSError("no free port found on 127.0.0.1")


def _ports_of(config: Path) -> tuple[int | None, int | None, int | None]:
    """The controller, client and metrics ports a node's existing server.properties gives
    (None for each it does not): a cluster started again on its directory keeps them, so
    clients' bootstrap lists stay right across a restart."""
    try:
        entries = parse_properties(config.read_text())
    except (OSError, UnicodeDecodeError):
        return None, None, None
    ports: dict[str, int] = {}
    for entry in entries.get("listeners", "").split(","):
        name, _, address = entry.strip().partition("://")
        port = address.rpartition(":")[2]
        if port.isdigit():
            ports[name] = int(port)
    metrics = entries.get("kraft.metrics.port", "")
    return ports.get("CONTROLLER"), ports.get("PLAINTEXT"), int(metrics) if metrics.isdigit() else None


@dataclass
class LocalNode:
    node_id: int
    voter: bool
    directory: Path
    controller_port: int
    client_port: int
    metrics_port: int
    process: subprocess.Popen | None = None
    starts: int = 0

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def partition_dir(self) -> Path:
        return self.data_dir / "__cluster_metadata-0"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def client(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def started(self) -> subprocess.Popen:
        """Its process (running or exited); a node never started is an error saying so."""
        if self.process is None:
            raise RuntimeError(f"node {self.node_id} has not been started")
        return self.process


@dataclass
class LocalCluster:
    directory: Path
    voters: int = 3
    observers: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    cluster_id: str = ""
    env: dict[str, str] = field(default_factory=dict)  # added to the nodes' environment
    add_scram: list[str] = field(default_factory=list)  # kafka-storage's --add-scram, for a new cluster's log
    nodes: dict[int, LocalNode] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        id_file = self.directory / "cluster.id"
        if not self.cluster_id:
            self.cluster_id = id_file.read_text().strip() if id_file.exists() else random_cluster_id()
        id_file.write_text(self.cluster_id + "\n")
        for node_id in range(1, self.voters + self.observers + 1):
            directory = self.directory / f"node-{node_id}"
            controller, client, metrics = _ports_of(directory / "server.properties")
            node = LocalNode(node_id, node_id <= self.voters, directory,
                             controller or free_port(), client or free_port(), metrics or free_port())
            self.nodes[node_id] = node
        self.write_configs()

    @property
    def voter_ids(self) -> list[int]:
        return [n for n, node in self.nodes.items() if node.voter]

    def bootstrap_servers(self) -> str:
        """The client listeners of the running nodes (all of them before any starts)."""
        running = [node for node in self.nodes.values() if node.running]
        return ",".join(node.client for node in running or self.nodes.values())

    def write_configs(self) -> None:
        quorum = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes.values() if n.voter)
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            listeners = f"PLAINTEXT://127.0.0.1:{node.client_port}"
            if node.voter:
                listeners = f"CONTROLLER://127.0.0.1:{node.controller_port}," + listeners
            props = {
                "node.id": str(node.node_id),
                "process.roles": "broker,controller" if node.voter else "broker",
                "controller.quorum.voters": quorum,
                "listeners": listeners,
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": str(node.data_dir),
                "kraft.metrics.port": str(node.metrics_port),
                **LOCAL_DEFAULTS,
                **self.overrides,
            }
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            if format_storage(node.data_dir, self.cluster_id, node.node_id) and self.add_scram and node.voter:
                write_bootstrap(node.data_dir, [parse_add_scram(a) for a in self.add_scram])

    def start(self, node_id: int | None = None, wait: bool = True) -> None:
        """Starts the selected nodes that are not running and, with `wait`, waits until they
        listen. If one fails to start (or the wait is interrupted), the nodes this call
        started are killed again before the error goes on: nodes run in sessions of their
        own, and a caller that never got a cluster would never stop them."""
        started: list[LocalNode] = []
        try:
            for node in self._select(node_id):
                if node.running:
                    continue
                log = open(node.log_path, "ab")
                node.process = subprocess.Popen(
                    [sys.executable, "-m", "kraft.cli", "server", "start", str(node.config_path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **self.env},
                )
                node.starts += 1
                started.append(node)
                log.close()
            if wait:
                for node in self._select(node_id):
                    self.wait_listening(node.node_id)
        except BaseException:
            for node in started:
                self.kill(node.node_id)
            raise

    def wait_listening(self, node_id: int, timeout: float = 120.0) -> None:
        node = self.nodes[node_id]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not node.running:
                raise RuntimeError(f"node {node_id} exited ({node.started().returncode}); see {node.log_path}")
            try:
                # The metrics endpoint binds last: once it answers, every listener is up.
                for port in (node.client_port, node.metrics_port):
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        pass
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"node {node_id} is not listening after {timeout} s; see {node.log_path}")

    def kill(self, node_id: int) -> None:
        """kill -9: no resignation, no flush."""
        node = self.nodes[node_id]
        if node.running:
            process = node.started()
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process keeps its sockets and state but does nothing, like a long GC
        pause or a stalled VM; on resume it acts on what it believed before."""
        os.killpg(self.nodes[node_id].started().pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.killpg(self.nodes[node_id].started().pid, signal.SIGCONT)

    def stop(self, node_id: int | None = None, timeout: float = 15.0) -> None:
        """SIGTERM (graceful: a leader resigns first), then SIGKILL if it does not exit."""
        processes = [n.started() for n in self._select(node_id) if n.running]
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def _select(self, node_id: int | None) -> list[LocalNode]:
        return list(self.nodes.values()) if node_id is None else [self.nodes[node_id]]

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
