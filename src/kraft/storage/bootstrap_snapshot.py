"""The bootstrap snapshot of a dynamic quorum (KIP-853): `00000000000000000000-0000000000.checkpoint`
in `<metadata.log.dir>/__cluster_metadata-0`, written by `kraft storage format --standalone`
or `--initial-controllers`.

A dynamic quorum's voters are not in any configuration: they are the latest VotersRecord in
the log, or in the snapshot the log starts from. A new cluster has neither, so the format
command writes a snapshot at id (0, 0), which holds no state machine records, only the
first voter set. The bytes are laid out as Kafka's Formatter writes them (its
RecordsSnapshotWriter), so that either implementation reads the other's:

    offset 0-2   one control batch: SnapshotHeaderRecord (LastContainedLogTimestamp),
                 KRaftVersionRecord (kraft.version 1), VotersRecord (the voters)
    offset 3     one control batch: SnapshotFooterRecord

Every batch is in epoch 0 (the snapshot's) and has the same timestamp, the time of the
format. The kraft.version feature is in this snapshot only: Kafka writes no FeatureLevelRecord
for it in bootstrap.checkpoint, and neither does kraft.
"""

from collections.abc import Sequence
from pathlib import Path

from kraft.records import (
    KRaftVersionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
)
from kraft.records.control import ControlMessage, build_control_batch
from kraft.storage import fsutil
from kraft.storage.snapshot import SnapshotId, snapshot_file_name

METADATA_PARTITION_DIR = "__cluster_metadata-0"  # the log's directory inside metadata.log.dir
BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)  # Kafka's Snapshots.BOOTSTRAP_SNAPSHOT_ID
KRAFT_VERSION_DYNAMIC = 1  # kraft.version 1: the voters are in the log (KIP-853)


def _control_batch(messages: Sequence[ControlMessage], base_offset: int, timestamp_ms: int) -> bytearray:
    return build_control_batch(*messages, base_offset=base_offset, partition_leader_epoch=BOOTSTRAP_SNAPSHOT_ID.epoch,
                               timestamp=timestamp_ms)


def bootstrap_snapshot_bytes(voters: Sequence[Voter], timestamp_ms: int) -> bytes:
    """The whole file: header, kraft.version and voters in the first batch, footer in the second."""
    first = (SnapshotHeaderRecord(timestamp_ms), KRaftVersionRecord(KRAFT_VERSION_DYNAMIC),
             VotersRecord(tuple(sorted(voters, key=lambda v: v.voter_id))))
    return bytes(_control_batch(first, 0, timestamp_ms) + _control_batch((SnapshotFooterRecord(),), len(first),
                                                                         timestamp_ms))


def bootstrap_snapshot_path(log_dir: Path, partition_dir: str = METADATA_PARTITION_DIR) -> Path:
    return Path(log_dir) / partition_dir / snapshot_file_name(BOOTSTRAP_SNAPSHOT_ID)


def write_bootstrap_snapshot(log_dir: Path, voters: Sequence[Voter], timestamp_ms: int,
                             partition_dir: str = METADATA_PARTITION_DIR) -> Path:
    """Writes the snapshot whole: fsynced under a temporary name, then renamed, so a crash
    leaves no partial `.checkpoint` (a few hundred bytes: no `.part` to resume).
    `partition_dir`: the metadata partition's, or another dynamic Raft log's beside it (each
    `__consumer_offsets` partition starts from the same first voters)."""
    path = bootstrap_snapshot_path(log_dir, partition_dir)
    if not path.parent.is_dir():
        fsutil.make_dirs(path.parent)
        fsutil.fsync_dir(path.parent.parent)
    fsutil.atomic_write(path, bootstrap_snapshot_bytes(voters, timestamp_ms))
    return path
