"""Durable file operations: the only ways this package makes something survive a crash."""

import os
import threading
from pathlib import Path


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
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
