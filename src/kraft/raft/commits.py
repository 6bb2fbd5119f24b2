"""Handing committed batches to the state machine: in order, each once, whole batches.

The core decides what is committed (the high watermark); this delivers it. Batches are read
back from the log in chunks of at most `max_fetch_bytes` and handed over as CommittedBatch,
control batches included (the listener tells them apart). Loading a snapshot replaces the
state, so delivery resumes at the snapshot's end, whatever had been delivered before.
"""

from kraft.raft.state_machine import CommittedBatch, Listener
from kraft.records import read_batches
from kraft.storage import ReplicatedLog


class CommitDelivery:
    def __init__(self, log: ReplicatedLog, listener: Listener | None, max_fetch_bytes: int) -> None:
        self.log = log
        self.listener = listener
        self.max_fetch_bytes = max_fetch_bytes
        self.applied = log.start_offset  # every offset below this has been delivered

    def restart_at(self, offset: int) -> None:
        """The state is now a snapshot's, ending at `offset`. (A snapshot below what was
        delivered rolls the state back; keeping the larger offset would skip the records
        between them.)"""
        self.applied = offset

    def deliver(self, high_watermark: int | None) -> None:
        """Hands every committed batch not yet delivered to the listener, in order."""
        if high_watermark is None:
            return
        limit = min(high_watermark, self.log.end_offset)
        if self.listener is None:
            self.applied = max(self.applied, limit)
            return
        while self.applied < limit:
            info = self.log.read(self.applied, self.max_fetch_bytes, upper_bound=limit)
            if info.next_offset <= self.applied:
                return
            for batch in read_batches(info.tobytes(), expected_offset=info.first_offset):
                h = batch.header
                if h.next_offset <= self.applied:
                    continue
                self.listener.handle_commit(
                    CommittedBatch(h.base_offset, h.last_offset, h.partition_leader_epoch, h.max_timestamp, h.size,
                                   batch.records(), h.is_control)
                )
            self.applied = info.next_offset
