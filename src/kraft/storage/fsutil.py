"""Durable file operations: the only ways this package makes something survive a crash."""

import os
import threading
from pathlib import Path


# The most one write() call hands the kernel. Writes of 2 MiB and more let the page cache
# allocate large folios; on a VM that gives freed memory back to its host (free page
# reporting), those come from memory the host must fault in again, and a 200 MB download
# written in 10 MiB calls ran at 330 MB/s where 1 MiB calls ran at 4 GB/s (bench/
# cluster_bench.py, kernel 6.18). Smaller calls cost nothing measurable elsewhere.
WRITE_PIECE = 1 << 20


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Writes all of `data` at `offset`, in pieces of at most WRITE_PIECE bytes."""
    written = os.pwrite(fd, data, offset) if len(data) <= WRITE_PIECE else 0
    if written == len(data):
        return
    view = memoryview(data)
    while written < len(view):
        written += os.pwrite(fd, view[written : written + WRITE_PIECE], offset + written)


def fsync_dir(directory: Path) -> None:
    """Makes creations, renames and deletions in `directory` durable."""
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
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
