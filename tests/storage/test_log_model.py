"""FileLog and MemoryLog driven by the same random operations must never disagree.

A hypothesis state machine: appends (leader and follower), reads, truncations, start
offset moves, full truncations, flushes and restarts, with the two logs compared after
every step. The contract tests pin the semantics; this finds the corners they miss.
"""

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kraft.records import SimpleRecord, build_batch
from kraft.storage import FileLog, MemoryLog, OffsetAndEpoch, SnapshotId, snapshot_file_name


class LogsAgree(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.path = self.tmp / "__cluster_metadata-0"
        self.file = FileLog(self.path, segment_bytes=700, index_interval_bytes=100)
        self.memory = MemoryLog()
        self.epoch = 0

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.tmp)

    def snapshot_at(self, offset: int) -> None:
        """KIP-630 moves a log's start only to a snapshot's end, and opening a FileLog checks
        that a snapshot is there (by its file name) before it believes the start."""
        (self.path / snapshot_file_name(SnapshotId(offset, 0))).touch()

    @rule(n=st.integers(1, 6), size=st.integers(0, 120), bump=st.booleans())
    def append_as_leader(self, n, size, bump):
        self.epoch += bump
        data = build_batch([SimpleRecord(None, b"x" * size)] * n, timestamp=1)
        assert self.file.append_as_leader(data, self.epoch) == self.memory.append_as_leader(data, self.epoch)

    @rule(n=st.integers(1, 6), bump=st.integers(0, 2))
    def append_as_follower(self, n, bump):
        self.epoch += bump
        data = build_batch([SimpleRecord(b"k", b"y")] * n, base_offset=self.file.end_offset,
                           partition_leader_epoch=self.epoch, timestamp=1)
        assert self.file.append_as_follower(data) == self.memory.append_as_follower(data)

    @rule(back=st.integers(0, 30))
    def truncate(self, back):
        target = max(self.file.start_offset, self.file.end_offset - back)
        assert self.file.truncate_to(target) == self.memory.truncate_to(target)

    @rule(epoch=st.integers(0, 10), offset_back=st.integers(0, 20))
    def truncate_to_diverging(self, epoch, offset_back):
        diverging = OffsetAndEpoch(max(0, self.file.end_offset - offset_back), epoch)
        assert self.file.truncate_to_end_offset(diverging) == self.memory.truncate_to_end_offset(diverging)

    @rule(forward=st.integers(0, 40))
    def advance_start(self, forward):
        target = min(self.file.end_offset, self.file.start_offset + forward)
        if target < self.file.end_offset:
            target = self.file.read(target, 1).first_offset  # round down to a batch boundary
        self.snapshot_at(target)
        self.file.advance_start_offset(target)
        self.memory.advance_start_offset(target)

    @rule(ahead=st.integers(0, 50))
    def truncate_fully(self, ahead):
        self.snapshot_at(self.file.end_offset + ahead)
        self.file.truncate_fully_and_start_at(self.file.end_offset + ahead)
        self.memory.truncate_fully_and_start_at(self.memory.end_offset + ahead)

    @rule()
    def flush(self):
        assert self.file.flush() == self.memory.flush()

    @rule()
    def restart(self):
        self.file.flush()
        self.memory.flush()
        self.file.close()
        self.file = FileLog(self.path, segment_bytes=700, index_interval_bytes=100)
        self.memory.simulate_crash()

    @precondition(lambda self: self.file.end_offset > self.file.start_offset)
    @rule(data=st.data())
    def read(self, data):
        start = data.draw(st.integers(self.file.start_offset, self.file.end_offset))
        max_bytes = data.draw(st.integers(1, 2000))
        bound = data.draw(st.none() | st.integers(start, self.file.end_offset + 2))
        f, m = self.file.read(start, max_bytes, bound), self.memory.read(start, max_bytes, bound)
        # Both return whole batches from the same one, but FileLog stops at a segment's end,
        # so one answer is a prefix of the other; and neither is empty unless both are.
        fb, mb = f.tobytes(), m.tobytes()
        assert f.first_offset == m.first_offset
        assert fb.startswith(mb) or mb.startswith(fb)
        assert bool(fb) == bool(mb)
        assert max(len(fb), len(mb)) <= max_bytes or min(f.next_offset, m.next_offset) == self._next_batch_end(start)

    def _next_batch_end(self, offset):
        return self.memory.read(offset, 1).next_offset

    def _read_all(self, log):
        out, offset = b"", log.start_offset
        while offset < log.end_offset:
            info = log.read(offset, 1 << 30)
            out += info.tobytes()
            offset = info.next_offset
        return out

    @invariant()
    def same_state(self):
        assert self.file.start_offset == self.memory.start_offset
        assert self.file.end_offset == self.memory.end_offset
        assert self.file.last_flushed_offset == self.memory.last_flushed_offset
        assert self.file.epoch_entries() == self.memory.epoch_entries()
        for e in range(self.epoch + 2):
            assert self.file.end_offset_for_epoch(e) == self.memory.end_offset_for_epoch(e)
        assert self._read_all(self.file) == self._read_all(self.memory)


TestLogsAgree = LogsAgree.TestCase
TestLogsAgree.settings = settings(max_examples=int(os.environ.get("KRAFT_MODEL_EXAMPLES", "60")), stateful_step_count=40, deadline=None)
