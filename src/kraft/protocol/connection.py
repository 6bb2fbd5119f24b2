"""A client connection speaking Kafka's protocol: requests out, responses matched by
correlation id, several in flight at once. Used for peer RPCs and by kraft's tools."""

import asyncio
import itertools
import logging
import struct
from typing import Any

from kraft.protocol.codec import decode_response, encode_request, response_class
from kraft.protocol.errors import ProtocolError
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, read_frame

log = logging.getLogger("kraft.protocol.connection")
_CORRELATION_ID = struct.Struct(">i")


class KafkaConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str, max_frame_bytes: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future, type]] = {}
        self._closed: BaseException | None = None
        self._read_task = asyncio.create_task(self._read_loop())

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "kraft",
        timeout: float = 5.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> "KafkaConnection":
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        return cls(reader, writer, client_id, max_frame_bytes)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def request(self, request: Any, timeout: float | None = None) -> Any:
        """Sends `request` and waits for its response (of the same API version)."""
        if self._closed is not None:
            raise ConnectionError(f"connection closed: {self._closed}")
        correlation_id = next(self._ids)
        cls = type(request)
        future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, response_class(cls.__api_key__, cls.__version__))
        try:
            self._writer.write(encode_request(request, correlation_id, self.client_id))
            await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self) -> None:
        try:
            while True:
                body = await read_frame(self._reader, self.max_frame_bytes)
                if len(body) < 4:
                    raise ProtocolError(f"response frame of {len(body)} bytes")
                (correlation_id,) = _CORRELATION_ID.unpack_from(body)
                entry = self._pending.get(correlation_id)
                if entry is None:
                    continue  # its request timed out and was forgotten
                future, cls = entry
                _, response = decode_response(body, cls)
                if not future.done():
                    future.set_result(response)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            self._fail(ConnectionError(f"connection lost: {e}"))
        except ProtocolError as e:
            log.warning("closing connection: %s", e)
            self._fail(e)
        except asyncio.CancelledError:
            self._fail(ConnectionError("connection closed"))
            raise

    def _fail(self, error: BaseException) -> None:
        self._closed = error
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        self._writer.close()

    def close(self) -> None:
        if self._closed is None:
            self._read_task.cancel()
            self._fail(ConnectionError("connection closed"))
