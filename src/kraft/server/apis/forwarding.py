"""Admin writes sent to any node reach the active controller: a node that is not it forwards them.

Kafka's brokers forward CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
IncrementalAlterConfigs to the active controller (KIP-590: ForwardingManager, KafkaApis'
maybeForwardToController), so an admin client may send them to any broker and never sees
NOT_CONTROLLER because of where it sent them. kraft does the same on every node's client
listener:

- **The active controller is the Raft leader** (the core's leader id), reached at its
  endpoint in controller.quorum.voters. One connection to it is kept and reused; a new one
  is made when the leader changes or the connection breaks.
- **The request travels in an Envelope (API 58)**, as Kafka's do: the client's request
  header and body as they arrived (re-encoded), the client's principal (DefaultPrincipalData,
  version-prefixed, as Kafka's DefaultKafkaPrincipalBuilder writes it: `User:ANONYMOUS` on
  PLAINTEXT, the certificate's subject on SSL, the SASL user) and its address, both read from
  the connection's session (kraft.protocol.session). The controller unwraps it, answers with
  its own handler and sends the response back in the envelope, in the client's version,
  which this node passes on as it is. Envelope rather than a plain re-send, because the
  controller then knows who asked: ACLs (issue 20) authorize the forwarded request by that
  principal, as Kafka's controller does, and one Envelope handler serves every forwardable API.
- **Leadership moves are retried** within the request's timeout (its own, or 30 s): no
  leader known yet, a leader still catching up, a connection that fails, or an answer of
  NOT_CONTROLLER (an envelope sent to a controller that lost its leadership, which answers
  the envelope with NOT_CONTROLLER as Kafka's RequestChannel does) are each tried again
  after a short backoff, against whatever leader the core knows then. When the time runs out
  every item is answered REQUEST_TIMED_OUT, as Kafka's ForwardingManager answers a timeout.
  Like Kafka's, a retried CreateTopics whose first attempt committed after all answers
  TOPIC_ALREADY_EXISTS.
- **The leader answers its own clients itself**, without an envelope.
- **A client reads its write where it wrote it.** Before a forwarded success is passed on,
  this node applies the log up to the leader's high watermark as it was once the write
  committed (a DescribeQuorum sent right behind the envelope on the same connection, which
  the leader answers after it), within the request's timeout. Kafka's brokers answer as soon
  as the controller does, so an admin client that asks the same broker for the new topic's
  Metadata at once may not find it: kafkajs's createTopics then fails (against Kafka, the
  topic auto-creation Metadata asks for hides this; kraft creates no topic on Metadata).

On the controller listener the Envelope is served, and the forwardable APIs are served
directly (Kafka's controllers serve them to admin clients bootstrapped from controllers,
KIP-919); there a node that is not the active controller answers NOT_CONTROLLER, as
Kafka's controllers do, and such a client looks the controller up again.
"""

import asyncio
import dataclasses
import ipaddress
import logging
import time
from typing import Any, cast

from kio.schema.default_principal_data.v0 import DefaultPrincipalData
from prometheus_client import Counter

from kraft.protocol import ErrorCode, KafkaServer
from kraft.protocol.build import build_request, build_response
from kraft.protocol.codec import (
    api_name,
    decode,
    decode_request,
    decode_response,
    encode,
    response_class,
)
from kraft.protocol.connection import KafkaConnection
from kraft.protocol.protocol_errors import ProtocolError
from kraft.protocol.regions import Encoded, encode_response_segments
from kraft.protocol.session import SESSION, current_session
from kraft.raft import messages as m
from kraft.server.apis.admin import AdminApi, request_timeout_ms
from kraft.server.apis.context import NodeContext

log = logging.getLogger("kraft.server.forwarding")

ENVELOPE = 58
RETRY_BACKOFF_S = (0.05, 0.5)  # the first pause before a retry, doubling up to the second
CATCH_UP_POLL_S = 0.01
_PRINCIPAL_VERSION = b"\x00\x00"  # DefaultPrincipalData's version, before its bytes


_SHAPES: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _shape(kind: type) -> tuple[bool, tuple[str, ...]]:
    """(whether an entity of this type has an error_code, its other fields): read once per
    type, as dataclasses.fields is too slow for every answer the controller gives."""
    known = _SHAPES.get(kind)
    if known is None:
        names = tuple(field.name for field in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else ()
        known = _SHAPES[kind] = ("error_code" in names, tuple(name for name in names if name != "error_code"))
    return known


def _refused_as_not_controller(entity: Any) -> bool:
    if type(entity) is tuple:
        return any(_refused_as_not_controller(item) for item in entity)
    has_error_code, others = _shape(type(entity))
    if has_error_code and entity.error_code == ErrorCode.not_controller:
        return True
    return any(_refused_as_not_controller(getattr(entity, name)) for name in others)


def not_controller(response: Any) -> bool:
    """Whether any item, at any depth, was refused with NOT_CONTROLLER (Kafka's RequestChannel
    turns such an answer into an envelope-level NOT_CONTROLLER, so the forwarder retries elsewhere)."""
    if isinstance(response, Encoded):
        return ErrorCode.not_controller in response.errors
    return _refused_as_not_controller(response)


def principal_data(principal: str) -> bytes:
    """`Type:name` as an Envelope carries it."""
    type_, _, name = principal.partition(":")
    return _PRINCIPAL_VERSION + encode(DefaultPrincipalData(type_=type_, name=name, token_authenticated=False))


def address_bytes(host: str) -> bytes:
    """The client's address as an Envelope carries it (4 or 16 bytes; 0.0.0.0 if unknown)."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return bytes(4)


def address_text(data: bytes | None) -> str:
    """The address an Envelope carries, as text ("0.0.0.0" if it is not 4 or 16 bytes)."""
    try:
        return str(ipaddress.ip_address(bytes(data or b"")))
    except ValueError:
        return "0.0.0.0"


def principal_name(data: bytes | None) -> str:
    """`Type:name` of a forwarded principal; ValueError if it does not decode."""
    if data is None or data[:2] != _PRINCIPAL_VERSION:
        raise ValueError("not a DefaultPrincipalData v0")
    try:
        principal, end = decode(DefaultPrincipalData, data, 2)
    except ProtocolError as e:
        raise ValueError(str(e)) from None
    if end != len(data):
        raise ValueError(f"{len(data) - end} bytes after the principal")
    return f"{principal.type_}:{principal.name}"


def _discard(future: asyncio.Future) -> None:
    """Cancels a request whose answer is no longer wanted, and takes any error it ended with
    (a failed connection fails every request on it), so that none is logged as unretrieved."""
    future.cancel()
    if future.done() and not future.cancelled():
        future.exception()


class Forwarding:
    def __init__(self, node: NodeContext, admin: AdminApi) -> None:
        self.node = node
        self.admin = admin
        self._connection: KafkaConnection | None = None
        self._controller: int | None = None  # the node `_connection` reaches
        self._connecting = asyncio.Lock()
        self.forwarded = Counter("kraft_forwarded_requests", "Admin requests this node forwarded to the active "
                                 "controller, by API", ["api"], registry=node.metrics.registry)

    def register(self, server: KafkaServer) -> None:
        """The forwardable writes on the client listener: here, or forwarded."""
        for key, (low, high, _, _) in self.admin.forwardable.items():
            server.register(key, low, high, self.serve)

    def register_controller(self, server: KafkaServer) -> None:
        server.register(ENVELOPE, 0, 0, self.envelope)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # ---------------------------------------------------------------- the forwarding node

    async def serve(self, header: Any, request: Any) -> Any:
        """The answer of the active controller, wherever it is, within the request's timeout."""
        deadline = time.monotonic() + request_timeout_ms(request) / 1000
        backoff = RETRY_BACKOFF_S[0]
        why = "no leader is known"
        while True:
            remaining = deadline - time.monotonic()
            try:
                response, why = await self._attempt(header, request, remaining)
                if response is not None:
                    return response
            except (OSError, ConnectionError, TimeoutError) as e:
                self.close()
                why = f"{type(e).__name__}: {e}"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, RETRY_BACKOFF_S[1])
        log.info("node %d: %s v%d not forwarded in time (%s)", self.node.node_id,
                 api_name(header.request_api_key), header.request_api_version, why)
        return self.admin.refusal(header, request, ErrorCode.request_timed_out,
                                  f"The active controller could not be reached in time: {why}")

    async def _attempt(self, header: Any, request: Any, timeout_s: float) -> tuple[Any | None, str]:
        """(the answer, or None to try again; why not)."""
        leader = self.node.leader_id
        if leader is None:
            return None, "no leader is known"
        if leader == self.node.node_id:
            if not self.node.controller.active:
                return None, "this node leads but is catching up with the previous epochs"
            response = await self.admin.forwardable[header.request_api_key][2](header, request)
            return (None, "leadership moved") if not_controller(response) else (response, "")
        connection = await self._connection_to(leader)
        session = current_session()
        envelope = build_request(ENVELOPE, 0, {"request_data": encode(header) + encode(request),
                                               "request_principal": principal_data(session.principal),
                                               "client_host_address": address_bytes(session.client_address[0])})
        self.forwarded.labels(api_name(header.request_api_key)).inc()
        timeout_s = max(timeout_s, 0.001)
        probe = asyncio.ensure_future(connection.request(m.describe_quorum_request(), timeout_s))
        try:
            answer = await connection.request(envelope, timeout_s)
            if answer.error_code == ErrorCode.not_controller:
                return None, f"node {leader} is no longer the active controller"
            if answer.error_code != ErrorCode.none or answer.response_data is None:
                return self.admin.refusal(header, request, ErrorCode.unknown_server_error,
                                          f"The controller refused the forwarded request: {answer.error_code.name}"), ""
            await self._catch_up(probe, time.monotonic() + timeout_s)
        finally:
            _discard(probe)
        cls = response_class(header.request_api_key, header.request_api_version)
        return decode_response(answer.response_data, cls)[1], ""

    async def _catch_up(self, probe: asyncio.Future, deadline: float) -> None:
        """Waits until this node has applied the log up to the high watermark `probe` (the
        leader's DescribeQuorum answer) gives, or the deadline passes: the write went through
        either way, and a node cut off from the leader must still answer."""
        try:
            state = (await probe).topics[0].partitions[0]
        except (OSError, ConnectionError, TimeoutError):
            return
        if state.error_code != ErrorCode.none:
            return
        while self.node.applied_offset < state.high_watermark - 1 and time.monotonic() < deadline:
            await asyncio.sleep(CATCH_UP_POLL_S)

    async def _connection_to(self, leader: int) -> KafkaConnection:
        """The one connection to the controller, made again when the leader changed or it broke."""
        async with self._connecting:
            if self._controller != leader or self._connection is None or self._connection.closed:
                self.close()
                endpoint = self.node.peer_endpoint(leader)
                if endpoint is None:
                    raise ConnectionError(f"no endpoint known for controller {leader}")
                self._connection = await self.node.controller_connector.connect(
                    endpoint, client_id=f"kraft-forwarding-{self.node.node_id}")
                self._controller = leader
            return self._connection

    async def ask_leader(self, request: Any, timeout_s: float) -> Any:
        """`request` sent as it is to the Raft leader's controller listener (DescribeQuorum,
        which Kafka's brokers forward too); ConnectionError or TimeoutError if it cannot be."""
        leader = self.node.leader_id
        if leader is None or leader == self.node.node_id:
            raise ConnectionError("no other node is known to lead")
        connection = await self._connection_to(leader)
        return await connection.request(request, timeout_s)

    # ---------------------------------------------------------------- the controller

    async def envelope(self, header: Any, request: Any) -> Any:
        """A forwarded request, answered by this node's admin handler: with NOT_CONTROLLER at
        the envelope's level when it is not the active controller (or lost the leadership
        while answering). A request that does not parse is UNSUPPORTED_VERSION, an API that
        is not forwardable INVALID_REQUEST, a principal that does not decode
        PRINCIPAL_DESERIALIZATION_FAILURE: Kafka's EnvelopeUtils' answers."""
        def answer(error: ErrorCode, data: bytes | None = None) -> Any:
            return build_response(ENVELOPE, header.request_api_version, {"response_data": data, "error_code": error})

        try:
            inner_header, inner = decode_request(request.request_data)
        except ProtocolError as e:
            log.info("node %d: a forwarded request does not parse: %s", self.node.node_id, e)
            return answer(ErrorCode.unsupported_version)
        served = self.admin.forwardable.get(inner_header.request_api_key)
        if served is None:
            return answer(ErrorCode.invalid_request)
        low, high, handler, _ = served
        if not low <= inner_header.request_api_version <= high:
            return answer(ErrorCode.unsupported_version)
        try:
            principal = principal_name(request.request_principal)
        except ValueError as e:
            log.info("node %d: a forwarded request's principal does not decode: %s", self.node.node_id, e)
            return answer(ErrorCode.principal_deserialization_failure)
        # The inner request is the client's: it is authorized as the principal the envelope carries.
        client = dataclasses.replace(current_session(), principal=principal,
                                     client_address=(address_text(request.client_host_address), 0))
        token = SESSION.set(client)
        try:
            response = await handler(inner_header, inner)
        finally:
            SESSION.reset(token)
        if not_controller(response):
            return answer(ErrorCode.not_controller)
        frame = encode_response_segments(inner_header.correlation_id, response)  # bytes alone: no region here
        return answer(ErrorCode.none, b"".join(cast(list[bytes], frame))[4:])
