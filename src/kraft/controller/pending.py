"""An operation's answer that exists once its records are committed."""

from collections.abc import Callable
from typing import Any


class NotControllerError(Exception):
    """Kafka's NOT_CONTROLLER: this node does not lead the quorum (now, or any more). Retriable."""

    def __init__(self, leader_id: int | None, epoch: int, detail: str = "") -> None:
        who = f"node {leader_id}" if leader_id is not None else "not known"
        super().__init__(f"not the active controller (epoch {epoch}; the leader is {who}){detail}")
        self.leader_id = leader_id
        self.epoch = epoch


class Pending:
    """The answer to one controller operation: resolved when the batch holding its records
    commits in the epoch it was appended in; failed if the leadership changes first."""

    def __init__(self, epoch: int, last_offset: int, response: Any) -> None:
        self.epoch = epoch
        self.last_offset = last_offset
        self._response = response
        self.done = False
        self.error: Exception | None = None
        self._callbacks: list[Callable[[Pending], None]] = []

    @classmethod
    def resolved(cls, response: Any) -> "Pending":
        pending = cls(-1, -1, response)
        pending.done = True
        return pending

    def result(self) -> Any:
        if not self.done:
            raise RuntimeError("the operation is not committed yet")
        if self.error is not None:
            raise self.error
        return self._response

    def add_done_callback(self, callback: Callable[["Pending"], None]) -> None:
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def _finish(self, error: Exception | None) -> None:
        self.done = True
        self.error = error
        for callback in self._callbacks:
            callback(self)
        self._callbacks.clear()

    def commit(self) -> None:
        self._finish(None)

    def fail(self, error: Exception) -> None:
        self._finish(error)
