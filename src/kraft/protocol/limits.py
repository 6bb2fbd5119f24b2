"""What a listener may spend on its clients: Kafka's listener limits, the memory of requests
read but not answered, file descriptors, and log lines.

Every limit here answers a way one client could take a node down for all the others: a
frame's size prefix that promises 95 MiB (memory), connections past the descriptor limit
(the listener stops accepting), a client sending a byte a second (a connection held for
ever), a stream of bad requests (a log line each, hundreds of megabytes of log).
"""

import asyncio
import ctypes
import ctypes.util
import logging
import math
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
    # kraft.max.unauthenticated.connections: on a listener with TLS or SASL, connections
    # still in their handshake or login; at the limit a new one closes the oldest of them
    max_unauthenticated_connections: int = 1000


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


class FreedMemory:
    """Gives the memory of closed connections back to the system once closing quiets down.

    A connection's objects are freed as it closes, but glibc's allocator keeps freed heap
    pages for reuse while anything still lives above them: after 1,000 TLS connections
    closed, a node held the 24 MB they had used until more connections came. Once at
    least `batch` connections have closed and none has for `quiet_s`, malloc_trim(0)
    returns the free pages (a walk of the heap: milliseconds, once per burst). Without
    glibc it does nothing."""

    def __init__(self, batch: int = 64, quiet_s: float = 1.0) -> None:
        self.batch = batch
        self.quiet_s = quiet_s
        self.closed = 0  # connections closed since the last trim
        self.trims = 0
        self._last_close = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._trim: Callable[[int], int] | None | bool = False  # False: not looked up yet

    def connection_closed(self) -> None:
        loop = asyncio.get_running_loop()
        self.closed += 1
        self._last_close = loop.time()
        if self._timer is None and self.closed >= self.batch:
            self._timer = loop.call_later(self.quiet_s, self._check)

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self._last_close + self.quiet_s - loop.time()
        if wait > 0:
            self._timer = loop.call_later(wait, self._check)
            return
        self._timer = None
        self.closed = 0
        trim = self._malloc_trim()
        if trim is not None:
            trim(0)
            self.trims += 1

    def _malloc_trim(self) -> Callable[[int], int] | None:
        if self._trim is False:
            try:
                self._trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
            except (OSError, AttributeError):
                self._trim = None
        return self._trim if callable(self._trim) else None


FREED_MEMORY = FreedMemory()


class BurstLog:
    """One log line per burst of like events, a burst ending when none came for `quiet_s`:
    the line of its first event, which also says how many the previous burst had. For what
    a stranger can repeat at will (oversized frames before a login, floods of connections):
    a flood is one line, however long it lasts. Runs on the event loop."""

    def __init__(self, logger: logging.Logger, source: str, what: str, quiet_s: float = 10.0) -> None:
        self._log = logger
        self._source = source
        self._what = what
        self._quiet_s = quiet_s
        self._last = -math.inf
        self._count = 0  # events in the current burst

    def event(self, message: str, *args: object) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._last >= self._quiet_s:
            previous = f"; the previous burst had {self._count}" if self._count > 1 else ""
            self._log.warning("%s: " + message + " (more %s are not logged until none came for %.0f s%s)",
                              self._source, *args, self._what, self._quiet_s, previous)
            self._count = 0
        self._count += 1
        self._last = now


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
