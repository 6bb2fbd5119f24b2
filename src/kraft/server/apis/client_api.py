"""The client listener: what Kafka clients and kraft's tools ask a node.

DescribeQuorum and FetchSnapshot are answered by the core (the leader knows every
replica's state, and serves its snapshots to any reader as to replicas: a consumer whose
position retention removed goes on from the snapshot the log starts at); the admin
writes by the active controller (admin.py), to which any other node forwards them
(forwarding.py); consumers' reads of the metadata log by client_reads.py, configs by
describe_configs.py, the cluster by describe_cluster.py (on both listeners); this node's own
broker registration and heartbeats run from broker.py. Each sees the node only through its
NodeContext (context.py).
"""

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.protocol import KafkaServer
from kraft.raft.membership_messages import AddRaftVoterRequest, MembershipRequest, response_for
from kraft.server.apis.admin import AdminApi
from kraft.server.apis.broker import BrokerLifecycle
from kraft.server.apis.client_reads import ClientReads
from kraft.server.apis.context import NodeContext
from kraft.server.apis.describe_cluster import DescribeCluster
from kraft.server.apis.describe_configs import DescribeConfigs
from kraft.server.apis.forwarding import Forwarding
from kraft.server.apis.raft_versions import RaftVersions


class ClientApi:
    def __init__(self, node: NodeContext, versions: RaftVersions) -> None:
        self.node = node
        self.versions = versions
        self.admin = AdminApi(node)
        self.reads = ClientReads(node)
        self.configs = DescribeConfigs(node)
        self.cluster = DescribeCluster(node, self.reads.brokers, self.reads.fenced_brokers)
        self.forwarding = Forwarding(node, self.admin)
        self.broker = BrokerLifecycle(node) if node.config.is_broker else None

    def register(self, server: KafkaServer) -> None:
        self.versions.register(server, "DescribeQuorum", self.describe_quorum)
        self.versions.register(server, "FetchSnapshot", self.fetch_snapshot, name_leader=False)
        self.versions.register(server, "AddRaftVoter", self.change_voters)
        self.versions.register(server, "RemoveRaftVoter", self.change_voters)
        self.forwarding.register(server)
        self.admin.register_reads(server)
        self.reads.register(server)
        self.configs.register(server)
        self.cluster.register(server)

    def register_controller_apis(self, server: KafkaServer) -> None:
        """APIs other nodes send to the controller listener: registration, heartbeats and
        forwarded admin writes (Envelope); the admin writes themselves, their reads,
        DescribeConfigs and DescribeCluster, which Kafka's controllers serve to admin clients
        that bootstrap from controllers (KIP-919: kafka-configs --bootstrap-controller)."""
        self.versions.register(server, "DescribeQuorum", self.describe_quorum_here)
        self.admin.register_broker_apis(server)
        self.admin.register(server)
        self.admin.register_reads(server)
        self.forwarding.register_controller(server)
        self.configs.register(server)
        self.cluster.register(server)

    def start(self) -> None:
        self.admin.start()
        if self.broker is not None:
            self.broker.start()

    async def stop(self) -> None:
        self.admin.stop()
        self.forwarding.close()
        if self.broker is not None:
            await self.broker.stop()

    async def describe_quorum(self, header: Any, request: Any) -> Any:
        """On the client listener, a node that does not lead asks the leader, as Kafka's
        brokers forward DescribeQuorum to the controller: clients (kafka-python's
        describe_metadata_quorum) send it to any broker."""
        return await self._describe_quorum(header, request, forward=True)

    async def describe_quorum_here(self, header: Any, request: Any) -> Any:
        """On the controller listener: this node's own answer, never forwarded again."""
        return await self._describe_quorum(header, request, forward=False)

    async def _describe_quorum(self, header: Any, request: Any, forward: bool) -> Any:
        """The core's answer to the request in the core's version (raft_versions.py converts
        from and to the version asked), the leader's when `forward` and another node leads."""
        if forward and not self.node.is_leader and self.node.leader_id is not None:
            try:
                return await self.forwarding.ask_leader(
                    request, self.node.config.controller_quorum_request_timeout_ms / 1000)
            except (ConnectionError, TimeoutError, OSError):
                pass  # this node's own answer names the leader it knows
        return await self.node.handle_raft_request(header, request)

    async def change_voters(self, header: Any, request: MembershipRequest) -> Any:
        """AddRaftVoter and RemoveRaftVoter on the client listener: Kafka's brokers forward
        them to the controller (`kafka-metadata-quorum --bootstrap-server`), once the caller
        passed this listener's check (ALTER on the cluster, authorization.py)."""
        timeout_s = self.node.config.controller_quorum_request_timeout_ms / 1000
        if isinstance(request, AddRaftVoterRequest):
            timeout_s = max(timeout_s, request.timeout.total_seconds())
        if self.node.is_leader:
            return await self.node.handle_raft_request(header, request)
        try:
            return await self.forwarding.ask_leader(request, timeout_s + 1)
        except (ConnectionError, TimeoutError, OSError) as e:
            return response_for(request, ErrorCode.request_timed_out, f"the controller could not be asked: {e}")

    async def fetch_snapshot(self, header: Any, request: Any) -> Any:
        """The core's answer, fenced by the leader epoch as on the controller listener; on this
        listener every fetcher is a consumer, so its ReplicaId is taken as -1 and never counts
        as a voter's contact (check quorum), and a snapshot holding SCRAM credentials is
        served without them (credential_redaction.py)."""
        answer = await self.node.handle_raft_request(header, dataclasses.replace(request, replica_id=-1))
        redact = self.reads.redaction.snapshot_partition
        return dataclasses.replace(answer, topics=tuple(
            dataclasses.replace(t, partitions=tuple(redact(p) for p in t.partitions)) for t in answer.topics))

