"""The broker side of the lifecycle: register with the active controller, then heartbeat.

Every node with the broker role (observers, and voters in combined mode) registers its
client listener, so Metadata responses can list it and clients can reach it. It finds
the active controller through the Raft leader it follows, and starts over (registers
again) when the controller no longer knows its epoch. On a clean stop it asks to be fenced,
so the metadata says at once that it is gone.
"""

import asyncio
import logging
import uuid
from typing import Any

from kraft.metadata.features import SUPPORTED
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection
from kraft.protocol.limits import Throttled
from kraft.protocol.tasks import cancel_and_wait
from kraft.server.apis.context import NodeContext

log = logging.getLogger("kraft.server.broker")

REGISTRATION_VERSION, HEARTBEAT_VERSION = 3, 1
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol ids


class BrokerLifecycle:
    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.incarnation = uuid.uuid4()
        self.epoch: int | None = None
        self.fenced = True
        self._connection: KafkaConnection | None = None
        self._controller: int | None = None
        self._task: asyncio.Task | None = None
        # A refusal repeats every retry (every 200 ms): said once, then summed up every 30 s.
        self._refusals = Throttled(log, f"node {node.node_id}", "broker registrations refused", window_s=30.0)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self.epoch is not None and not self.node.failure:
            try:
                await asyncio.wait_for(self._heartbeat(want_shut_down=True), 1.0)
            except (TimeoutError, OSError, ConnectionError):
                pass
        if self._connection is not None:
            self._connection.close()

    async def _request(self, request: Any) -> Any:
        leader = self.node.leader_id
        if leader is None:
            raise ConnectionError("no controller known yet")
        if self._controller != leader or self._connection is None or self._connection.closed:
            if self._connection is not None:
                self._connection.close()
            endpoint = self.node.peer_endpoint(leader)
            if endpoint is None:
                raise ConnectionError(f"no endpoint known for controller {leader}")
            self._connection = await self.node.controller_connector.connect(
                endpoint, client_id=f"kraft-broker-{self.node.node_id}")
            self._controller = leader
        return await self._connection.request(request, 5.0)

    async def _register(self) -> None:
        host, port = self.node.advertised_client_address or ("127.0.0.1", 0)
        request = build_request(62, REGISTRATION_VERSION, {
            "broker_id": self.node.node_id,
            "cluster_id": self.node.cluster_id,
            "incarnation_id": self.incarnation,
            "listeners": [{"name": self._listener_name(), "host": host, "port": port,
                           "security_protocol": SECURITY_PROTOCOL_IDS[self._protocol()]}],
            "features": [{"name": name, "min_supported_version": low, "max_supported_version": high}
                         for name, (low, high) in sorted(SUPPORTED.items())],
            "rack": None,
            "log_dirs": [],
            "previous_broker_epoch": self.epoch if self.epoch is not None else -1,
        })
        response = await self._request(request)
        if response.error_code == ErrorCode.none:
            self.epoch = response.broker_epoch
            log.info("node %d registered as a broker with epoch %d", self.node.node_id, self.epoch)
        else:
            self._refusals.event("broker registration refused: %s", response.error_code.name)

    def _listener_name(self) -> str:
        """The client listener's name: Metadata answers list brokers' endpoints by it."""
        listener = self.node.config.client_listener
        return listener.name if listener is not None else "PLAINTEXT"

    def _protocol(self) -> str:
        listener = self.node.config.client_listener
        return self.node.config.protocol(listener) if listener is not None else "PLAINTEXT"

    async def _heartbeat(self, want_shut_down: bool = False) -> None:
        request = build_request(63, HEARTBEAT_VERSION, {
            "broker_id": self.node.node_id,
            "broker_epoch": self.epoch,
            "current_metadata_offset": self.node.applied_offset,
            "want_fence": want_shut_down,
            "want_shut_down": want_shut_down,
            "offline_log_dirs": [],
        })
        response = await self._request(request)
        if response.error_code in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
            self.epoch = None  # the controller lost our registration: register again
        elif response.error_code == ErrorCode.none and response.is_fenced != self.fenced:
            self.fenced = response.is_fenced
            log.info("node %d is %s", self.node.node_id, "fenced" if self.fenced else "unfenced: serving")

    async def _run(self) -> None:
        interval = self.node.config.broker_heartbeat_interval_ms / 1000
        while True:
            try:
                if self.epoch is None:
                    await self._register()
                else:
                    await self._heartbeat()
            except (TimeoutError, OSError, ConnectionError):
                self._controller = None
            await asyncio.sleep(interval if self.epoch is not None else min(interval, 0.2))
