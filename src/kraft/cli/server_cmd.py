"""`kraft server start` and `kraft storage format|info|random-uuid`."""

import asyncio
import ctypes
import json
import logging
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from kraft.cli.initial_controllers import InitialControllersError, QuorumFlags, plan_dynamic_quorum
from kraft.cli.scram_args import ScramArgumentError, parse_add_scram
from kraft.controller.bootstrap import write_bootstrap
from kraft.controller.quorum_controller import BOOTSTRAP_METADATA_VERSION, BOOTSTRAP_RELEASE
from kraft.metadata.image import METADATA_VERSION
from kraft.metadata.records import FeatureLevelRecord
from kraft.raft.messages import METADATA
from kraft.server.runtime.node import KraftNode
from kraft.server.runtime.offsets_voters import write_bootstrap_snapshots
from kraft.server.runtime.partition_driver import LOG_PARTITION
from kraft.server.settings.server_config import ConfigError, read_config, unused_keys_warning
from kraft.storage import StorageError
from kraft.storage.bootstrap_snapshot import write_bootstrap_snapshot
from kraft.storage.dirlock import DirectoryInUseError, DirectoryLock
from kraft.storage.meta_properties import (
    InvalidClusterIdError,
    StorageNotFormattedError,
    check_cluster_id,
    format_storage,
    random_cluster_id,
    read_meta_entries,
)

log = logging.getLogger("kraft.server.start")


LOG_FORMAT_ENV = "KRAFT_LOG_FORMAT"


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line, for machines: the same event as the text line, with the
    message's template ("event") and its values ("args") apart, so lines of one kind are
    found by their template and their figures read without parsing prose."""

    def __init__(self, node_id: int | str) -> None:
        super().__init__()
        self.node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "node": self.node_id,
            "partition": getattr(record, "partition", LOG_PARTITION.get()),
            "logger": record.name,
            "message": record.getMessage(),
            "event": str(record.msg),
            "args": list(record.args) if isinstance(record.args, tuple) else record.args,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _name_the_partition(record: logging.LogRecord) -> bool:
    """Which partition's step wrote the line (the Raft core's lines do not say): in the text
    line only when it is not the metadata partition, so those lines read as they always did."""
    partition = LOG_PARTITION.get()
    record.partition = partition
    record.where = "" if partition == str(METADATA) else f" {partition}"
    return True


def configure_logging(node_id: int | str) -> None:
    """One line per event. By default for people: time, level, node, component, what
    happened in words. With KRAFT_LOG_FORMAT=json, the same events as JSON objects."""
    choice = os.environ.get(LOG_FORMAT_ENV, "text")
    if choice not in ("text", "json"):
        raise ConfigError(f"{LOG_FORMAT_ENV}: {choice!r} is not text or json")
    handler = logging.StreamHandler(sys.stdout)
    handler.addFilter(_name_the_partition)
    handler.setFormatter(
        JsonLogFormatter(node_id) if choice == "json"
        else logging.Formatter(f"%(asctime)s %(levelname)s [node {node_id}%(where)s] %(name)s: %(message)s")
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


# What an operator can do about a replica whose files are damaged, when the rest of the
# quorum is healthy: a replica's data is a copy of the leader's.
REFETCH = ("If the rest of the quorum is healthy, move this node's metadata.log.dir away, format it again "
           "(kraft storage format) and start the node: it fetches everything again from the leader")


class StartError(Exception):
    """The node could not start (a listener, its storage); it stops before it takes part in
    the quorum, with one line saying why."""


async def run_node(node: KraftNode) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await node.start()
    except StorageError as e:  # damaged files: which, where, and the way out
        raise StartError(f"{e}. {REFETCH}") from e
    except OSError as e:  # a port taken, a disk failing: one line each
        raise StartError(str(e)) from e
    log.info("node %d ready: controller %s client %s metrics %s", node.node_id, node.raft_address,
             node.client_address, node.metrics.port)
    stopped, failed = asyncio.create_task(stop.wait()), asyncio.create_task(node.failed.wait())
    await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    failed.cancel()
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
    try:
        configure_logging(config.node_id)
    except ConfigError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    keep_large_buffers()
    warning = unused_keys_warning(config)
    if warning is not None:
        log.warning(warning)
    try:
        node = KraftNode(config)
    except (StorageNotFormattedError, DirectoryInUseError, ConfigError) as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    try:
        asyncio.run(run_node(node))
    except StartError as e:
        print(f"kraft server start: {e}", file=sys.stderr)
        return 1
    return 2 if node.failure is not None else 0


def storage_format(config_path: str, cluster_id: str, ignore_formatted: bool, add_scram: list[str], *,
                   standalone: bool = False, initial_controllers: str | None = None,
                   no_initial_controllers: bool = False) -> int:
    """`kafka-storage format`, in Kafka's words: one line per directory formatted. With
    `add_scram`, the credentials go into bootstrap.checkpoint, salted (never the password).
    With `standalone` or `initial_controllers`, a dynamic quorum's first voters go into the
    bootstrap snapshot (cli/initial_controllers.py has the rules). Every check is made
    before anything is written."""
    try:
        flags = QuorumFlags.parse(standalone, initial_controllers, no_initial_controllers)
        check_cluster_id(cluster_id)
        credentials = [parse_add_scram(argument) for argument in add_scram]
        config = read_config(config_path)
        plan = plan_dynamic_quorum(config, flags)

        def write_bootstrap_files() -> None:
            if credentials:
                write_bootstrap(config.metadata_dir, [
                    FeatureLevelRecord(name=METADATA_VERSION, feature_level=BOOTSTRAP_METADATA_VERSION), *credentials])
            if plan is not None:  # the metadata partition's first voters, and each offsets partition's
                now = int(time.time() * 1000)
                write_bootstrap_snapshot(config.metadata_dir, plan.voters(), now)
                write_bootstrap_snapshots(config.metadata_dir, plan.voters(), config.offsets_topic_num_partitions, now)

        with DirectoryLock(config.metadata_dir):
            formatted = format_storage(config.metadata_dir, cluster_id, config.node_id, ignore_formatted=ignore_formatted,
                                       directory_id=plan.directory_id if plan is not None else None,
                                       before_write=write_bootstrap_files)
    except (ConfigError, StorageNotFormattedError, DirectoryInUseError, InvalidClusterIdError,
            ScramArgumentError, InitialControllersError, OSError) as e:
        print(f"kraft storage format: {e}", file=sys.stderr)
        return 1
    if formatted:
        what = plan.description if plan is not None else "metadata directory"
        print(f"Formatting {what} {config.metadata_dir} with metadata.version {BOOTSTRAP_RELEASE}.")
    else:
        print("All of the log directories are already formatted.")
    return 0


def storage_info(config_path: str) -> int:
    """`kafka-storage info`: the node's directories, what their meta.properties hold, and
    every problem found (exit 1 if there is one), laid out as Kafka prints it."""
    try:
        config = read_config(config_path)
    except ConfigError as e:
        print(f"kraft storage info: {e}", file=sys.stderr)
        return 1
    found, problems, metadata = [], [], None
    for directory in [str(config.metadata_dir)]:  # kraft keeps no data beside the metadata log
        path = Path(directory)
        if not path.is_dir():
            problems.append(f"{path} does not exist" if not path.exists() else f"{path} is not a directory")
            continue
        found.append(directory)
        if not (path / "meta.properties").exists():
            problems.append(f"{path} is not formatted.")
            continue
        try:
            entries = read_meta_entries(path)
        except StorageNotFormattedError as e:
            problems.append(f"Error loading {path / 'meta.properties'}: {e}")
            continue
        if metadata is None:
            metadata = entries
        elif metadata.get("cluster.id") != entries.get("cluster.id"):
            problems.append("Mismatched cluster IDs between storage directories.")
        elif metadata.get("node.id") != entries.get("node.id"):
            problems.append("Mismatched node IDs between storage directories.")
    if found:
        print("Found log directory:" if len(found) == 1 else "Found log directories:")
        print("".join(f"  {d}\n" for d in found))
    if metadata is not None:
        print("Found metadata: {" + ", ".join(f"{k}={v}" for k, v in sorted(metadata.items())) + "}\n")
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:")
        print("".join(f"  {p}\n" for p in problems))
        return 1
    return 0


def storage_random_uuid() -> int:
    print(random_cluster_id())
    return 0
