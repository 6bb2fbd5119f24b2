"""The server's side of one connection: request frames cut from the bytes as they arrive,
under the listener's limits.

The socket is read straight into our buffers (a buffered protocol): small frames, nearly
every request, into the connection's own 4 KiB staging buffer, read in place from there; a
larger frame into a buffer of its own, an anonymous memory map of the frame's size, whose
pages the kernel provides only as bytes are written into them. So memory grows as a
frame's bytes arrive, never from its size prefix alone (a bytearray of the size would be
zeroed, and so resident, at once), each byte is copied once on the way in (socket to
buffer), and the map is returned to the system as soon as the request is decoded.

A frame larger than the staging buffer first reserves its size from the listener's
RequestMemory (queued.max.request.bytes); while none is left the connection stops
reading. Frames that fit the staging buffer reserve nothing: their memory is the
connection's own, allocated with it, and bounded by max.connections.

One request is served at a time, in order, as Kafka's brokers do: while it is handled the
next one's bytes may fill the staging buffer, then the connection stops reading until the
answer is written.

Two timers, one asyncio timer between them, re-armed only when a deadline moves earlier:
a request whose bytes do not all arrive within kraft.request.arrival.timeout.ms of its
first byte is dropped with its connection (a client sending one byte a second held a
connection for ever), and a connection that moves no bytes for connections.max.idle.ms
while no request of it is being handled is closed, as Kafka closes idle connections.
"""

import asyncio
import math
import mmap
from collections.abc import Callable
from typing import Any

from kraft.protocol.flow import WriteFlow
from kraft.protocol.framing import SIZE
from kraft.protocol.limits import ListenerLimits, RequestMemory
from kraft.protocol.protocol_errors import FrameTooLargeError, MalformedFrameError, ProtocolError

STAGING_BYTES = 4096


class RequestArrivalTimeout(ProtocolError):
    """A request's bytes did not all arrive in time."""


class IdleConnection(ConnectionError):
    """No bytes moved for connections.max.idle.ms: an ordinary end, not the client's fault."""


class Connection(WriteFlow, asyncio.BufferedProtocol):
    """Frames in (`next_frame`, `release_frame`, `handled`), a transport out."""

    def __init__(
        self,
        max_frame_bytes: int,
        limits: ListenerLimits,
        memory: RequestMemory,
        on_lost: Callable[[], object],  # its result, if any, is ignored (Task.cancel returns a bool)
    ) -> None:
        """`on_lost` is called if the connection ends while a request of it is being handled:
        the server then stops the handler (its answer could go nowhere)."""
        super().__init__()
        self._on_lost = on_lost
        self._max_frame_bytes = max_frame_bytes
        self._frame_setting = "socket.request.max.bytes"  # the key that sets the limit, for the refusal
        self._memory = memory
        self._arrival_s = limits.request_arrival_timeout_ms / 1000
        self._idle_s = limits.connections_max_idle_ms / 1000
        self._staging = bytearray(STAGING_BYTES)
        self._view = memoryview(self._staging)
        self._readonly = self._view.toreadonly()  # frames are handed out read-only, as kio requires
        self._begin = 0  # staged bytes not yet consumed: [_begin, _end)
        self._end = 0
        self._size = -1  # the size of the frame being read, once its prefix is consumed
        self._body: memoryview | None = None  # a large frame's own buffer, being filled
        self._body_read = 0
        self._map: mmap.mmap | None = None  # what _body (or the frame handed out) views
        self._reserved = 0  # bytes of RequestMemory held for the current large frame
        self._waiting_for_memory = False
        self._frame: memoryview | None = None  # the frame handed out, until released
        self._frame_staged = False  # it is a view of the staging buffer
        self._busy = False  # a frame was handed out and next_frame() not called again
        self._handling = False  # ... and its handler has not returned
        self._waiter: asyncio.Future | None = None
        self._error: BaseException | None = None
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None
        self._last_active = self._loop.time()
        self._frame_started: float | None = None  # loop time of the first byte of a partial frame
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = math.inf

    # ---------------------------------------------------------------- for the server

    @property
    def closed(self) -> bool:
        return self._error is not None

    async def next_frame(self) -> memoryview:
        """The next request frame (its body, without the size prefix); the previous one is
        answered. Raises ProtocolError for a frame that cannot be read, ConnectionError
        when the connection ends."""
        if self._error is not None:
            raise self._error
        self._busy = False
        self._advance()
        if self._frame is None:
            self._resume()
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        assert self._frame is not None
        return self._frame

    def limit_frames(self, max_frame_bytes: int, setting: str) -> None:
        """The largest frame from now on, and the key that sets it: the server lowers it to
        sasl.server.max.receive.size until a SASL login succeeds. Takes effect from the
        next size prefix read, which is never read while a request is being handled."""
        self._max_frame_bytes = max_frame_bytes
        self._frame_setting = setting

    def release_frame(self) -> None:
        """The frame is decoded: its bytes are no longer needed (its memory stays reserved
        until `handled`)."""
        frame, self._frame = self._frame, None
        if frame is None:
            return
        frame.release()
        if self._frame_staged:
            self._begin += self._size
        else:
            self._close_map()
        self._size = -1
        if self._busy and self._error is None:
            self._resume()  # the staging buffer may have room again

    def handled(self) -> None:
        """The handler has returned: the request's reserved memory is free (as Kafka frees a
        request's buffer once its API has handled it, before the response is sent)."""
        self._handling = False
        self._last_active = self._loop.time()
        self._release_memory()

    def fail(self, error: BaseException) -> None:
        """Ends the connection at once (its unsent responses are dropped)."""
        if self._error is None:
            self._error = error
        if self.transport is not None:
            self.transport.abort()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self._wake_writers(error)

    def dispose(self) -> None:
        """Its task is over. The error it ended with was raised here and there, and its
        traceback holds those frames, which hold this connection: dropping it lets the
        connection's memory (its TLS object, buffers, transports) go with its last
        reference, not at the next full run of the cycle collector, which on a node can be
        minutes of connections later (1,000 closed TLS connections held 24 MB until then).
        The same for the transport, whose TLS protocol keeps bound methods of this one."""
        if self._error is not None:
            self._error.__traceback__ = None
            self._error.__context__ = None
        self.transport = None

    # ---------------------------------------------------------------- asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self._last_active = self._loop.time()
        self._arm(self._last_active + self._idle_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(self._error or ConnectionError(f"connection lost: {exc or 'closed by the peer'}"))
        if self._handling:
            self._on_lost()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiting_for_memory:
            self._memory.forget(self._memory_freed)
            self._waiting_for_memory = False
        if self._body is not None:
            self._body.release()
            self._body = None
            self._close_map()
        self._release_memory()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is not None:
            return self._body[self._body_read :]
        if self._end == len(self._staging):
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = self._loop.time()
        if self._body is not None:
            self._body_read += nbytes
        else:
            self._end += nbytes
        if not self._busy:
            try:
                self._advance()
            except ProtocolError as e:
                self.fail(e)
                return
        if not self._room():
            self._pause()

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def resume_writing(self) -> None:
        self._last_active = self._loop.time()  # a response is moving: not idle
        super().resume_writing()

    # ---------------------------------------------------------------- frames

    def _advance(self) -> None:
        """Hands out the next complete frame if there is one; else starts the arrival clock
        on a partial one."""
        if self._frame is None:
            frame = self._cut()
            if frame is not None:
                self._frame = frame
                self._busy = self._handling = True
                self._frame_started = None
                if self._waiter is not None and not self._waiter.done():
                    self._waiter.set_result(None)
                return
        partial = self._body is not None or self._size >= 0 or self._end > self._begin
        if not partial or self._waiting_for_memory:
            self._frame_started = None  # waiting for memory is the server's delay, not the client's
        elif self._frame_started is None:
            self._frame_started = self._loop.time()
            self._arm(self._frame_started + self._arrival_s)

    def _cut(self) -> memoryview | None:
        """The next complete frame, or None until more bytes come."""
        if self._body is not None:
            if self._body_read < self._size:
                return None
            body, self._body = self._body, None
            self._frame_staged = False
            frame = body.toreadonly()
            body.release()
            return frame
        if self._size < 0:
            if self._end - self._begin < SIZE.size:
                return None
            (size,) = SIZE.unpack_from(self._staging, self._begin)
            if size < 0:
                raise MalformedFrameError(f"negative frame size {size}")
            if size > self._max_frame_bytes:
                raise FrameTooLargeError(size, self._max_frame_bytes, self._frame_setting)
            self._begin += SIZE.size
            self._size = size
        if self._end - self._begin >= self._size:
            self._frame_staged = True
            return self._readonly[self._begin : self._begin + self._size]
        if self._size > len(self._staging) and self._start_body():
            return self._cut()
        return None

    def _start_body(self) -> bool:
        """Moves a frame too large to stage into a buffer of its own, once its size is
        reserved; False while the listener's request memory is spent."""
        if not self._memory.reserve(self._size):
            if not self._waiting_for_memory:
                self._waiting_for_memory = True
                self._memory.wait(self._memory_freed)
            return False
        self._waiting_for_memory = False
        self._reserved = self._size
        try:
            self._map = mmap.mmap(-1, self._size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except OSError as e:
            raise ProtocolError(f"no memory for a frame of {self._size} bytes: {e}") from None
        self._body = memoryview(self._map)
        staged = self._end - self._begin
        self._body[:staged] = self._view[self._begin : self._end]
        self._body_read = staged
        self._begin = self._end = 0
        return True

    def _memory_freed(self) -> bool:
        """RequestMemory's call when memory is released: True once this connection no longer
        waits (it reserved, or it is closed)."""
        if self._error is None:
            try:
                self._advance()
            except ProtocolError as e:
                self.fail(e)
        if self._waiting_for_memory and self._error is None:
            return False
        self._waiting_for_memory = False
        if self._error is None and self._room():
            self._resume()
        return True

    def _release_memory(self) -> None:
        if self._reserved:
            reserved, self._reserved = self._reserved, 0
            self._memory.release(reserved)

    def _close_map(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # a view of it is still alive somewhere: freed with the last one
            self._map = None

    def _compact(self) -> None:
        """Moves the unconsumed staged bytes to the front, unless a frame handed out still
        views them (then `_room` is False and reading is paused)."""
        if self._frame is not None and self._frame_staged:
            return
        left = self._end - self._begin
        self._staging[:left] = self._staging[self._begin : self._end]
        self._begin, self._end = 0, left

    def _room(self) -> bool:
        """Whether the next read has somewhere to go."""
        if self._waiting_for_memory:
            return False
        if self._body is not None or self._end < len(self._staging):
            return True
        return self._begin > 0 and not (self._frame is not None and self._frame_staged)

    def _pause(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.is_reading() and self._room():
            self.transport.resume_reading()

    # ---------------------------------------------------------------- timers

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        self._timer = self._loop.call_at(due, self._check_timers)
        self._timer_due = due

    def _check_timers(self) -> None:
        self._timer = None
        self._timer_due = math.inf
        if self._error is not None:
            return
        now = self._loop.time()
        started = self._frame_started
        if started is not None and now >= started + self._arrival_s:
            self.fail(
                RequestArrivalTimeout(
                    f"a request's bytes did not all arrive within {self._arrival_s * 1000:.0f} ms "
                    f"(kraft.request.arrival.timeout.ms)"
                )
            )
            return
        if not self._handling and now >= self._last_active + self._idle_s:
            self.fail(
                IdleConnection(f"idle for {self._idle_s * 1000:.0f} ms (connections.max.idle.ms)")
            )
            return
        due = (now if self._handling else self._last_active) + self._idle_s
        if started is not None:
            due = min(due, started + self._arrival_s)
        self._arm(due)
