"""`kraft cluster up`: a local cluster of processes on loopback, until Ctrl-C."""

import signal
import time
from pathlib import Path

from kraft.cli.local_cluster import LocalCluster


def cluster_up(directory: str, voters: int, observers: int) -> int:
    cluster = LocalCluster(Path(directory), voters, observers)
    cluster.start()
    print(f"kraft cluster {cluster.cluster_id}: {voters} voters, {observers} observers, on 127.0.0.1\n")
    print(f"{'node':>4}  {'role':<8}  {'controller':<16}  {'client':<16}  {'metrics':<30}  log")
    for node in cluster.nodes.values():
        controller = f"127.0.0.1:{node.controller_port}" if node.voter else "-"
        print(
            f"{node.node_id:>4}  {'voter' if node.voter else 'observer':<8}  {controller:<16}  {node.client:<16}  "
            f"http://127.0.0.1:{node.metrics_port}/metrics  {node.log_path}"
        )
    print(f"\ndata in {cluster.directory}/node-*/data; bootstrap servers {cluster.bootstrap_servers()}")
    print("Ctrl-C stops the cluster.")
    stopping = []
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping:
        time.sleep(0.2)
        for node in cluster.nodes.values():
            if not node.running and node.process is not None and node.process.returncode not in (None, 0):
                print(f"node {node.node_id} exited with {node.process.returncode}; see {node.log_path}")
                node.process = None
    print("\nstopping...")
    cluster.stop()
    print("stopped")
    return 0
