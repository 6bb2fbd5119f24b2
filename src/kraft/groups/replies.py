"""A coordinator's answer: given when the group protocol has one, sent once it is committed.

A JoinGroup is answered when the join phase completes, which other members' requests or a
timeout decide; a SyncGroup from a follower when the leader's assignment arrives. So an
operation returns a `Reply` at once and the coordinator answers it later (`answer`). An
answer is then held until every record the coordinator appended before giving it has
committed, as the metadata controller holds its operations' results (a Reply is its
`Pending` with the answer filled in late): no client is told of a state that a new leader
could still lose. A leadership change fails every reply still open with NOT_COORDINATOR.
"""

from typing import Any

from kraft.controller.pending import Pending
from kraft.protocol import ErrorCode


class CoordinatorError(Exception):
    """The whole request is refused with `error`: NOT_COORDINATOR (this node does not lead
    the group's partition, or stopped leading it before the answer committed),
    COORDINATOR_LOAD_IN_PROGRESS (it leads, and is still applying the earlier epochs'
    records), COORDINATOR_NOT_AVAILABLE (the records did not commit in time)."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class Reply(Pending):
    """Pending without an answer until the coordinator gives one."""

    def __init__(self) -> None:
        super().__init__(-1, -1, None)
        self.answered = False

    def answer(self, response: Any, epoch: int, last_offset: int) -> None:
        """The answer, to be sent once `last_offset` commits in `epoch` (or at once: -1)."""
        if self.answered:
            raise RuntimeError("a reply is answered once")
        self._response = response
        self.epoch = epoch
        self.last_offset = last_offset
        self.answered = True
