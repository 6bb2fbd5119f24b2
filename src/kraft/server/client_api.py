"""The client listener: what Kafka clients and kraft's tools ask a node.

DescribeQuorum is answered by the core (the leader knows every replica's state).
"""

from typing import TYPE_CHECKING, Any

from kraft.protocol import KafkaServer

if TYPE_CHECKING:
    from kraft.server.node import KraftNode


class ClientApi:
    def __init__(self, node: "KraftNode") -> None:
        self.node = node

    def register(self, server: KafkaServer) -> None:
        server.register(55, 1, 1, self.describe_quorum)

    def register_controller_apis(self, server: KafkaServer) -> None:
        """APIs a broker sends to the controller listener (registration, heartbeats)."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    async def describe_quorum(self, header: Any, request: Any) -> Any:
        return await self.node.handle_raft_request(header, request)

