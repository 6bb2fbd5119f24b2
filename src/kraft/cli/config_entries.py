"""DescribeConfigs as Kafka's admin client asks it, for `kraft topics` and `kraft configs`:
the entries of each resource, an error answer raised as Kafka's exception, and the names
Kafka's ConfigEntry.ConfigSource prints for each source."""

from collections.abc import Sequence
from typing import Any

from kraft.cli.admin_client import Admin
from kraft.cli.admin_connection import NodeConnection
from kraft.cli.kafka_errors import check

DESCRIBE_CONFIGS = 32
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8  # ConfigResource.Type codes
DEFAULT_CONFIG = 5
SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG",
}


async def describe_resources(admin: Admin, resource_type: int, names: Sequence[str], synonyms: bool = False,
                             node: NodeConnection | None = None) -> dict[str, list[Any]]:
    """Each resource's config entries, in the answer's order; the first error answered
    raises it."""
    answer = await admin.call(DESCRIBE_CONFIGS, range(1, 5), {
        "resources": [{"resource_type": resource_type, "resource_name": n, "configuration_keys": None}
                      for n in names],
        "include_synonyms": synonyms, "include_documentation": False}, node)
    described = {}
    for result in answer.results:
        check(result.error_code, result.error_message)
        described[result.resource_name] = list(result.configs)
    return described


async def describe_configs(admin: Admin, topics: Sequence[str]) -> dict[str, list[Any]]:
    """The topics' config entries."""
    return await describe_resources(admin, TOPIC, topics)
