"""The simulated cluster: its nodes and the wires between them.

The cluster is the transport: it routes each request a node's core sends, and each reply,
through the faulty network to the node it names (a reply goes back to the incarnation that
asked; a restarted node never sees its former life's answers). It holds no history and
judges nothing.
"""

from kraft.raft import Reply, Send
from kraft.sim.network import Network
from kraft.sim.node import SimNode


class Cluster:
    def __init__(self, network: Network, voter_ids: tuple[int, ...]) -> None:
        self.network = network
        self.voter_ids = voter_ids
        self.nodes: dict[int, SimNode] = {}

    @property
    def majority(self) -> int:
        return len(self.voter_ids) // 2 + 1

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]

    def deliver_request(self, sender: SimNode, send: Send) -> None:
        destination = self.nodes[send.destination]
        handle = (sender.node_id, sender.incarnation, send.request_id)

        def arrive() -> None:
            destination.step(lambda core, now: core.handle_request(handle, send.request, now))

        self.network.send(sender.node_id, send.destination, arrive)

    def deliver_reply(self, replier: SimNode, reply: Reply) -> None:
        source_id, incarnation, request_id = reply.handle
        source = self.nodes[source_id]
        self.network.send(replier.node_id, source_id, lambda: source.receive_reply(reply, request_id, incarnation))
