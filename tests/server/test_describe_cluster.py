"""DescribeCluster v2 (KIP-1073) on a real node: each broker says whether it is fenced, and
the fenced ones are listed only when the request asks for them."""

import uuid

from kraft.cli.cluster_client import request, run_async
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request

from .cluster_helpers import wait_for

DESCRIBE_CLUSTER, BROKER_REGISTRATION = 60, 62
FENCED = 7  # registered, never heartbeating: fenced


def describe(port: int, version: int, include_fenced: bool = False, endpoint_type: int = 1) -> dict[int, bool | None]:
    fields = {"include_cluster_authorized_operations": False}
    if version >= 1:
        fields["endpoint_type"] = endpoint_type
    if version >= 2:
        fields["include_fenced_brokers"] = include_fenced
    answer = run_async(request(port, build_request(DESCRIBE_CLUSTER, version, fields)))
    assert answer.error_code == ErrorCode.none
    return {b.broker_id: getattr(b, "is_fenced", None) for b in answer.brokers}


def test_describe_cluster_v2_names_fenced_brokers_when_asked(node):
    wait_for(lambda: 1 in node.node.image.brokers and not node.node.image.brokers[1].fenced, 30,
             "the node's own broker unfenced")
    cluster_id = node.node.cluster_id
    registration = build_request(BROKER_REGISTRATION, 3, {
        "broker_id": FENCED, "cluster_id": cluster_id, "incarnation_id": uuid.uuid4(), "rack": None,
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 1, "security_protocol": 0}],
        "features": [], "log_dirs": [], "previous_broker_epoch": -1})
    assert run_async(request(node.controller_port, registration)).error_code == ErrorCode.none
    wait_for(lambda: FENCED in node.node.image.brokers, 30, "the registration applied")
    assert describe(node.client_port, 2) == {1: False}
    assert describe(node.client_port, 2, include_fenced=True) == {1: False, FENCED: True}
    assert describe(node.client_port, 1) == {1: None}, "v1 knows no fencing and lists the live brokers"
    assert describe(node.controller_port, 2, endpoint_type=2) == {1: False}, "controllers (KIP-919) are never fenced"
