"""`kraft server start` and `kraft storage format|random-uuid`."""

import asyncio
import logging
import signal
import sys
from pathlib import Path

from kraft.server.config import ConfigError, read_config
from kraft.server.node import KraftNode, StorageNotFormattedError, format_storage, random_cluster_id


def configure_logging(node_id: int | str) -> None:
    """One line per event: time, level, node, component, what happened in words."""
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s %(levelname)s [node {node_id}] %(name)s: %(message)s",
        stream=sys.stdout,
        force=True,
    )


async def run_node(node: KraftNode) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    print(
        f"node {node.node_id} ready: controller {node.raft_address} client {node.client_address} "
        f"metrics {node.metrics.port}",
        flush=True,
    )
    while not stop.is_set() and node.failure is None:
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except asyncio.TimeoutError:
            pass
    await node.stop(graceful=node.failure is None)


def server_start(config_path: str) -> int:
    try:
        config = read_config(config_path)
    except ConfigError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    configure_logging(config.node_id)
    try:
        node = KraftNode(config)
    except StorageNotFormattedError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    asyncio.run(run_node(node))
    return 2 if node.failure is not None else 0


def storage_format(config_path: str, cluster_id: str) -> int:
    try:
        config = read_config(config_path)
        format_storage(config.log_dir, cluster_id, config.node_id)
    except (ConfigError, StorageNotFormattedError) as e:
        print(f"kraft storage format: {e}", file=sys.stderr)
        return 1
    print(f"Formatted {Path(config.log_dir)} for cluster {cluster_id}, node {config.node_id}")
    return 0


def storage_random_uuid() -> int:
    print(random_cluster_id())
    return 0
