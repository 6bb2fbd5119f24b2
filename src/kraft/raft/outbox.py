"""What the core sends, and what it waits for.

Requests go one at a time to each destination: a new one waits until the last is answered,
fails, or passes its deadline (the request timeout, plus a Fetch's own MaxWait). A failed
or refused request is retried after the retry backoff. Entering a new role forgets every
request in flight: their answers, if any come, are stale and ignored.
"""

from dataclasses import dataclass
from typing import Any

from kraft.raft import messages as m


@dataclass(frozen=True, slots=True)
class Send:
    request_id: int
    destination: int
    request: m.RaftRequest


@dataclass(frozen=True, slots=True)
class Reply:
    handle: Any
    response: m.RaftResponse


@dataclass(slots=True)
class _InFlight:
    request_id: int
    deadline: int


class Outbox:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._messages: list[Send | Reply] = []
        self._next_request_id = 0
        self._in_flight: dict[int, _InFlight] = {}  # destination -> its one outstanding request
        self._retry_at: dict[int, int] = {}

    def take(self) -> list[Send | Reply]:
        out, self._messages = self._messages, []
        return out

    def reply(self, handle: Any, response: m.RaftResponse) -> None:
        self._messages.append(Reply(handle, response))

    def waiting_on(self, destination: int) -> bool:
        return destination in self._in_flight

    def can_send(self, destination: int, now: int) -> bool:
        return destination not in self._in_flight and now >= self._retry_at.get(destination, 0)

    def send(self, destination: int, request: m.RaftRequest, now: int) -> None:
        self._next_request_id += 1
        timeout = self.request_timeout_ms
        if isinstance(request, m.FetchRequest):
            timeout += int(request.max_wait.total_seconds() * 1000)
        self._in_flight[destination] = _InFlight(self._next_request_id, now + timeout)
        self._messages.append(Send(self._next_request_id, destination, request))

    def complete(self, request_id: int) -> int | None:
        """The destination of an answered (or failed) request; None if it is stale."""
        for destination, f in self._in_flight.items():
            if f.request_id == request_id:
                del self._in_flight[destination]
                return destination
        return None

    def back_off(self, destination: int, now: int) -> None:
        """The next request to `destination` waits for the retry backoff."""
        self._retry_at[destination] = now + self.retry_backoff_ms

    def expire(self, now: int) -> None:
        """Requests past their deadline count as failed; their destinations may be asked again."""
        for destination, f in list(self._in_flight.items()):
            if now >= f.deadline:
                del self._in_flight[destination]
                self._retry_at[destination] = now

    def forget(self) -> None:
        self._in_flight.clear()
        self._retry_at.clear()

    def deadlines(self, now: int) -> list[int]:
        """Requests in flight, and backoffs still running. A backoff that ended is none: the
        step that reached it polled the core, which asked again or had nothing to ask (a
        leader announces only at its interval), and kept as a deadline it would come due
        every millisecond (`RaftCore.next_deadline` looks again at a passed one then)."""
        return [f.deadline for f in self._in_flight.values()] + [
            t for d, t in self._retry_at.items() if d not in self._in_flight and t > now
        ]
