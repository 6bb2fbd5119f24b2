"""Operator tools for the two ways a quorum loses committed records on purpose.

In a healthy Raft quorum a committed record is never lost. Two operations give it up, and
KIP-320 is what lets every consumer notice:

* `kraft restore --snapshot FILE --config node.properties --epoch E`: restart the cluster
  from a backup (a snapshot, say one the time-based trigger took). The node's log is
  emptied and restarts at the snapshot's end offset, and its quorum-state moves to epoch
  E, so consumers see a newer leader epoch, ask OffsetForLeaderEpoch, and learn the log
  after the snapshot is gone.
* `kraft recover --from SURVIVOR_LOG_DIR --config node.properties --epoch E`: after a
  majority of voters lost their disks, every node (reformatted with `kraft storage format`
  if its disk is new) takes the surviving replica's log, which may miss records that were
  committed or hold records the others replaced, again in epoch E.

Both run on stopped nodes, on every node of the cluster, one node per run.

The new epoch must be the same on every node and above every epoch a client may have
seen: a client keeps the newest leader epoch it met and takes an older one for stale
metadata, so a restored cluster in an older epoch would never serve it again. Every epoch
a client saw was elected by a majority of voters, each of which stored it in its
quorum-state; so only the voters' disks together bound it, and one run sees one disk.
Hence --epoch is required, except for a cluster whose only voter is this node and whose
disk still holds its quorum-state: there, one past the highest epoch on the disk is safe.
A given --epoch is checked against every epoch this run can see (this node's disk, the
snapshot, the survivor); on a fresh disk that is all the check can do, and it says so.
"""

import shutil
import sys
from pathlib import Path

from kraft.server.runtime.node import PARTITION_DIR
from kraft.server.settings.server_config import ConfigError, ServerConfig, read_config
from kraft.storage import (
    ElectionState,
    FileLog,
    FileQuorumStateStore,
    FileSnapshotStore,
    SnapshotError,
    SnapshotReader,
    StorageError,
)
from kraft.storage.dirlock import DirectoryInUseError, DirectoryLock, check_free
from kraft.storage.meta_properties import StorageNotFormattedError, read_meta_properties
from kraft.storage.snapshot import parse_snapshot_file_name

LOG_DIR_CHECKPOINTS = ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint")
MAX_EPOCH = 2**31 - 1  # epochs are int32 on the wire


def _epochs_seen(partition: Path, restarting_in: int | None) -> tuple[int, bool]:
    """The highest epoch this partition directory's quorum-state, log and snapshots know
    (0 if none), and whether it holds a quorum-state (a disk that took part in elections).
    A quorum-state as this tool writes it for `restarting_in` (that epoch, no leader, no
    vote) is not counted: the node, maybe the survivor others copy, was already moved
    there by this same operation, and running it again must not fail."""
    seen = 0
    state = FileQuorumStateStore(partition).read()
    if state is not None and (state.epoch, state.leader_id, state.voted_id) != (restarting_in, None, None):
        seen = state.epoch
    if partition.exists():
        log = FileLog(partition)
        seen = max(seen, log.latest_epoch or 0)
        log.close()
        latest = FileSnapshotStore(partition).latest()
        if latest is not None:
            seen = max(seen, latest.epoch)
    return seen, state is not None


def _new_epoch(command: str, config: ServerConfig, sources: list[Path], floor: int, requested: int | None) -> int:
    """The epoch to restart in (see the module docstring), or ValueError saying why not."""
    here, voted = _epochs_seen(config.metadata_dir / PARTITION_DIR, requested)
    seen = max([floor, here] + [_epochs_seen(source, requested)[0] for source in sources])
    if requested is None:
        if voted and set(config.voters) == {config.node_id}:
            return seen + 1
        disk = (f"this node's disk has seen epoch {here}" if voted
                else "this node's disk holds no quorum-state (a new or wiped disk)")
        raise ValueError(
            f"--epoch is required: every node of the cluster must restart in the same new epoch, above every "
            f"epoch a client may have seen, and one node cannot tell which that is (the cluster has "
            f"{len(config.voters)} voters; {disk}; the highest epoch this run can see is {seen}). Give every "
            f"node the same --epoch, above the highest leader epoch the cluster reached (the largest leaderEpoch "
            f"in the voters' quorum-state files, or what `kraft metadata-quorum describe --status` last showed)")
    if not seen < requested <= MAX_EPOCH:
        raise ValueError(f"--epoch {requested} is not above epoch {seen}, which this node has already seen"
                         if requested <= seen else f"--epoch {requested} is above the largest epoch, {MAX_EPOCH}")
    if not voted:
        print(f"kraft {command}: note: node {config.node_id}'s disk holds no quorum-state, so --epoch {requested} "
              f"was checked against epoch {seen} only; it must be above every epoch the lost disks had seen",
              file=sys.stderr)
    return requested


def restore(config_path: str, snapshot_path: str, epoch: int | None) -> int:
    try:
        config = read_config(config_path)
        with DirectoryLock(config.metadata_dir):
            read_meta_properties(config.metadata_dir)
            source = Path(snapshot_path)
            sid = parse_snapshot_file_name(source.name)
            SnapshotReader.open(source, sid).validate()
            partition = config.metadata_dir / PARTITION_DIR
            new_epoch = _new_epoch("restore", config, [], sid.epoch, epoch)
            # The snapshot first, then the log start that names it: interrupted in between,
            # the node's log still starts where a snapshot of its own says it may.
            store = FileSnapshotStore(partition)
            if sid in store.list():
                store.delete(sid)
            writer = store.create_raw_writer(sid)
            writer.append(0, source.read_bytes())
            writer.validate(source.stat().st_size)
            writer.freeze()
            log = FileLog(partition)
            log.truncate_fully_and_start_at(sid.end_offset, sid.epoch)
            log.close()
            for old in store.list():
                if old != sid:
                    store.delete(old)
            FileQuorumStateStore(partition).write(ElectionState(new_epoch, None, None, tuple(sorted(config.voters))))
    except (ConfigError, SnapshotError, StorageError, ValueError, OSError, DirectoryInUseError,
            StorageNotFormattedError) as e:
        print(f"kraft restore: {e}", file=sys.stderr)
        return 1
    print(f"node {config.node_id}: log restarts at offset {sid.end_offset} from snapshot {source.name}; "
          f"epoch {new_epoch}. Records after offset {sid.end_offset - 1} are gone; consumers past it will "
          f"detect the truncation.")
    return 0


def recover(config_path: str, survivor_log_dir: str, epoch: int | None) -> int:
    try:
        config = read_config(config_path)
        with DirectoryLock(config.metadata_dir):
            read_meta_properties(config.metadata_dir)
            survivor = Path(survivor_log_dir)
            source = survivor / PARTITION_DIR
            if not source.is_dir():
                raise ValueError(f"{survivor} holds no {PARTITION_DIR}: give the survivor's metadata.log.dir")
            partition = config.metadata_dir / PARTITION_DIR
            new_epoch = _new_epoch("recover", config, [source], 0, epoch)
            if source.resolve() != partition.resolve():
                check_free(survivor)  # a running survivor's files change while they are copied
                shutil.rmtree(partition, ignore_errors=True)
                shutil.copytree(source, partition)
                for name in LOG_DIR_CHECKPOINTS:
                    if (survivor / name).exists():
                        shutil.copy2(survivor / name, config.metadata_dir / name)
            FileQuorumStateStore(partition).write(ElectionState(new_epoch, None, None, tuple(sorted(config.voters))))
            log = FileLog(partition)  # recovery checks what was copied
            end = log.end_offset
            log.close()
    except (ConfigError, StorageError, ValueError, OSError, DirectoryInUseError, StorageNotFormattedError) as e:
        print(f"kraft recover: {e}", file=sys.stderr)
        return 1
    print(f"node {config.node_id}: took the surviving replica's log (ends at {end}); epoch {new_epoch}. "
          f"Committed records it lacks are gone; consumers past them will detect the truncation.")
    return 0
