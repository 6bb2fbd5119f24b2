"""The admin tools' client, as Kafka's admin client behaves for them: a bootstrap node
asked first, other nodes reached by the addresses its Metadata answer lists, each request
sent at the highest version both sides speak, group requests sent to the group's
coordinator (FindCoordinator), error codes raised as Kafka's exceptions (kafka_errors.py).

`--bootstrap-controller` (KIP-919) talks to controller listeners: every node found is a
controller, named by DescribeCluster with the controllers' endpoint type, and requests go
to the active controller that DescribeCluster names, as Kafka's admin client sends them.
"""

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from kraft.cli.admin_connection import (
    UNREACHABLE,
    ClientSettings,
    NodeConnection,
    Reported,
    ToolError,
    UsageError,
    first_answering,
    parse_addresses,
)
from kraft.cli.kafka_errors import KafkaError, check
from kraft.protocol.build import build_request
from kraft.protocol.codec import api_name

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60
BROKERS, CONTROLLERS = 1, 2  # DescribeCluster's endpoint types (KIP-919)
GROUP_KEY = 0
T = TypeVar("T")


@dataclass(frozen=True)
class Node:
    """A node as Kafka's admin client names it (Node.toString, host:port (id: N rack: r))."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def bootstrap_of(bootstrap_server: str | None, bootstrap_controller: str | None,
                 required: str = "--bootstrap-server must be specified") -> tuple[list[tuple[str, int]], int]:
    """The addresses to start from, and whether they are brokers' or controllers'."""
    if bootstrap_controller is not None:
        return parse_addresses("--bootstrap-controller", bootstrap_controller), CONTROLLERS
    if bootstrap_server is None:
        raise UsageError(required)
    return parse_addresses("--bootstrap-server", bootstrap_server), BROKERS


class Admin:
    """One tool run's connections: the bootstrap node's, and others opened as needed."""

    def __init__(self, bootstrap: list[tuple[str, int]], settings: ClientSettings, endpoint_type: int = BROKERS):
        self.bootstrap = bootstrap
        self.settings = settings
        self.endpoint_type = endpoint_type
        self._first: NodeConnection | None = None
        self._by_address: dict[tuple[str, int], NodeConnection] = {}

    async def __aenter__(self) -> "Admin":
        kind = "controller" if self.endpoint_type == CONTROLLERS else "server"
        self._first = await first_answering(self.bootstrap, self.settings, kind)
        self._by_address[self._first.address] = self._first
        if self.endpoint_type == CONTROLLERS:
            # Through controllers every request goes to the active one, as Kafka's admin
            # client sends them: a controller that is not active refuses writes.
            active = await self.describe_cluster()
            found = next((b for b in active.brokers if b.broker_id == active.controller_id), None)
            if found is not None:
                self._first = await self.connection(found.host, found.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for connection in self._by_address.values():
            connection.close()

    @property
    def first(self) -> NodeConnection:
        assert self._first is not None, "used outside `async with`"
        return self._first

    async def connection(self, host: str, port: int) -> NodeConnection:
        address = (host, port)
        if address not in self._by_address:
            try:
                self._by_address[address] = await NodeConnection.open(address, self.settings)
            except UNREACHABLE as e:
                raise ToolError(f"the node at {host}:{port} cannot be reached: {e}") from None
        return self._by_address[address]

    async def call(self, api_key: int, ours: range, data: dict[str, Any], node: NodeConnection | None = None) -> Any:
        """The answer to `api_key` at the highest version in `ours` that `node` (the first
        node by default) serves; UnsupportedVersionException as Kafka's client raises it
        when there is none."""
        node = node or self.first
        version = node.highest(api_key, ours)
        if version is None:
            raise KafkaError(35, f"The node does not support {api_name(api_key)}")
        try:
            return await node.ask(build_request(api_key, version, data))
        except UNREACHABLE as e:
            raise ToolError(f"{api_name(api_key)} to {node.where} failed: {e or type(e).__name__}") from None

    # ---------------------------------------------------------------- the cluster

    async def metadata(self, topics: Iterable[str] | None = None) -> Any:
        """Metadata for `topics` (every topic if None)."""
        return await self.call(METADATA, range(1, 13), {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})

    async def describe_cluster(self) -> Any:
        answer = await self.call(DESCRIBE_CLUSTER, range(0, 2), {
            "include_cluster_authorized_operations": False, "endpoint_type": self.endpoint_type})
        check(answer.error_code, answer.error_message)
        return answer

    async def nodes(self) -> list[Node]:
        """The live brokers (or, through controllers, the controllers), as DescribeCluster
        lists them."""
        answer = await self.describe_cluster()
        return [Node(b.broker_id, b.host, b.port, b.rack) for b in answer.brokers]

    async def node(self, node_id: int) -> NodeConnection:
        found = next((n for n in await self.nodes() if n.node_id == node_id), None)
        if found is None:
            raise KafkaError(3, f"node {node_id} is not a live broker of the cluster")
        return await self.connection(found.host, found.port)

    async def on_every_node(self, action: Callable[[NodeConnection], Awaitable[T]]) -> list[T]:
        """`action` on each live node, one after another (Kafka's listConsumerGroups asks
        every broker)."""
        results = []
        for n in await self.nodes():
            results.append(await action(await self.connection(n.host, n.port)))
        return results

    async def coordinator(self, group_id: str) -> tuple[Node, NodeConnection]:
        """The group's coordinator (FindCoordinator), retried while it is being elected or
        loading, within the request timeout."""
        deadline = asyncio.get_running_loop().time() + self.settings.request_timeout_s
        while True:
            answer = await self.call(FIND_COORDINATOR, range(0, 5), {
                "key": group_id, "key_type": GROUP_KEY, "coordinator_keys": [group_id]})
            found = answer.coordinators[0] if hasattr(answer, "coordinators") else answer
            if found.error_code == 0:
                node = Node(found.node_id, found.host, found.port)
                return node, await self.connection(node.host, node.port)
            if found.error_code not in (14, 15) or asyncio.get_running_loop().time() >= deadline:
                check(found.error_code, found.error_message)
            await asyncio.sleep(0.1)


def run_tool(args: argparse.Namespace, check: Callable[[argparse.Namespace], None],
             work: Callable[[argparse.Namespace], Coroutine[Any, Any, None]],
             failed: Callable[[KafkaError | ToolError], None]) -> int:
    """A tool's run and its exit status: Kafka's usage line on stderr, an error the tool
    has printed already (Reported), or `failed` printing one as Kafka's tool does; 1 for
    each, never a traceback."""
    try:
        check(args)
        asyncio.run(work(args))
    except UsageError as e:
        print(e, file=sys.stderr)
        return 1
    except Reported:
        return 1
    except (KafkaError, ToolError) as e:
        failed(e)
        return 1
    return 0
