"""`bootstrap.checkpoint`: records `kraft storage format` leaves for a new log, as Kafka's
kafka-storage does (`--add-scram`, KIP-900).

The file is Kafka's: `<metadata.log.dir>/bootstrap.checkpoint`, in the snapshot format
(header, one data batch, footer), with the bootstrap metadata.version first. The active
controller of a log that holds no metadata.version yet appends it with its own bootstrap
records, so the first users' SCRAM credentials are in the log from its first batch on, and
a client can log in as soon as a leader is elected. It holds salted keys only, like the
log: the password given to `--add-scram` is salted and forgotten by the format command.
"""

from collections.abc import Sequence
from pathlib import Path

from kraft.metadata import MetadataRecord, decode_records, encode_record
from kraft.storage import SnapshotReader
from kraft.storage.fsutil import atomic_write
from kraft.storage.snapshot import SnapshotId, SnapshotPart, SnapshotWriter

BOOTSTRAP_FILE = "bootstrap.checkpoint"
_ID = SnapshotId(0, 0)


class _Bytes(SnapshotPart):
    """A snapshot built in memory, then written whole (the file is a few hundred bytes)."""

    def __init__(self, path: Path) -> None:
        super().__init__(_ID, str(path))
        self.path = path
        self.data = bytearray()

    def _write(self, view: memoryview) -> None:
        self.data += view

    def contents(self) -> bytes:
        return bytes(self.data)

    def publish(self) -> None:
        atomic_write(self.path, bytes(self.data))

    def discard(self) -> None:
        self.data.clear()


def write_bootstrap(log_dir: Path, records: Sequence[MetadataRecord]) -> Path:
    path = Path(log_dir) / BOOTSTRAP_FILE
    with SnapshotWriter(_Bytes(path), 0) as writer:
        writer.append([(None, encode_record(r)) for r in records])
        writer.freeze()
    return path


def read_bootstrap(log_dir: Path) -> tuple[MetadataRecord, ...]:
    """The records of `log_dir`'s bootstrap.checkpoint; none without one. CorruptSnapshotError
    (naming the file) if it does not read."""
    path = Path(log_dir) / BOOTSTRAP_FILE
    if not path.exists():
        return ()
    reader = SnapshotReader.open(path, _ID)
    return tuple(decode_records(reader.records()))
