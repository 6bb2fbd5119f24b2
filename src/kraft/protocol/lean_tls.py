"""TLS on an accepted socket, as asyncio's, without asyncio's 256 KiB buffer per connection.

asyncio's SSLProtocol gives every connection a bytearray of 256 KiB that the socket is read
into before the bytes go to its TLS object's incoming BIO. Idle connections keep it for
their whole life: 1,000 idle TLS connections cost a node 280 MB, and the allocator kept
that memory once they closed (issue 25, measured with a node process). The bytes stay in
that buffer only between the socket read and the BIO write, both within one callback of the
event loop (`get_buffer`, `recv_into`, `buffer_updated`), so one buffer per thread serves
every connection: `LeanTLS` is asyncio's protocol reading into it.

`accept_tls` does what `loop.connect_accepted_socket(..., ssl=...)` does, with LeanTLS:
the handshake within the timeout, then the application protocol's `connection_made` with
the TLS transport. If this Python's SSLProtocol does not read through `_ssl_buffer_view`
(a CPython detail, checked once), asyncio's own protocol is used.
"""

import asyncio
import functools
import socket
import ssl
import threading
from asyncio import sslproto

READ_BYTES = 256 * 1024  # asyncio's read size (SSLProtocol.max_size), kept


class _Shared(threading.local):
    view: memoryview | None = None


_SHARED = _Shared()


def _shared_view() -> memoryview:
    view = _SHARED.view
    if view is None:
        view = _SHARED.view = memoryview(bytearray(READ_BYTES))
    return view


class LeanTLS(sslproto.SSLProtocol):
    """asyncio's SSLProtocol reading the socket into the thread's one buffer."""

    max_size = 0  # asyncio's __init__ allocates a buffer of this size: none

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.max_size = READ_BYTES  # type: ignore[misc]  # what asyncio reads per call, as before
        self._ssl_buffer_view = _shared_view()
        self._ssl_buffer = self._ssl_buffer_view.obj

    def get_buffer(self, n: int) -> memoryview:
        view = _shared_view()
        self._ssl_buffer_view = view  # buffer_updated reads what recv_into wrote here
        return view

    def _do_handshake(self) -> None:
        # A server's handshake begins with the client's hello: before a byte of it came,
        # asking OpenSSL to go on only makes it allocate its read buffers (24 KB a
        # connection that never says hello).
        if self._incoming.pending:  # type: ignore[attr-defined]
            super()._do_handshake()  # type: ignore[misc]


def _reads_through_the_view() -> bool:
    """Whether this Python's SSLProtocol moves what the socket gave it from
    `_ssl_buffer_view` (CPython 3.11+), and sizes its buffer by `max_size` when made."""
    protocol = sslproto.SSLProtocol
    return ("_ssl_buffer_view" in protocol.buffer_updated.__code__.co_names
            and "max_size" in protocol.__init__.__code__.co_names
            and "_do_handshake" in protocol.buffer_updated.__code__.co_names)


LEAN = _reads_through_the_view()


async def accept_tls(sock: socket.socket, protocol: asyncio.BaseProtocol, context: ssl.SSLContext,
                     handshake_timeout_s: float) -> None:
    """Serves `protocol` over TLS on the accepted `sock`, once the handshake succeeded;
    raises what the handshake raised (the socket's transport is then closed)."""
    loop = asyncio.get_running_loop()
    if not LEAN:
        await loop.connect_accepted_socket(lambda: protocol, sock, ssl=context,
                                           ssl_handshake_timeout=handshake_timeout_s)
        return
    waiter = loop.create_future()
    transport, _ = await loop.connect_accepted_socket(functools.partial(
        LeanTLS, loop, protocol, context, waiter, server_side=True, ssl_handshake_timeout=handshake_timeout_s), sock)
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
    finally:
        # A failed handshake's error is held by the waiter and holds this frame: without
        # the name, the connection's objects are freed by reference counting.
        del waiter
