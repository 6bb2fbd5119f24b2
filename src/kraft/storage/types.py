"""Values the log hands out: offsets with epochs, append results, and read results."""

import os
import socket
import weakref
from dataclasses import dataclass
from functools import total_ordering
from typing import NamedTuple


@total_ordering
@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """An end offset (exclusive) and the epoch of the record before it; ordered by epoch, then offset.

    That order is Raft's "more up to date" order: a later epoch wins, then a longer log.
    """

    offset: int
    epoch: int

    def __lt__(self, other: "OffsetAndEpoch") -> bool:
        return (self.epoch, self.offset) < (other.epoch, other.offset)


class LogAppendInfo(NamedTuple):
    """What an append got: its offsets and epoch. A named tuple, as it is made per append."""

    first_offset: int
    last_offset: int
    epoch: int
    control: bool = False  # a control batch among them (the Raft layer reads those: KIP-853)


class SharedFd:
    """An open file descriptor that closes when nothing refers to it any more.

    A read result may still be on its way to a socket when its segment is deleted or the
    log closed; POSIX keeps an unlinked file readable through an open descriptor, so the
    descriptor lives as long as the last region that needs it.
    """

    __slots__ = ("fd", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        weakref.finalize(self, os.close, fd)


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes of a segment file, ready for os.sendfile without passing through Python."""

    file: SharedFd
    position: int
    length: int

    def __len__(self) -> int:
        return self.length

    def fileno(self) -> int:
        return self.file.fd

    def read(self) -> bytes:
        data = os.pread(self.file.fd, self.length, self.position)
        if len(data) != self.length:
            raise EOFError(f"file region shrank: wanted {self.length} bytes at {self.position}, got {len(data)}")
        return data

    def sendfile(self, sock: socket.socket) -> None:
        """Sends the region on a blocking socket; raises EOFError if the file was truncated meanwhile."""
        offset, end = self.position, self.position + self.length
        while offset < end:
            sent = os.sendfile(sock.fileno(), self.file.fd, offset, end - offset)
            if sent == 0:
                raise EOFError(f"file region shrank below {end} while sending")
            offset += sent


@dataclass(frozen=True, slots=True)
class LogReadInfo:
    """Whole batches from `first_offset` (the base of the first batch) up to `next_offset`."""

    data: memoryview | bytes | FileRegion
    first_offset: int
    next_offset: int

    @property
    def size(self) -> int:
        return len(self.data)

    def tobytes(self) -> bytes:
        return self.data.read() if isinstance(self.data, FileRegion) else bytes(self.data)
