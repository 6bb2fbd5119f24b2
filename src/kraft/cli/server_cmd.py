"""`kraft server start` and `kraft storage format|random-uuid`."""

import asyncio
import ctypes
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


class ListenerError(Exception):
    """A listener could not be opened; the node stops before it takes part in the quorum."""


async def run_node(node: KraftNode) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await node.start()
    except OSError as e:  # a port is taken or an address is not this host's; nothing was written yet
        raise ListenerError(str(e)) from e
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


# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_large_buffers() -> None:
    """Lets freed large buffers be reused instead of handed back to the OS.

    A node allocates and frees buffers of megabytes all the time (Fetch and FetchSnapshot
    frames, snapshot chunks, record batches). By default glibc maps each one afresh and
    unmaps it on free, so every new one page-faults its way in again: 5 ms for a 10 MiB
    chunk on the benchmark machine, more than copying it. With these thresholds the heap
    keeps up to 512 MiB of freed memory for reuse. Only where the C library is glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 64 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 512 << 20)
    except (OSError, AttributeError):
        pass


def server_start(config_path: str) -> int:
    try:
        config = read_config(config_path)
    except ConfigError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    configure_logging(config.node_id)
    keep_large_buffers()
    try:
        node = KraftNode(config)
    except StorageNotFormattedError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    try:
        asyncio.run(run_node(node))
    except ListenerError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
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
