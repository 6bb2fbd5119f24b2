"""RawSnapshotWriter writing behind the fetch: a chunk goes to the part on a background
thread while the caller goes on; failures, validation and abort still see every chunk."""

import threading

import pytest

from kraft.storage import SnapshotError, SnapshotId
from kraft.storage.snapshot import RawSnapshotWriter, SnapshotPart


class GatedPart(SnapshotPart):
    """A part whose writes wait for the test to open a gate, and can be made to fail."""

    def __init__(self) -> None:
        super().__init__(SnapshotId(10, 1), "gated")
        self.data = bytearray()
        self.gate = threading.Event()
        self.fail_next = False
        self.discarded = False
        self.threads: set[str] = set()

    def _write(self, view: memoryview) -> None:
        self.threads.add(threading.current_thread().name)
        assert self.gate.wait(10)
        if self.fail_next:
            self.fail_next = False
            raise OSError(28, "No space left on device")
        self.data += view

    def contents(self) -> bytes:
        return bytes(self.data)

    def publish(self) -> None:
        pass

    def discard(self) -> None:
        self.discarded = True


def test_append_returns_before_the_chunk_is_written_and_the_next_append_waits_for_it():
    part = GatedPart()
    writer = RawSnapshotWriter(part, write_behind=True)
    writer.append(0, b"a" * 100)  # the gate is closed: this returns with the write pending
    assert writer.size == 100 and part.size == 0
    second = threading.Thread(target=writer.append, args=(100, b"b" * 50))
    second.start()
    second.join(0.2)
    assert second.is_alive(), "one chunk at most is behind"
    part.gate.set()
    second.join(10)
    writer._wait_for_write()
    assert part.data == b"a" * 100 + b"b" * 50
    assert part.threads and threading.current_thread().name not in part.threads


def test_a_failed_write_is_raised_by_the_next_call_and_its_chunk_can_be_sent_again():
    part = GatedPart()
    part.gate.set()
    part.fail_next = True
    writer = RawSnapshotWriter(part, write_behind=True)
    writer.append(0, b"a" * 100)
    with pytest.raises(OSError, match="No space left"):
        writer.append(100, b"b" * 10)
    assert writer.size == 0, "the failed chunk is not received"
    writer.append(0, b"a" * 100)
    writer.append(100, b"b" * 10)
    writer._wait_for_write()
    assert part.data == b"a" * 100 + b"b" * 10


def test_validate_waits_for_the_pending_chunk():
    part = GatedPart()
    writer = RawSnapshotWriter(part, write_behind=True)
    writer.append(0, b"x" * 64)
    threading.Timer(0.1, part.gate.set).start()
    with pytest.raises(SnapshotError, match="64 bytes received, but the leader announced 65"):
        writer.validate(65)  # the size it checks is the size written, all 64 bytes of it


def test_abort_waits_for_the_pending_chunk_and_discards_even_if_it_failed():
    part = GatedPart()
    part.fail_next = True
    writer = RawSnapshotWriter(part, write_behind=True)
    writer.append(0, b"x" * 64)
    threading.Timer(0.1, part.gate.set).start()
    writer.abort()
    assert part.discarded and writer._behind is None
    with pytest.raises(SnapshotError, match="aborted"):
        writer.append(0, b"x")
