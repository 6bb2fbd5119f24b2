"""DescribeCluster (API 60): the cluster id, the active controller, and its brokers or (KIP-919)
its controllers, on both listeners; v2 (KIP-1073) says which brokers are fenced, and lists the
fenced ones too when asked.

`kraft metadata-quorum --bootstrap-controller` and Kafka's own admin client with
bootstrap.controllers ask a controller listener for it: with endpoint type 2 the answer
lists the voters at their controller endpoints, which is how such a client finds the active
controller without any broker.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kraft.protocol import ErrorCode, KafkaServer
from kraft.protocol.build import build_response
from kraft.server.apis.context import NodeContext

DESCRIBE_CLUSTER = 60
BROKERS, CONTROLLERS = 1, 2  # DescribeClusterRequest.endpoint_type
_NO_OPERATIONS = -(2**31)  # cluster_authorized_operations when not asked


class DescribeCluster:
    def __init__(self, node: NodeContext, brokers: Callable[[], dict[int, dict[str, Any]]],
                 fenced: Callable[[], dict[int, dict[str, Any]]]) -> None:
        """`brokers`: the brokers Metadata lists (client_reads), by id, which this lists too;
        `fenced`: the image's fenced brokers, which v2 adds when asked (KIP-1073)."""
        self.node = node
        self.brokers = brokers
        self.fenced = fenced

    def register(self, server: KafkaServer) -> None:
        server.register(DESCRIBE_CLUSTER, 0, 2, self.describe_cluster)

    async def describe_cluster(self, header: Any, request: Any) -> Any:
        version = header.request_api_version
        node = self.node
        endpoint_type = getattr(request, "endpoint_type", BROKERS)
        # Asked for brokers, the controller is this node, as in Metadata (Kafka's KRaft brokers
        # name a live broker: each takes admin writes and forwards them). Asked for
        # controllers (KIP-919), it is the active one.
        leader = -1 if node.leader_id is None else node.leader_id
        answer: dict[str, Any] = {"throttle_time": timedelta(0), "error_code": ErrorCode.none, "error_message": None,
                                  "cluster_id": node.cluster_id, "cluster_authorized_operations": _NO_OPERATIONS,
                                  "controller_id": leader if endpoint_type == CONTROLLERS else node.node_id}
        if version >= 1:
            answer["endpoint_type"] = endpoint_type
        if endpoint_type == CONTROLLERS:
            answer["brokers"] = [{"broker_id": n, "host": e.host, "port": e.port, "rack": None, "is_fenced": False}
                                 for n, e in sorted(node.controller_endpoints().items())]
        elif endpoint_type == BROKERS:
            fenced = self.fenced()
            listed = self.brokers()
            if getattr(request, "include_fenced_brokers", False):
                listed = dict(sorted((fenced | listed).items()))
            answer["brokers"] = [{key: b[key] for key in ("host", "port", "rack")}
                                 | {"broker_id": b["node_id"], "is_fenced": b["node_id"] in fenced}
                                 for b in listed.values()]
        else:
            answer.update(error_code=ErrorCode.invalid_request, brokers=[],
                          error_message=f"endpoint type {endpoint_type} is neither brokers (1) nor controllers (2)")
        return build_response(DESCRIBE_CLUSTER, version, answer)
