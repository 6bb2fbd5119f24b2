"""One process per data directory: the `.lock`, and who holds it."""

import subprocess
import sys

import pytest

from kraft.storage.dirlock import DirectoryInUseError, DirectoryLock, check_free

HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
{lock}
print("held", flush=True)
sys.stdin.read()
"""


def holder(path, lock: str) -> subprocess.Popen:
    """Another process holding `path` the way `lock` says, until its stdin closes."""
    process = subprocess.Popen([sys.executable, "-c", HOLD.format(lock=lock), str(path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_lock_on_a_directory_is_refused_until_the_first_is_released(tmp_path):
    first = DirectoryLock(tmp_path).acquire()
    with pytest.raises(DirectoryInUseError, match=rf"process \d+ holds {tmp_path}/.lock"):
        DirectoryLock(tmp_path).acquire()  # flock keeps two users in one process apart too
    with pytest.raises(DirectoryInUseError):
        check_free(tmp_path)
    first.release()
    check_free(tmp_path)
    with DirectoryLock(tmp_path) as again:
        assert again.held


@pytest.mark.parametrize("lock", [
    "fcntl.lockf(fd, fcntl.LOCK_EX)",  # what Kafka's FileChannel.tryLock takes on Linux
    "fcntl.flock(fd, fcntl.LOCK_EX)",
])
def test_a_directory_locked_by_another_process_is_refused_naming_it(tmp_path, lock):
    other = holder(tmp_path / ".lock", lock)
    try:
        with pytest.raises(DirectoryInUseError) as refused:
            DirectoryLock(tmp_path).acquire()
        if "lockf" in lock:  # the kernel names a POSIX lock's holder
            assert f"process {other.pid} holds" in str(refused.value)
    finally:
        other.stdin.close()
        other.wait()
    DirectoryLock(tmp_path).acquire().release()  # the kernel let go when the holder exited


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    other = holder(tmp_path / ".lock", "fcntl.flock(fd, fcntl.LOCK_EX); fcntl.lockf(fd, fcntl.LOCK_EX)")
    other.kill()
    other.wait()
    DirectoryLock(tmp_path).acquire().release()
