"""Durable file operations: the only ways this package makes something survive a crash.

Every operation that writes, syncs, renames or removes goes through here, and a failure
comes out as `DiskError`: an OSError that names the operation and the file. Callers do not
retry it. After a failed fsync the kernel may already have dropped the dirty pages it could
not write (PostgreSQL's "fsyncgate"), and a second fsync then succeeds with the data gone;
so the only safe answer to a failed write, sync or rename is to stop acknowledging, which
the node does by stopping (kraft.server.runtime.node).
"""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The most one write() call hands the kernel. Writes of 2 MiB and more let the page cache
# allocate large folios; on a VM that gives freed memory back to its host (free page
# reporting), those come from memory the host must fault in again, and a 200 MB download
# written in 10 MiB calls ran at 330 MB/s where 1 MiB calls ran at 4 GB/s (bench/
# cluster_bench.py, kernel 6.18). Smaller calls cost nothing measurable elsewhere.
WRITE_PIECE = 1 << 20
# What this package creates is the node's user's alone: the metadata log, its snapshots and
# the bootstrap checkpoint hold every SCRAM salt and key, from which passwords can be guessed
# offline. Files 0600, directories 0700 (less, if the umask says so), as they are created;
# what already exists keeps its mode (the node warns at start about directories open wider).
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def make_dirs(path: Path) -> None:
    """`path` and its missing parents, each made PRIVATE_DIR (Path.mkdir gives parents the
    default mode); what exists is left as it is."""
    missing = []
    for directory in (path, *path.parents):
        if directory.is_dir():
            break
        missing.append(directory)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            if not directory.is_dir():
                raise


def open_to_others(paths: Iterator[Path] | list[Path]) -> list[tuple[Path, int]]:
    """(path, mode) of the existing directories among `paths` that others than their owner
    may enter or read (any group or other permission)."""
    found = []
    for path in paths:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            continue
        if mode & 0o077:
            found.append((path, mode))
    return found


class DiskError(OSError):
    """A write, sync, truncation, rename or removal failed: the data's durability is unknown."""

    def __init__(self, operation: str, path: Path | str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.operation = operation

    def __str__(self) -> str:
        return f"{self.operation} failed on {self.filename}: [Errno {self.errno}] {self.strerror}"


@contextmanager
def disk(operation: str, path: Path | str) -> Iterator[None]:
    """Turns an OSError from the block into a DiskError naming `operation` and `path`."""
    try:
        yield
    except DiskError:
        raise
    except OSError as e:
        raise DiskError(operation, path, e) from e


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int, path: Path | str) -> None:
    """Writes all of `data` at `offset`, in pieces of at most WRITE_PIECE bytes."""
    with disk("write", path):
        written = os.pwrite(fd, data, offset) if len(data) <= WRITE_PIECE else 0
        if written == len(data):
            return
        view = memoryview(data)
        while written < len(view):
            n = os.pwrite(fd, view[written : written + WRITE_PIECE], offset + written)
            if n == 0:
                raise OSError(0, f"short write: {written} of {len(view)} bytes")
            written += n


def fsync(fd: int, path: Path | str) -> None:
    with disk("fsync", path):
        os.fsync(fd)


def fdatasync(fd: int, path: Path | str) -> None:
    with disk("fdatasync", path):
        os.fdatasync(fd)


def ftruncate(fd: int, size: int, path: Path | str) -> None:
    with disk("truncate", path):
        os.ftruncate(fd, size)


def rename(source: Path, target: Path) -> None:
    with disk("rename", f"{source} -> {target}"):
        os.rename(source, target)


def unlink(path: Path, missing_ok: bool = False) -> None:
    with disk("unlink", path):
        path.unlink(missing_ok=missing_ok)


def fsync_dir(directory: Path) -> None:
    """Makes creations, renames and deletions in `directory` durable."""
    with disk("fsync", directory):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replaces `path` with `data` so that after a crash it holds the old or the new bytes, never a mix.

    Write a temporary file, fsync it, rename it over the target, fsync the directory. The
    temporary name is unique to the writer, so two writers of one file cannot trip over
    each other's temporary file (the last rename wins, whole).
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    with disk("write", tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    try:
        pwrite_all(fd, data, 0, tmp)
        fsync(fd, tmp)
    finally:
        os.close(fd)
    with disk("rename", f"{tmp} -> {path}"):
        os.replace(tmp, path)
    fsync_dir(path.parent)
