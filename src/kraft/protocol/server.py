"""An asyncio server for Kafka's wire protocol: frames in, handlers, frames out.

Later layers register a handler per API key with the versions they really serve; the
server answers ApiVersions from that registry, so it never advertises what it cannot do.

Requests on one connection are answered in order, one at a time, as Kafka's brokers do:
a long-polling Fetch holds its connection until it is answered, so a node's peers send
their Fetches on one connection and their election requests on another (see
kraft.server.runtime.peers), and a Vote never waits behind a parked Fetch.

A frame that cannot be served (too large, malformed, an API or version we do not speak)
closes only its own connection, after a log line that says why; every other connection
goes on. The one exception, from KIP-511: an ApiVersions request of a version we do not
know gets an ApiVersions v0 response with UNSUPPORTED_VERSION and our ranges, so the
client can retry with a version both sides speak.

The listener keeps Kafka's limits (ListenerLimits; kraft.protocol.listener reads each
connection's frames under them). It accepts on its own socket rather than through
asyncio.start_server, to decide before each accept: at max.connections, or when the
process's connections would leave too few file descriptors (DescriptorBudget), it stops
accepting until a connection closes, as Kafka's acceptor waits for a connection slot; a
connection past max.connections.per.ip is accepted and closed at once, as Kafka does; an
accept that fails (EMFILE, ENFILE, ENOBUFS...) backs off, doubling up to a second, and
is logged once when the failures start and once when accepting works again. Log lines
about clients (bad requests, rejected connections, handler failures) are throttled to
one plus a summary every 10 s, so a hostile client cannot fill the disk with them.

A connection that ends while its request is being handled stops the handler: whatever the
request already set going (records submitted to the log) goes on, as in Kafka, but a
parked Fetch, whose wait the client chooses (up to 24 days), no longer holds its
connection's slot and memory once nobody is there to answer.

A listener's security (ListenerSecurity: kraft.protocol.session) adds TLS to its sockets
(the handshake within kraft.request.arrival.timeout.ms; a failed one closes the connection
with a throttled line) and, on a SASL listener, the login every connection must make first
(kraft.protocol.sasl_gate). Each connection's Session (listener, client address, principal)
is set in its task, where its handlers read it. A PLAINTEXT connection does nothing more per
request than before: one flag is read.

Before a connection has authenticated, a stranger's reach is bounded (issue 25): on a SASL
listener no frame larger than sasl.server.max.receive.size is read until the login succeeds
(its size prefix closes the connection, one log line per burst), and a listener with TLS or
SASL holds at most kraft.max.unauthenticated.connections connections still in their handshake
or login, the oldest closed to admit a newcomer. TLS connections are read through one buffer
per thread (kraft.protocol.lean_tls), and once a burst of closes has quieted the process gives
the freed heap back (FreedMemory).
"""

import asyncio
import logging
import os
import socket
import ssl
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.index import load_payload_module
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.static.constants import EntityType
from kio.static.primitive import i16, i64

from kraft.protocol.codec import api_name, decode_request, peek_api, request_class, response_class
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from kraft.protocol.lean_tls import accept_tls
from kraft.protocol.limits import (
    DESCRIPTORS,
    FREED_MEMORY,
    KAFKA_DEFAULTS,
    BurstLog,
    ListenerLimits,
    RequestMemory,
    Throttled,
)
from kraft.protocol.listener import Connection, IdleConnection
from kraft.protocol.protocol_errors import ErrorCode, FrameTooLargeError, ProtocolError, UnsupportedVersionError
from kraft.protocol.regions import Region, Segment, encode_response_segments
from kraft.protocol.sasl_gate import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslGate, refuse_before_login
from kraft.protocol.session import PLAINTEXT_LISTENER, SESSION, SSL, ListenerSecurity, Session
from kraft.protocol.tasks import cancel_and_wait
from kraft.security.tls import subject_name

log = logging.getLogger("kraft.protocol.server")

API_VERSIONS = 18
_CORRELATION_ID = struct.Struct(">i")
_BACKLOG = 100
_ACCEPTS_PER_WAKEUP = 100  # then the loop serves others before accepting more
_ACCEPT_BACKOFF_S = (0.01, 1.0)  # first and longest pause after a failed accept
_BURST_QUIET_S = 5.0  # accept errors this far apart are two bursts, each logged
_TLS_PIECE = 1 << 20  # a file region goes through TLS in pieces of this size
_INLINE_REGION_BYTES = 64 << 10  # a region up to this is read and written with its frame's bytes

Handler = Callable[[Any, Any], Awaitable[Any]]
"""async (request_header, request) -> response entity of the request's version, or None
when the client expects no answer (Produce with acks=0)."""


@dataclass(frozen=True)
class FeaturesAnswer:
    """What an ApiVersions answer (v3+) says of features: supported (name, min, max),
    finalized (name, level), and the finalized levels' epoch (-1: unknown)."""

    supported: tuple[tuple[str, int, int], ...] = ()
    finalized: tuple[tuple[str, int], ...] = ()
    epoch: int = -1


@dataclass(frozen=True)
class Endpoint:
    min_version: int
    max_version: int
    handler: Handler


class KafkaServer:
    """One listener speaking Kafka's protocol to whoever connects."""

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        limits: ListenerLimits = KAFKA_DEFAULTS,
        name: str = "listener",
        security: ListenerSecurity = PLAINTEXT_LISTENER,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.limits = limits
        self.name = name
        self.security = security
        # Called before each handler, when set: None to serve the request, else the answer
        # refusing it (authorization: kraft.server.settings.authorization).
        self.guard: Callable[[Any, Any], Any | None] | None = None
        # The features ApiVersions `version` lists, when set (kraft.server.apis.features_api).
        self.features: Callable[[int], FeaturesAnswer] | None = None
        self._endpoints: dict[int, Endpoint] = {}
        self._memory = RequestMemory(limits.queued_max_request_bytes)
        self._socket: socket.socket | None = None
        self._accepting = False
        self._retry: asyncio.TimerHandle | None = None
        self._backoff = 0.0
        self._failed_accepts = 0  # in the current burst of accept errors
        self._last_failure = 0.0  # loop time of its latest
        self._burst_end: asyncio.TimerHandle | None = None
        self._full = False  # not accepting because a connection limit is reached
        self._connections: set[asyncio.Task] = set()
        self._per_ip: Counter[str] = Counter()
        self._bad_requests = Throttled(log, name, "connections closed for bad requests")
        self._failures = Throttled(log, name, "connections closed after a handler failed")
        self._rejections = Throttled(log, name, "connections rejected (max.connections.per.ip)")
        self._saturated = Throttled(log, name, "times accepting stopped at a connection limit")
        self._refused_logins = Throttled(log, name, "connections closed after a refused SASL login")
        self._oversized = BurstLog(log, name, "frames too large before a login")
        self._evictions = BurstLog(log, name, "connections closed unauthenticated to admit new ones")
        # connections still in their TLS handshake or SASL login, oldest first
        self._unauthenticated: dict[asyncio.Task, None] = {}
        self.register(API_VERSIONS, 0, 4, self._api_versions)
        if security.uses_sasl:
            gate = SaslGate(security)
            self.register(SASL_HANDSHAKE, 1, 1, gate.handshake)
            self.register(SASL_AUTHENTICATE, 0, 2, gate.authenticate)

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Serves `api_key` in [min_version, max_version] with `handler`."""
        for version in (min_version, max_version):
            response_class(api_key, version)  # fails now, not on the first request, if kio lacks it
        self._endpoints[api_key] = Endpoint(min_version, max_version, handler)

    def api_versions(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) for every API served, in key order."""
        return sorted((key, e.min_version, e.max_version) for key, e in self._endpoints.items())

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def queued_request_bytes(self) -> int:
        """Bytes of requests read (or being read) and not yet handled (queued.max.request.bytes)."""
        return self._memory.used

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Starts listening; returns the bound address (port 0 picks a free port)."""
        DESCRIPTORS.start()
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            message = f"error while attempting to bind on address {address!r}: {e.strerror}"
            raise OSError(e.errno, message) from None
        self._socket = sock
        self._resume_accepting()
        bound = sock.getsockname()
        log.info("%s listening on %s:%d", self.name, bound[0], bound[1])
        return bound[0], bound[1]

    async def close(self) -> None:
        if self._socket is not None:
            self._stop_accepting()
            for timer in (self._retry, self._burst_end):
                if timer is not None:
                    timer.cancel()
            self._socket.close()
            self._socket = None
        await cancel_and_wait(self._connections)
        for throttled in (self._bad_requests, self._failures, self._rejections, self._saturated,
                          self._refused_logins):
            throttled.flush()

    # ---------------------------------------------------------------- accepting

    def _resume_accepting(self) -> None:
        self._retry = None
        if self._socket is not None and not self._accepting:
            asyncio.get_running_loop().add_reader(self._socket.fileno(), self._accept_ready)
            self._accepting = True

    def _stop_accepting(self) -> None:
        if self._accepting and self._socket is not None:
            asyncio.get_running_loop().remove_reader(self._socket.fileno())
        self._accepting = False

    def _accept_ready(self) -> None:
        assert self._socket is not None
        for _ in range(_ACCEPTS_PER_WAKEUP):
            if not self._slot_free():
                return
            try:
                sock, address = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as e:
                self._accept_failed(e)
                return
            self._backoff = 0.0
            if self._failed_accepts and self._burst_end is None:
                self._burst_end = asyncio.get_running_loop().call_at(
                    self._last_failure + _BURST_QUIET_S, self._end_burst
                )
            self._admit(sock, address[0])

    def _slot_free(self) -> bool:
        """Whether another connection may be accepted; if not, stops accepting until one
        closes (as Kafka's acceptor waits for a slot), saying so once."""
        if len(self._connections) < self.limits.max_connections and DESCRIPTORS.available():
            return True
        self._stop_accepting()
        DESCRIPTORS.wait(self._slot_freed)
        self._full = True
        which = ("max.connections" if len(self._connections) >= self.limits.max_connections
                 else f"the process's file-descriptor budget ({DESCRIPTORS.limit} connections)")
        self._saturated.event(
            "%d connections open, at the limit of %s: not accepting until one closes",
            len(self._connections), which,
        )
        return False

    def _slot_freed(self) -> None:
        if self._full and self._retry is None:
            self._full = False
            self._resume_accepting()

    def _accept_failed(self, error: OSError) -> None:
        """Stops accepting for a while, doubling the pause on each failure in a row. A burst
        of failures (none more than _BURST_QUIET_S apart) is logged when it begins and once
        it has ended, however often accepting and failing alternate within it."""
        self._stop_accepting()
        loop = asyncio.get_running_loop()
        self._backoff = min(max(self._backoff * 2, _ACCEPT_BACKOFF_S[0]), _ACCEPT_BACKOFF_S[1])
        if not self._failed_accepts:
            reason = os.strerror(error.errno) if error.errno else str(error)
            log.warning(
                "%s: cannot accept connections (%s, %d open): retrying with a growing pause "
                "up to %.0f s", self.name, reason, len(self._connections), _ACCEPT_BACKOFF_S[1],
            )
        self._failed_accepts += 1
        self._last_failure = loop.time()
        self._retry = loop.call_later(self._backoff, self._resume_accepting)

    def _end_burst(self) -> None:
        self._burst_end = None
        loop = asyncio.get_running_loop()
        if loop.time() < self._last_failure + _BURST_QUIET_S:
            self._burst_end = loop.call_at(self._last_failure + _BURST_QUIET_S, self._end_burst)
            return
        log.warning("%s: accepting connections again after %d failed attempts", self.name,
                    self._failed_accepts)
        self._failed_accepts = 0

    def _admit(self, sock: socket.socket, ip: str) -> None:
        if self._per_ip[ip] >= self.limits.max_connections_per_ip:
            sock.close()
            self._rejections.event(
                "rejected a connection from %s, which has the maximum of %d "
                "(max.connections.per.ip)", ip, self.limits.max_connections_per_ip,
            )
            return
        if self.security.authenticates and len(self._unauthenticated) >= self.limits.max_unauthenticated_connections:
            self._close_oldest_unauthenticated(ip)
        DESCRIPTORS.acquire()
        self._per_ip[ip] += 1
        task = asyncio.get_running_loop().create_task(self._serve_socket(sock, ip))
        self._connections.add(task)
        if self.security.authenticates:
            self._unauthenticated[task] = None
        task.add_done_callback(lambda done: self._closed(done, sock, ip))

    def _close_oldest_unauthenticated(self, ip: str) -> None:
        """Makes room for a newcomer at kraft.max.unauthenticated.connections: the oldest
        connection still in its handshake or login goes (a stranger holding many cannot keep
        a client that logs in promptly out, nor hold their memory)."""
        oldest = next(iter(self._unauthenticated))
        del self._unauthenticated[oldest]
        oldest.cancel()
        self._evictions.event(
            "%d connections have not authenticated (kraft.max.unauthenticated.connections): closing the oldest "
            "to admit one from %s", self.limits.max_unauthenticated_connections, ip)

    def _authenticated(self, task: asyncio.Task | None) -> None:
        if task is not None:
            self._unauthenticated.pop(task, None)

    def _closed(self, task: asyncio.Task, sock: socket.socket, ip: str) -> None:
        """Every connection's end, even one whose task was cancelled before it ran."""
        sock.close()  # a no-op once its transport has closed it
        self._connections.discard(task)
        self._unauthenticated.pop(task, None)
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]
        DESCRIPTORS.release()
        self._slot_freed()
        FREED_MEMORY.connection_closed()

    # ---------------------------------------------------------------- serving

    async def _serve_socket(self, sock: socket.socket, ip: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        connection = Connection(self.max_frame_bytes, self.limits, self._memory, task.cancel)
        security = self.security
        try:
            port = sock.getpeername()[1]
        except OSError:
            port = 0
        session = Session(self.name, security.protocol, (ip, port), authenticated=not security.uses_sasl)
        SESSION.set(session)  # this task's context: its handlers read it
        try:
            if security.tls is None:
                await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, sock)
            else:
                await accept_tls(sock, connection, security.tls, self.limits.request_arrival_timeout_ms / 1000)
                if security.protocol == SSL:
                    session.principal = _certificate_principal(connection)
                    self._authenticated(task)
            await self._serve(connection, session)
        except ssl.SSLError as e:
            self._bad_requests.event("TLS handshake with %s failed: %s", ip, e.reason or e)
        except (OSError, TimeoutError):
            pass  # the client was gone before its transport was made
        except asyncio.CancelledError:
            pass  # the server is closing, or the client left mid-request; either way, end quietly
        finally:
            connection.fail(ConnectionError("the server closed the connection"))
            connection.dispose()

    async def _serve(self, connection: Connection, session: Session) -> None:
        header = None
        if not session.authenticated:  # Kafka's SASL authenticator reads frames under this limit
            connection.limit_frames(min(self.max_frame_bytes, self.security.max_receive_before_login),
                                    "sasl.server.max.receive.size")
        try:
            while True:
                frame = await connection.next_frame()
                header = None
                try:
                    if not session.authenticated:
                        refuse_before_login(peek_api(frame)[0])
                    handler, header, request = self._decode(frame)
                finally:
                    connection.release_frame()
                guard = self.guard
                refusal = guard(header, request) if guard is not None else None
                response = refusal if refusal is not None else await handler(header, request)
                connection.handled()
                if response is not None:
                    segments = encode_response_segments(header.correlation_id, response)
                    await _write_segments(connection, segments, self.security.tls is not None)
                if session.close_after_response:
                    self._refused_logins.event("closing connection from %s after a refused SASL login (%s)",
                                               connection.peer, session.mechanism)
                    return
                if session.authenticated and header.request_api_key == SASL_AUTHENTICATE:
                    connection.limit_frames(self.max_frame_bytes, "socket.request.max.bytes")
                    self._authenticated(asyncio.current_task())
        except IdleConnection as e:
            log.debug("%s: closing connection from %s: %s", self.name, connection.peer, e)
        except ConnectionError:
            pass
        except FrameTooLargeError as e:
            if session.authenticated:
                self._bad_requests.event("closing connection from %s: %s", connection.peer, e)
            else:
                self._oversized.event("closing connection from %s before its login: %s", connection.peer, e)
        except ProtocolError as e:
            self._bad_requests.event("closing connection from %s: %s", connection.peer, e)
        except Exception:
            assert header is not None  # decoding raises only ProtocolErrors
            self._failures.event(
                "closing connection from %s after its %s v%d request failed", connection.peer,
                api_name(header.request_api_key), header.request_api_version, exc_info=True,
            )

    def _decode(self, body: memoryview) -> tuple[Handler, Any, Any]:
        """The handler of the request in `body`, its header and the request."""
        api_key, version = peek_api(body)
        endpoint = self._endpoints.get(api_key)
        if endpoint is None:
            raise UnsupportedVersionError(api_key, version, f": {api_name(api_key)} is not served here")
        if not endpoint.min_version <= version <= endpoint.max_version:
            if api_key == API_VERSIONS and len(body) >= 8:
                (correlation_id,) = _CORRELATION_ID.unpack_from(body, 4)
                header = request_class(API_VERSIONS, 0).__header_schema__(
                    request_api_key=i16(API_VERSIONS), request_api_version=i16(version),
                    correlation_id=correlation_id, client_id=None,
                )
                return self._unsupported_api_versions, header, None
            raise UnsupportedVersionError(
                api_key, version, f": {api_name(api_key)} is served in v{endpoint.min_version}-v{endpoint.max_version}"
            )
        header, request = decode_request(body)
        return endpoint.handler, header, request

    async def _unsupported_api_versions(self, header: Any, request: Any) -> Any:
        """KIP-511's answer to an ApiVersions version we do not know."""
        return ApiVersionsResponseV0(
            error_code=ErrorCode.unsupported_version,
            api_keys=tuple(
                ApiVersionV0(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
                for k, lo, hi in self.api_versions()
            ),
        )

    async def _api_versions(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        schema = load_payload_module(API_VERSIONS, version, EntityType.response)
        keys = tuple(
            schema.ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
            for k, lo, hi in self.api_versions()
        )
        if version == 0:
            return schema.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=keys)
        if version < 3 or self.features is None:
            return schema.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=keys, throttle_time=timedelta(0))
        features = self.features(version)
        return schema.ApiVersionsResponse(
            error_code=ErrorCode.none, api_keys=keys, throttle_time=timedelta(0),
            supported_features=tuple(schema.SupportedFeatureKey(name=n, min_version=i16(lo), max_version=i16(hi))
                                     for n, lo, hi in features.supported),
            finalized_features_epoch=i64(features.epoch),
            finalized_features=tuple(schema.FinalizedFeatureKey(name=n, min_version_level=i16(v),
                                                                max_version_level=i16(v))
                                     for n, v in features.finalized))


def _certificate_principal(connection: Connection) -> str:
    """`User:<subject DN>` of the client's certificate, or ANONYMOUS without one (Kafka's
    DefaultKafkaPrincipalBuilder on an SSL listener, ssl.principal.mapping.rules=DEFAULT)."""
    transport = connection.transport
    tls = transport.get_extra_info("ssl_object") if transport is not None else None
    subject = subject_name(tls.getpeercert() or {}) if tls is not None else None
    return f"User:{subject}" if subject else "User:ANONYMOUS"


async def _write_segments(connection: Connection, segments: list[Segment], tls: bool = False) -> None:
    """Writes a response: bytes as they are, a large region with os.sendfile (file to socket),
    or over TLS, which encrypts in this process, read from the file in pieces and written.
    A region up to _INLINE_REGION_BYTES is read (pread) and written with the bytes around it
    in one write: asyncio's sendfile costs a dup, a flush of the transport and a writer
    registered and removed each time, about 100 us for the few hundred bytes a follower's
    Fetch gets after one write (decision 0040), where a pread and one send take a few."""
    transport = connection.transport
    assert transport is not None
    loop = asyncio.get_running_loop()
    queued: list[bytes] = []
    for segment in segments:
        if isinstance(segment, bytes):
            queued.append(segment)
            continue
        if segment.length <= _INLINE_REGION_BYTES:
            queued.append(_read_region(segment))
            continue
        _write_queued(connection, queued)
        await connection.drain()
        if tls:
            await _write_region(connection, segment)
            continue
        with os.fdopen(os.dup(segment.fileno()), "rb") as file:
            sent = await loop.sendfile(transport, file, segment.position, segment.length)
        if sent != segment.length:
            raise ConnectionError(f"the file shrank while it was being sent ({sent} of {segment.length} bytes)")
    _write_queued(connection, queued)
    await connection.drain()


def _write_queued(connection: Connection, queued: list[bytes]) -> None:
    """The bytes gathered so far, in one write (emptying `queued`)."""
    if connection.closed:
        raise ConnectionError("connection closed")  # writing to it would only log warnings
    if queued:
        assert connection.transport is not None
        connection.transport.write(queued[0] if len(queued) == 1 else b"".join(queued))
        queued.clear()


def _read_region(region: Region) -> bytes:
    """A small region's bytes, read whole (pread: no file position shared with others)."""
    data = os.pread(region.fileno(), region.length, region.position)
    if len(data) != region.length:
        raise ConnectionError(f"the file shrank while it was being sent ({len(data)} of {region.length} bytes)")
    return data


async def _write_region(connection: Connection, region: Region) -> None:
    """A file region through a TLS transport: asyncio's sendfile fallback swaps the
    transport's protocol while it runs, which a TLS transport carrying a buffered protocol
    does not survive, so the region is read in pieces (pread, no seek shared with others)."""
    transport = connection.transport
    assert transport is not None
    position, end = region.position, region.position + region.length
    while position < end:
        piece = os.pread(region.fileno(), min(_TLS_PIECE, end - position), position)
        if not piece:
            raise ConnectionError(f"the file shrank while it was being sent ({position - region.position} of "
                                  f"{region.length} bytes)")
        transport.write(piece)
        position += len(piece)
        await connection.drain()
