"""An asyncio server for Kafka's wire protocol: frames in, handlers, frames out.

Later layers register a handler per API key with the versions they really serve; the
server answers ApiVersions from that registry, so it never advertises what it cannot do.

Requests on one connection are answered in order, one at a time, as Kafka's brokers do:
a long-polling Fetch holds its connection until it is answered, so a node's peers send
their Fetches on one connection and their election requests on another (see
kraft.server.peers), and a Vote never waits behind a parked Fetch.

A frame that cannot be served (too large, malformed, an API or version we do not speak)
closes only its own connection, after a log line that says why; every other connection
goes on. The one exception, from KIP-511: an ApiVersions request of a version we do not
know gets an ApiVersions v0 response with UNSUPPORTED_VERSION and our ranges, so the
client can retry with a version both sides speak.
"""

import asyncio
import logging
import os
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.index import load_payload_module
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.static.constants import EntityType
from kio.static.primitive import i16

from kraft.protocol.codec import api_name, decode_request, encode_response, peek_api, response_class
from kraft.protocol.regions import Segment, encode_response_segments
from kraft.protocol.tasks import cancel_and_wait
from kraft.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, read_frame

log = logging.getLogger("kraft.protocol.server")

API_VERSIONS = 18
_CORRELATION_ID = struct.Struct(">i")

Handler = Callable[[Any, Any], Awaitable[Any]]
"""async (request_header, request) -> response entity of the request's version, or None
when the client expects no answer (Produce with acks=0)."""


@dataclass(frozen=True)
class Endpoint:
    min_version: int
    max_version: int
    handler: Handler


class KafkaServer:
    """One listener speaking Kafka's protocol to whoever connects."""

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, name: str = "listener") -> None:
        self.max_frame_bytes = max_frame_bytes
        self.name = name
        self._endpoints: dict[int, Endpoint] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self.register(API_VERSIONS, 0, 4, self._api_versions)

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Serves `api_key` in [min_version, max_version] with `handler`."""
        for version in (min_version, max_version):
            response_class(api_key, version)  # fails now, not on the first request, if kio lacks it
        self._endpoints[api_key] = Endpoint(min_version, max_version, handler)

    def api_versions(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) for every API served, in key order."""
        return sorted((key, e.min_version, e.max_version) for key, e in self._endpoints.items())

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Starts listening; returns the bound address (port 0 picks a free port)."""
        self._server = await asyncio.start_server(self._serve_connection, host, port)
        bound = self._server.sockets[0].getsockname()
        log.info("%s listening on %s:%d", self.name, bound[0], bound[1])
        return bound[0], bound[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        await cancel_and_wait(self._connections)

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        try:
            while True:
                body = await read_frame(reader, self.max_frame_bytes)
                await _write_segments(writer, await self._respond(body))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing; ending quietly keeps asyncio from logging it as an error
        except ProtocolError as e:
            log.warning("%s: closing connection from %s: %s", self.name, peer, e)
        except Exception:
            log.exception("%s: closing connection from %s after a handler failed", self.name, peer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _respond(self, body: bytes) -> list[Segment]:
        api_key, version = peek_api(body)
        endpoint = self._endpoints.get(api_key)
        if endpoint is None:
            raise UnsupportedVersionError(api_key, version, f": {api_name(api_key)} is not served here")
        if not endpoint.min_version <= version <= endpoint.max_version:
            if api_key == API_VERSIONS and len(body) >= 8:
                (correlation_id,) = _CORRELATION_ID.unpack_from(body, 4)
                return [encode_response(correlation_id, self._unsupported_api_versions())]
            raise UnsupportedVersionError(
                api_key, version, f": {api_name(api_key)} is served in v{endpoint.min_version}-v{endpoint.max_version}"
            )
        header, request = decode_request(body)
        response = await endpoint.handler(header, request)
        if response is None:
            return []
        return encode_response_segments(header.correlation_id, response)

    def _unsupported_api_versions(self) -> Any:
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
        return schema.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=keys, throttle_time=timedelta(0))


async def _write_segments(writer: asyncio.StreamWriter, segments: list[Segment]) -> None:
    """Writes a response: bytes as they are, regions with os.sendfile (file to socket)."""
    loop = asyncio.get_running_loop()
    for segment in segments:
        if isinstance(segment, bytes):
            writer.write(segment)
            continue
        await writer.drain()
        with os.fdopen(os.dup(segment.fileno()), "rb") as file:
            sent = await loop.sendfile(writer.transport, file, segment.position, segment.length)
        if sent != segment.length:
            raise ConnectionError(f"the file shrank while it was being sent ({sent} of {segment.length} bytes)")
    await writer.drain()
