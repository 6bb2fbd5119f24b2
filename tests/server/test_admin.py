"""Admin requests the active controller refuses, answered per topic with Kafka's codes."""

from kraft.cli.cluster_client import create_topic
from kraft.protocol import ErrorCode


def test_a_null_config_value_is_invalid_config_and_creates_nothing(single):
    port = single.nodes[1].client_port
    result = create_topic(port, "nulls", configs={"cleanup.policy": None})
    assert result.error_code == ErrorCode.invalid_config and "Null value" in result.error_message
    assert create_topic(port, "nulls").error_code == ErrorCode.none  # the name was not taken


def test_an_operation_over_kafkas_record_limit_is_refused_whole(single):
    port = single.nodes[1].client_port
    result = create_topic(port, "huge", partitions=20_000)
    assert result.error_code == ErrorCode.policy_violation and "excessively large" in result.error_message
    assert create_topic(port, "huge", partitions=2).error_code == ErrorCode.none
