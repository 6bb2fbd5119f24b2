"""Operator tools for the two ways a quorum loses committed records on purpose.

In a healthy Raft quorum a committed record is never lost. Two operations give it up, and
KIP-320 is what lets every consumer notice:

* `kraft restore --snapshot FILE --config node.properties [--epoch E]`: restart the
  cluster from a backup (a snapshot, say one the time-based trigger took). The node's log
  is emptied and restarts at the snapshot's end offset, and its quorum-state moves to a
  new epoch, above every epoch the old cluster used, so consumers see a newer leader epoch,
  ask OffsetForLeaderEpoch, and learn the log after the snapshot is gone.
* `kraft recover --from SURVIVOR_LOG_DIR --config node.properties`: after a majority of
  voters lost their disks, every node takes the surviving replica's log (which may miss
  records that were committed), again in a new epoch.

Both run on stopped nodes, on every node of the cluster, with the same --epoch.
"""

import shutil
import sys
from pathlib import Path

from kraft.server.config import ConfigError, read_config
from kraft.server.node import PARTITION_DIR, read_meta_properties
from kraft.storage import (
    ElectionState,
    FileLog,
    FileQuorumStateStore,
    FileSnapshotStore,
    SnapshotError,
    SnapshotReader,
    StorageError,
)
from kraft.storage.snapshot import parse_snapshot_file_name

LOG_DIR_CHECKPOINTS = ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint")


def _epochs_seen(partition: Path) -> int:
    """The highest epoch this node's quorum-state, log and snapshots know (0 if none)."""
    seen = 0
    state = FileQuorumStateStore(partition).read()
    if state is not None:
        seen = state.epoch
    if partition.exists():
        log = FileLog(partition)
        seen = max(seen, log.latest_epoch or 0)
        log.close()
        latest = FileSnapshotStore(partition).latest()
        if latest is not None:
            seen = max(seen, latest.epoch)
    return seen


def _new_epoch(partitions: list[Path], floor: int, requested: int | None) -> int:
    seen = max([floor] + [_epochs_seen(p) for p in partitions])
    if requested is None:
        return seen + 1
    if requested <= seen:
        raise ValueError(f"--epoch {requested} is not above epoch {seen}, which this node has already seen")
    return requested


def restore(config_path: str, snapshot_path: str, epoch: int | None) -> int:
    try:
        config = read_config(config_path)
        read_meta_properties(config.log_dir)
        source = Path(snapshot_path)
        sid = parse_snapshot_file_name(source.name)
        SnapshotReader.open(source, sid).validate()
        partition = config.log_dir / PARTITION_DIR
        new_epoch = _new_epoch([partition], sid.epoch, epoch)
        log = FileLog(partition)
        log.truncate_fully_and_start_at(sid.end_offset)
        log.close()
        store = FileSnapshotStore(partition)
        for old in store.list():
            store.delete(old)
        writer = store.create_raw_writer(sid)
        writer.append(0, source.read_bytes())
        writer.validate(source.stat().st_size)
        writer.freeze()
        FileQuorumStateStore(partition).write(ElectionState(new_epoch, None, None, tuple(sorted(config.voters))))
    except (ConfigError, SnapshotError, StorageError, ValueError, OSError) as e:
        print(f"kraft restore: {e}", file=sys.stderr)
        return 1
    print(f"node {config.node_id}: log restarts at offset {sid.end_offset} from snapshot {source.name}; "
          f"epoch {new_epoch}. Records after offset {sid.end_offset - 1} are gone; consumers past it will "
          f"detect the truncation.")
    return 0


def recover(config_path: str, survivor_log_dir: str, epoch: int | None) -> int:
    try:
        config = read_config(config_path)
        read_meta_properties(config.log_dir)
        survivor = Path(survivor_log_dir)
        source = survivor / PARTITION_DIR
        if not source.is_dir():
            raise ValueError(f"{survivor} holds no {PARTITION_DIR}: give the survivor's metadata.log.dir")
        partition = config.log_dir / PARTITION_DIR
        new_epoch = _new_epoch([source, partition], 0, epoch)
        if source.resolve() != partition.resolve():
            shutil.rmtree(partition, ignore_errors=True)
            shutil.copytree(source, partition)
            for name in LOG_DIR_CHECKPOINTS:
                if (survivor / name).exists():
                    shutil.copy2(survivor / name, config.log_dir / name)
        FileQuorumStateStore(partition).write(ElectionState(new_epoch, None, None, tuple(sorted(config.voters))))
        log = FileLog(partition)  # recovery checks what was copied
        end = log.end_offset
        log.close()
    except (ConfigError, StorageError, ValueError, OSError) as e:
        print(f"kraft recover: {e}", file=sys.stderr)
        return 1
    print(f"node {config.node_id}: took the surviving replica's log (ends at {end}); epoch {new_epoch}. "
          f"Committed records it lacks are gone; consumers past them will detect the truncation.")
    return 0
