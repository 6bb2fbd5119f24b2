"""One process per data directory: Kafka's `.lock`, held for the life of the process.

Two processes on one directory both append to the log and rewrite quorum-state; each
believes its own view, and the directory ends up holding batches of epochs that neither
log can explain (seen: a second `kraft cluster up` wrote epoch-3 batches into a running
cluster's logs, which then could not restart). So a process takes the lock before it
reads or writes anything in the directory, and a second one stops at once, naming the
holder.

The lock is taken twice over on one descriptor: `flock`, and an open-file-description
record lock (F_OFD_SETLK), which conflicts with the classic POSIX record lock that Kafka's
`FileChannel.tryLock` takes on Linux, so a Kafka broker and kraft exclude each other too.
Both belong to the descriptor, so they also keep two users in one process apart (two
nodes opened on one directory by mistake), and closing some other descriptor of the file
does not drop them, as it would a classic POSIX lock. The kernel drops both when the
process exits, however it exits, so a crash never leaves a stale lock. The holder's pid
is written into the file for the message a second process prints; Kafka leaves the file
empty and reads nothing from it, and a Kafka holder is named by the kernel (F_GETLK).
"""

import errno
import fcntl
import os
import struct
from pathlib import Path

from kraft.storage.fsutil import PRIVATE_FILE, make_dirs

LOCK_FILE = ".lock"

# struct flock on Linux (x86_64 and aarch64): l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = struct.Struct("@hhqqi4x")


class DirectoryInUseError(Exception):
    """Another process holds the directory's lock."""


def _held(fd: int) -> tuple[bool, int | None]:
    """Whether another descriptor holds a record lock on the file, and the holder's pid if
    known: the kernel names a classic POSIX holder (Kafka); kraft's holders wrote theirs."""
    probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    kind, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))
    if kind == fcntl.F_UNLCK:
        return False, None
    if pid > 0:
        return True, pid
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return True, None
    return True, int(text) if text.isdigit() else None


def _in_use(directory: Path, path: Path, holder: int | None) -> DirectoryInUseError:
    who = f"process {holder}" if holder is not None else "another process"
    return DirectoryInUseError(f"{directory} is in use: {who} holds {path}; stop it first (one process per data directory)")


class DirectoryLock:
    """The lock on `directory`; `acquire()` raises DirectoryInUseError if it is held."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> "DirectoryLock":
        make_dirs(self.directory)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        except OSError as e:
            _, holder = _held(fd)
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise _in_use(self.directory, self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # drops both locks
            self._fd = -1

    def __enter__(self) -> "DirectoryLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def check_free(directory: Path | str) -> None:
    """Raises DirectoryInUseError if a process holds `directory`'s lock. Takes nothing, not
    even for a moment (a node starting meanwhile must not find it taken).

    For a command that is about to write into directories that others may lock (`kraft
    cluster up` and its nodes' data directories): it must refuse before writing.
    """
    directory = Path(directory)
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        held, holder = _held(fd)
    finally:
        os.close(fd)
    if held:
        raise _in_use(directory, path, holder)
