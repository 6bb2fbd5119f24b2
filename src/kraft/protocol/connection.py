"""A client connection speaking Kafka's protocol: requests out, responses matched by
correlation id, several in flight at once. Used for peer RPCs and by kraft's tools.

Responses are read with a buffered protocol (the socket is read straight into our
buffers): small frames through a staging buffer, several per read; a frame larger than
the staging buffer into a buffer of its own size, in place. A FetchSnapshot chunk or a
large Fetch response is then copied once from the socket, not three times (a stream
reader's bytes per read, its buffer, the frame sliced out of it), and arrives in a few
reads rather than one per 256 KiB with a pause of the socket in between.

A connection to a secured listener takes the TLS context to connect with (the server's name
checked against its certificate when the context says so) and a SASL login, made before
the connection is handed out: SaslHandshake v1, then SaslAuthenticate until the mechanism's
exchange is done. A refused login is a LoginRefused, a ConnectionError, so callers that
retry a connection retry it as they do any other failure to connect.
"""

import asyncio
import itertools
import logging
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from kraft.protocol.build import build_request
from kraft.protocol.codec import decode_response, encode_request, response_class
from kraft.protocol.flow import WriteFlow
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, SIZE
from kraft.protocol.protocol_errors import ErrorCode, FrameTooLargeError, MalformedFrameError, ProtocolError
from kraft.security.plain import PLAIN, PlainClient
from kraft.security.sasl import SaslAuthenticationError, SaslClientExchange
from kraft.security.scram import ScramClient, ScramMechanism

log = logging.getLogger("kraft.protocol.connection")
_CORRELATION_ID = struct.Struct(">i")
_STAGING_BYTES = 64 * 1024
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class LoginRefused(ConnectionError):
    """The server refused the SASL login (or does not offer the mechanism)."""


@dataclass(frozen=True)
class ClientLogin:
    """A SASL login: the mechanism's name and a factory of fresh client exchanges."""

    mechanism: str
    exchange: Callable[[], SaslClientExchange]

    MECHANISMS: ClassVar[tuple[str, ...]] = (PLAIN, *(m.mechanism_name for m in ScramMechanism))

    @classmethod
    def with_password(cls, mechanism: str, username: str, password: str) -> "ClientLogin":
        """A login as `username` by `mechanism`, one of MECHANISMS (ValueError for another):
        the one place a client's mechanism name becomes its exchange."""
        scram = ScramMechanism.named(mechanism)
        if scram is not None:
            return cls(mechanism, partial(ScramClient, scram, username, password))
        if mechanism == PLAIN:
            return cls(mechanism, partial(PlainClient, username, password))
        raise ValueError(f"SASL mechanism {mechanism} is not one kraft speaks ({', '.join(cls.MECHANISMS)})")


class _FrameProtocol(WriteFlow, asyncio.BufferedProtocol):
    """Cuts the byte stream into frames and hands each frame's body to `connection`.

    A body is handed over as a read-only view that is valid only during the call (its
    buffer is reused): the connection decodes it at once, and decoding copies.
    """

    def __init__(self, connection: "KafkaConnection") -> None:
        super().__init__()
        self._connection = connection
        self._staging = bytearray(_STAGING_BYTES)
        self._staged = 0  # bytes of the staging buffer in use, from its start
        self._body: memoryview | None = None  # a large frame's body, being read in place
        self._body_read = 0
        self._spares: list[bytearray] = []  # buffers of earlier large bodies, reused when free

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is not None:
            return self._body[self._body_read :]
        return memoryview(self._staging)[self._staged :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._body is not None:
                self._body_read += nbytes
                if self._body_read == len(self._body):
                    body, self._body = self._body, None
                    with body:
                        self._connection._on_frame(body.toreadonly(), own_buffer=True)
            else:
                self._staged += nbytes
                self._cut_staged_frames()
        except ProtocolError as e:
            log.warning("closing connection: %s", e)
            self._connection._fail(e)

    def _cut_staged_frames(self) -> None:
        staging, view, position = self._staging, memoryview(self._staging).toreadonly(), 0
        while self._staged - position >= SIZE.size:
            (size,) = SIZE.unpack_from(staging, position)
            if size < 0:
                raise MalformedFrameError(f"negative frame size {size}")
            if size > self._connection.max_frame_bytes:
                raise FrameTooLargeError(size, self._connection.max_frame_bytes)
            start = position + SIZE.size
            if self._staged - start >= size:
                self._connection._on_frame(view[start : start + size])
                position = start + size
            elif SIZE.size + size > len(staging):  # too large to stage: read it in place
                self._body = self._large_buffer(size)
                self._body_read = self._staged - start
                self._body[: self._body_read] = view[start : self._staged]
                position = self._staged
            else:
                break
        view.release()
        left = self._staged - position
        if position and left:
            staging[:left] = staging[position : self._staged]
        self._staged = left

    def _large_buffer(self, size: int) -> memoryview:
        """`size` bytes to read a frame into: a buffer of an earlier large frame if one is
        big enough and nothing holds a view of it any more, so a stream of 10 MiB
        FetchSnapshot chunks is not a stream of fresh 10 MiB buffers, each zeroed and
        faulted in. Two are kept: the last chunk's records may still be waiting to be
        written (viewed, not copied) while the next one arrives."""
        for spare in self._spares:
            if len(spare) >= size and _unviewed(spare):
                return memoryview(spare)[:size]
        fresh = bytearray(size)
        self._spares = [fresh, *self._spares[:1]]
        return memoryview(fresh)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._connection._fail(ConnectionError(f"connection lost: {exc or 'closed by the peer'}"))
        self._wake_writers(ConnectionError("connection lost"))


def _unviewed(buffer: bytearray) -> bool:
    """True if no view of `buffer` is alive: a bytearray refuses to resize while exported."""
    try:
        buffer.append(0)
    except BufferError:
        return False
    del buffer[-1]
    return True


class KafkaConnection:
    def __init__(self, client_id: str, max_frame_bytes: int) -> None:
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future, type]] = {}
        self._closed: BaseException | None = None
        self._protocol = _FrameProtocol(self)
        self._transport: asyncio.Transport | None = None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "kraft",
        timeout: float = 5.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        tls: ssl.SSLContext | None = None,
        login: ClientLogin | None = None,
    ) -> "KafkaConnection":
        """A connection to host:port, over TLS with `tls`, logged in with `login`."""
        connection = cls(client_id, max_frame_bytes)
        loop = asyncio.get_running_loop()
        transport, _ = await asyncio.wait_for(
            loop.create_connection(lambda: connection._protocol, host, port, ssl=tls,
                                   server_hostname=host if tls is not None else None), timeout)
        connection._transport = transport
        if login is not None:
            try:
                await connection._login(login, timeout)
            except BaseException:
                connection.close()
                raise
        return connection

    async def _login(self, login: ClientLogin, timeout: float) -> None:
        answer = await self.request(build_request(SASL_HANDSHAKE, 1, {"mechanism": login.mechanism}), timeout)
        if answer.error_code != ErrorCode.none:
            raise LoginRefused(f"SASL handshake refused ({answer.error_code.name}): the server offers "
                               f"{', '.join(answer.mechanisms) or 'no mechanism'}, not {login.mechanism}")
        exchange = login.exchange()
        token: bytes | None = exchange.first()
        while token is not None:
            answer = await self.request(build_request(SASL_AUTHENTICATE, 2, {"auth_bytes": token}), timeout)
            if answer.error_code != ErrorCode.none:
                raise LoginRefused(f"SASL {login.mechanism} login refused: {answer.error_message}")
            try:
                token = exchange.respond(bytes(answer.auth_bytes))
            except SaslAuthenticationError as e:
                raise LoginRefused(f"SASL {login.mechanism} login: {e}") from None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def request(self, request: Any, timeout: float | None = None) -> Any:
        """Sends `request` and waits for its response (of the same API version)."""
        if self._closed is not None:
            raise ConnectionError(f"connection closed: {self._closed}")
        assert self._transport is not None
        correlation_id = next(self._ids)
        cls = type(request)
        future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, response_class(cls.__api_key__, cls.__version__))
        try:
            self._transport.write(encode_request(request, correlation_id, self.client_id))
            await self._protocol.drain()
            # asyncio.timeout, not wait_for: the answer wakes this task in one turn of the loop,
            # where wait_for took two more (a node's Fetches go through here).
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._pending.pop(correlation_id, None)

    def _on_frame(self, body: memoryview, own_buffer: bool = False) -> None:
        """A response frame's body. One read into a buffer of its own (a large frame) is
        decoded leaving its record sets in place; a staged one, whose buffer is reused at
        once, is copied out."""
        if len(body) < _CORRELATION_ID.size:
            raise ProtocolError(f"response frame of {len(body)} bytes")
        (correlation_id,) = _CORRELATION_ID.unpack_from(body)
        entry = self._pending.get(correlation_id)
        if entry is None:
            return  # its request timed out and was forgotten
        future, cls = entry
        _, response = decode_response(body, cls, zero_copy=own_buffer)
        if not future.done():
            future.set_result(response)

    def _fail(self, error: BaseException) -> None:
        if self._closed is None:
            self._closed = error
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        if self._closed is None:
            self._fail(ConnectionError("connection closed"))
