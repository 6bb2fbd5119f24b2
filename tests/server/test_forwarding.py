"""Forwarding on a real cluster: the Envelope the active controller serves, and a write sent to
an observer that outlives the leader it was first meant for."""

from datetime import timedelta
from typing import Any

from kraft.cli.cluster_client import create_topic_at_leader, leader, request, run_async, topic_names
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.codec import decode_response, encode, response_class
from kraft.server.apis.forwarding import address_bytes, principal_data

from .cluster_helpers import wait_for

CREATE_TOPICS, METADATA, ENVELOPE = 19, 3, 58
ANONYMOUS, UNKNOWN_ADDRESS = principal_data("User:ANONYMOUS"), address_bytes("")


def create_topics_request(name: str, timeout_s: float = 30) -> Any:
    return build_request(CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": timedelta(seconds=timeout_s), "validate_only": False,
    })


def envelope(inner: Any, correlation_id: int = 77, principal: bytes = ANONYMOUS) -> Any:
    """An Envelope around `inner`, as a forwarding node builds it."""
    cls = type(inner)
    header = cls.__header_schema__(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                                   correlation_id=correlation_id, client_id="a-client")
    return build_request(ENVELOPE, 0, {"request_data": encode(header) + encode(inner),
                                       "request_principal": principal, "client_host_address": UNKNOWN_ADDRESS})


def test_the_active_controller_serves_envelopes_and_others_answer_not_controller(cluster):
    def send(node: int, req: Any) -> Any:
        return run_async(request(cluster.nodes[node].controller_port, req, 40))

    leader_id, result = create_topic_at_leader(cluster, "first", timeout=60)  # brokers are there to place it
    assert result.error_code == ErrorCode.none

    def served_by_the_leader_only() -> bool:
        """The checks, against the leader as it is; False (to try again) if it changed meanwhile
        (a second election can follow the first at once: without pre-vote that is legitimate)."""
        leader_id, epoch = leader(cluster)
        answer = send(leader_id, envelope(create_topics_request(f"enveloped-{epoch}"), correlation_id=4242))
        refused = send(next(n for n in cluster.voter_ids if n != leader_id), envelope(create_topics_request("no")))
        if leader(cluster) != (leader_id, epoch):
            return False
        assert answer.error_code == ErrorCode.none and refused.error_code == ErrorCode.not_controller
        got, inner = decode_response(answer.response_data, response_class(CREATE_TOPICS, 7))  # the client's version
        assert got == 4242 and inner.topics[0].error_code == ErrorCode.none  # and its correlation id
        metadata = build_request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
        assert send(leader_id, envelope(metadata)).error_code == ErrorCode.invalid_request  # not forwardable
        garbled = build_request(ENVELOPE, 0, {"request_data": b"\x00\x13\x00\x07garbage",
                                              "request_principal": ANONYMOUS, "client_host_address": UNKNOWN_ADDRESS})
        assert send(leader_id, garbled).error_code == ErrorCode.unsupported_version
        stranger = envelope(create_topics_request("stranger"), principal=b"\x00\x07nobody")
        assert send(leader_id, stranger).error_code == ErrorCode.principal_deserialization_failure
        assert not {"no", "stranger"} & topic_names(cluster, leader_id)
        return True

    wait_for(served_by_the_leader_only, timeout=60, what="one leader through the checks")


def test_a_write_to_an_observer_waits_out_a_leader_change_and_never_says_not_controller(cluster):
    leader_id, _ = leader(cluster)
    observer = 4
    wait_for(lambda: run_async(request(cluster.nodes[observer].client_port, create_topics_request("before"),
                                       40)).topics[0].error_code == ErrorCode.none,
             timeout=60, what="a first write through the observer")
    cluster.kill(leader_id)  # the observer still knows it as leader: its connection fails, then a new one leads
    result = run_async(request(cluster.nodes[observer].client_port, create_topics_request("after", 60), 70))
    assert result.topics[0].error_code == ErrorCode.none, result
    survivor = next(n for n in cluster.voter_ids if n != leader_id)
    wait_for(lambda: "after" in topic_names(cluster, survivor), timeout=60, what="the topic on a surviving voter")

    cluster.kill(survivor)  # one voter of three left: no leader can be elected
    lost = run_async(request(cluster.nodes[observer].client_port, create_topics_request("never", 3), 30))
    assert lost.topics[0].error_code == ErrorCode.request_timed_out, lost
