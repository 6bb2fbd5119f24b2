"""What a listener may spend on its clients: Kafka's listener limits, the memory of requests
read but not answered, file descriptors, and log lines.

Every limit here answers a way one client could take a node down for all the others: a
frame's size prefix that promises 95 MiB (memory), connections past the descriptor limit
(the listener stops accepting), a client sending a byte a second (a connection held for
ever), a stream of bad requests (a log line each, hundreds of megabytes of log).
"""

import asyncio
import logging
import resource
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ListenerLimits:
    """A listener's limits, in Kafka's terms (the server.properties key of each field in its
    comment; the defaults are Kafka's except where kraft.server.settings.server_config says otherwise)."""

    max_connections: int = INT32_MAX  # max.connections
    max_connections_per_ip: int = INT32_MAX  # max.connections.per.ip
    queued_max_request_bytes: int = -1  # queued.max.request.bytes; -1 is no limit
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    request_arrival_timeout_ms: int = 30_000  # kraft.request.arrival.timeout.ms


KAFKA_DEFAULTS = ListenerLimits()


class RequestMemory:
    """The bytes of requests read but not yet answered, across a listener's connections
    (Kafka's queued.max.request.bytes, a SimpleMemoryPool in non-strict mode).

    A frame reserves its size when its size prefix has been read, before its body is read;
    while the pool is spent, connections wait without reading, as Kafka mutes them. As in
    Kafka's non-strict pool, a reservation succeeds whenever anything is left, so one frame
    may overshoot: the most ever reserved is the limit plus one largest frame. Reserving
    is bookkeeping only: the frame's memory grows as its bytes arrive.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: deque[Callable[[], bool]] = deque()

    def reserve(self, size: int) -> bool:
        if 0 < self.limit <= self.used:
            return False
        self.used += size
        return True

    def wait(self, retry: Callable[[], bool]) -> None:
        """Calls `retry` when memory is released, in the order the waiters came, until one
        returns False (it could not reserve): the rest wait on."""
        self._waiters.append(retry)

    def forget(self, retry: Callable[[], bool]) -> None:
        try:
            self._waiters.remove(retry)
        except ValueError:
            pass

    def release(self, size: int) -> None:
        self.used -= size
        while self._waiters and (self.limit <= 0 or self.used < self.limit):
            if not self._waiters[0]():
                break
            self._waiters.popleft()


class DescriptorBudget:
    """Connections every listener of this process may hold together, so the process keeps
    descriptors for its own files and peers: the soft RLIMIT_NOFILE, first raised to the
    hard limit, less a reserve. Past the budget a listener stops accepting, the way Kafka's
    acceptor waits for a connection slot, instead of accepting until accept() fails."""

    def __init__(self) -> None:
        self.limit: int | None = None  # set on first use, after raising the soft limit
        self.used = 0
        self._waiters: list[Callable[[], None]] = []

    def start(self) -> None:
        """Raises the soft limit to the hard one and sets the budget, once per process (a
        listener calls it when it starts; a test may set `limit` itself)."""
        if self.limit is not None:
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and soft < hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                soft = hard
            except (ValueError, OSError):
                pass
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20  # as many as Linux gives a process by default (fs.nr_open)
        self.limit = soft - min(1024, soft // 4)

    def available(self) -> bool:
        self.start()
        assert self.limit is not None
        return self.used < self.limit

    def acquire(self) -> None:
        """Counts a connection; callers check `available` first (no await in between)."""
        self.used += 1

    def wait(self, wake: Callable[[], None]) -> None:
        if wake not in self._waiters:
            self._waiters.append(wake)

    def release(self) -> None:
        self.used -= 1
        waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()


DESCRIPTORS = DescriptorBudget()


class Throttled:
    """One log line for the first of a run of like events, then at most one summary line a
    `window_s`, so a client that sends a million bad requests costs a few lines of log, not
    a million (or a traceback each). Runs on the event loop, which prints the summary."""

    def __init__(
        self, logger: logging.Logger, source: str, what: str, window_s: float = 10.0
    ) -> None:
        self._log = logger
        self._source = source
        self._what = what
        self._window_s = window_s
        self._window_end = 0.0
        self._suppressed = 0
        self._latest = ""

    def event(self, message: str, *args: object, exc_info: bool = False) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now >= self._window_end:
            self._window_end = now + self._window_s
            self._log.warning("%s: " + message, self._source, *args, exc_info=exc_info)
            return
        self._suppressed += 1
        self._latest = message % args if args else message
        if self._suppressed == 1:
            loop.call_at(self._window_end, self.flush)

    def flush(self) -> None:
        """The summary of what was suppressed, if anything was."""
        if self._suppressed:
            self._log.warning(
                "%s: %d more %s in the last %.0f s; the latest: %s",
                self._source,
                self._suppressed,
                self._what,
                self._window_s,
                self._latest,
            )
            self._suppressed = 0
