"""The quorum-state file: the epoch, the vote and the leader a replica knows, fsynced.

Raft's safety needs these to survive a crash before a vote is granted or an epoch entered:
a replica that forgot its vote could vote twice in one epoch. Kafka's JSON format
(QuorumStateData v0), written atomically: temp file, fsync, rename, directory fsync.

A second line carries the CRC32C of the first (`{"crc32c":N}`): a flipped digit in the
epoch or the vote would otherwise be believed, and a replica that misremembers its vote is
exactly the one that votes twice. Kafka reads only the first line, so it still reads the
file; a file written by Kafka has no second line and is read as it is.
"""

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import crc32c

from kraft.storage.fsutil import atomic_write
from kraft.storage.storage_errors import CorruptCheckpointError

QUORUM_STATE = "quorum-state"
NO_ID = -1


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None
    voters: tuple[int, ...] = ()


class QuorumStateStore(ABC):
    @abstractmethod
    def read(self) -> ElectionState | None:
        """The last state written, or None for a replica that never wrote one."""

    @abstractmethod
    def write(self, state: ElectionState) -> None:
        """Durable on return."""


class FileQuorumStateStore(QuorumStateStore):
    def __init__(self, directory: Path | str) -> None:
        self.path = Path(directory) / QUORUM_STATE

    def read(self) -> ElectionState | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        text = raw.decode(errors="replace")
        first, _, rest = raw.partition(b"\n")
        self._check_sum(first, rest)
        try:
            data = json.loads(first)
            return ElectionState(
                epoch=int(data["leaderEpoch"]),
                leader_id=None if data["leaderId"] == NO_ID else int(data["leaderId"]),
                voted_id=None if data["votedId"] == NO_ID else int(data["votedId"]),
                voters=tuple(int(v["voterId"]) for v in data.get("currentVoters") or ()),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptCheckpointError(f"{self.path}: not a quorum-state file ({e}): {text[:200]!r}") from None

    def write(self, state: ElectionState) -> None:
        data = {
            "clusterId": "",
            "leaderId": NO_ID if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": NO_ID if state.voted_id is None else state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in state.voters],
            "data_version": 0,
        }
        first = json.dumps(data, separators=(",", ":")).encode()
        atomic_write(self.path, first + b"\n" + json.dumps({"crc32c": crc32c.crc32c(first)}).encode() + b"\n")

    def _check_sum(self, first: bytes, rest: bytes) -> None:
        if not rest.strip():
            return  # written by Kafka
        try:
            expected = json.loads(rest)["crc32c"]
        except (ValueError, KeyError, TypeError):
            expected = None
        if expected != crc32c.crc32c(first):
            raise CorruptCheckpointError(
                f"{self.path}: checksum mismatch: the file is damaged, so this node cannot know the epoch "
                "and vote it stored, and starting could make it vote twice in one epoch. Restore the file "
                "from a backup, or remove it once the rest of the quorum has elected a leader in a newer "
                "epoch than this node can have seen"
            )


class MemoryQuorumStateStore(QuorumStateStore):
    """For the simulator: every write is durable, as FileQuorumStateStore's are on return."""

    def __init__(self) -> None:
        self._state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self._state

    def write(self, state: ElectionState) -> None:
        self._state = state
        self.writes += 1
