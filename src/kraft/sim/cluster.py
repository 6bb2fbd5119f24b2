"""The simulated cluster: its nodes and the wires between them.

The cluster is the transport: it routes each request a node's core sends, and each reply,
through the faulty network to the node it names (a reply goes back to the incarnation that
asked; a restarted node never sees its former life's answers). It holds no history and
judges nothing.
"""

from typing import Any

from kraft.raft import Reply, Send
from kraft.sim.network import Network
from kraft.sim.simulated_node import SimNode

OPERATOR = "operator"  # the handle of an operator's request (AddRaftVoter, RemoveRaftVoter)


class Cluster:
    def __init__(self, network: Network, voter_ids: tuple[int, ...]) -> None:
        self.network = network
        self.initial_voters = voter_ids
        self.ever_voters = set(voter_ids)  # every node some leader's voter set has named
        self.nodes: dict[int, SimNode] = {}
        self.operator_answers: list[tuple[int, Any]] = []  # (time, response) of operator requests

    @property
    def voter_ids(self) -> tuple[int, ...]:
        """The voters now: the latest set of the newest leader (KIP-853), else the first."""
        leaders = [n.core for n in self.leaders() if n.core is not None]
        if not leaders:
            return self.initial_voters
        ids = max(leaders, key=lambda c: c.epoch).voters.ids
        self.ever_voters.update(ids)
        return ids

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]

    def deliver_request(self, sender: SimNode, send: Send) -> None:
        # controller.quorum.bootstrap.servers: -2, -3, ... are the first voters' addresses
        to = send.destination if send.destination >= 0 else self.initial_voters[-2 - send.destination]
        destination = self.nodes[to]
        handle = (sender.node_id, sender.incarnation, send.request_id)

        def arrive() -> None:
            destination.step(lambda core, now: core.handle_request(handle, send.request, now))

        self.network.send(sender.node_id, to, arrive)

    def deliver_reply(self, replier: SimNode, reply: Reply) -> None:
        if reply.handle[0] == OPERATOR:
            self.operator_answers.append((reply.handle[1], reply.response))
            return
        source_id, incarnation, request_id = reply.handle
        source = self.nodes[source_id]
        self.network.send(replier.node_id, source_id, lambda: source.receive_reply(reply, request_id, incarnation))
