"""DescribeConfigs (API 32): every config kraft knows of a topic or a broker, as Kafka describes it.

Kafka's ConfigHelper rules, for the configs kraft knows (kraft.metadata.configs: its topic
configs, its dynamic broker configs and the broker configs those fall back to):

- **A topic** lists every topic config. Its value is the topic's own (DYNAMIC_TOPIC_CONFIG)
  if set, else the broker config it falls back to (its synonyms: retention.ms falls back to
  log.retention.ms, then log.retention.minutes, then log.retention.hours, scaled to ms),
  as this broker sees it, else Kafka's default. Its source is its first synonym's:
  the topic's own, then each broker synonym set dynamically for this broker
  (DYNAMIC_BROKER_CONFIG), then for every broker (DYNAMIC_DEFAULT_BROKER_CONFIG), then in
  this node's server.properties (STATIC_BROKER_CONFIG), then Kafka's defaults
  (DEFAULT_CONFIG), each level in synonym order; synonyms before the first one named as
  the topic config's own broker config are dropped (Kafka's `dropWhile`, so a static
  log.retention.hours alone leaves retention.ms with no synonym: DEFAULT_CONFIG, though
  its value follows the hours). Topic configs are never read-only.
- **A broker** is described by that broker only (another id is INVALID_REQUEST, as in
  Kafka: only it knows its server.properties): every broker config, its value its own at
  the highest level set (or null), read-only unless kraft accepts it dynamically. The
  resource '' (every broker's default) lists only the configs set dynamically for every
  broker.
- Synonyms are listed only when asked (include_synonyms), the documentation only when asked
  (v3+). No config kraft knows is sensitive (a PASSWORD type).

`__cluster_metadata` has `cleanup.policy=snapshot`, read-only: KIP-630's log is compacted
by snapshots only and its configs cannot be altered.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from kraft.metadata import ControllerError
from kraft.metadata.configs import (
    BROKER_CONFIGS,
    CLUSTER_METADATA_CONFIGS,
    CLUSTER_METADATA_TOPIC,
    STATIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    ConfigDef,
)
from kraft.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kraft.metadata.operations import validate_topic_name
from kraft.protocol import ErrorCode, KafkaServer
from kraft.protocol.build import build_response
from kraft.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kraft.server.apis.admin import Refusal
from kraft.server.apis.context import NodeContext
from kraft.server.settings.authorization import REFUSED
from kraft.server.settings.server_config import parse_properties

DESCRIBE_CONFIGS = 32
# Kafka's DescribeConfigsResponse.ConfigSource and ConfigType codes.
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
ALL_BROKER_CONFIGS: Mapping[str, ConfigDef] = {**BROKER_CONFIGS, **STATIC_BROKER_CONFIGS}
KAFKA_DEFAULTS: Mapping[str, str] = {n: d.default for n, d in ALL_BROKER_CONFIGS.items() if d.default is not None}


def _synonym_groups() -> dict[str, tuple[str, ...]]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the broker configs that set one
    value, for each of them (log.roll.hours: log.roll.ms, log.roll.hours). The flush
    scheduler interval only stands in for log.flush.interval.ms, not the other way round."""
    groups = {}
    for synonyms in TOPIC_SYNONYMS.values():
        names = tuple(s.name for s in synonyms)
        for name in names if names[0] != "log.flush.interval.ms" else names[:1]:
            groups[name] = names
    return groups


BROKER_SYNONYMS = _synonym_groups()


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class BrokerLevels:
    """The values of broker configs at each level this broker sees, highest first."""

    dynamic_broker: Mapping[str, str]
    dynamic_default: Mapping[str, str]
    static: Mapping[str, str]

    def _levels(self) -> tuple[tuple[Mapping[str, str], int], ...]:
        return ((self.dynamic_broker, DYNAMIC_BROKER_CONFIG), (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, STATIC_BROKER_CONFIG), (KAFKA_DEFAULTS, DEFAULT_CONFIG))

    def value(self, name: str) -> str | None:
        """The config's value at the highest level that sets it; None if none does."""
        return next((values[name] for values, _ in self._levels() if name in values), None)

    def synonyms(self, names: Sequence[str], primary: str) -> list[Synonym]:
        """Kafka's ConfigHelper.configSynonyms: each level, highest first, each name in
        order; those before the first named `primary` are dropped."""
        found = [Synonym(n, values[n], source) for values, source in self._levels() for n in names if n in values]
        first = next((i for i, s in enumerate(found) if s.name == primary), len(found))
        return found[first:]


@dataclass(frozen=True)
class Described:
    """One config of a resource, as DescribeConfigs answers it."""

    name: str
    value: str | None
    synonyms: list[Synonym]
    read_only: bool
    definition: ConfigDef | None

    @property
    def source(self) -> int:
        return self.synonyms[0].source if self.synonyms else DEFAULT_CONFIG


def topic_configs(overrides: Mapping[str, str], levels: BrokerLevels) -> list[Described]:
    """Every topic config of a topic with these configs set, on a broker at `levels`."""
    described = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        fallbacks = TOPIC_SYNONYMS[name]
        synonyms = levels.synonyms([s.name for s in fallbacks], fallbacks[0].name)
        if name in overrides:
            synonyms.insert(0, Synonym(name, overrides[name], TOPIC_CONFIG))
        value = overrides.get(name)
        if value is None:
            inherited = ((levels.value(f.name), f.scale) for f in fallbacks)
            value = next((v if scale == 1 else str(int(v) * scale) for v, scale in inherited if v is not None),
                         definition.default)
        described.append(Described(name, value, synonyms, False, definition))
    return described


def broker_configs(levels: BrokerLevels) -> list[Described]:
    """Every broker config, as this broker has it."""
    return [Described(name, levels.value(name), levels.synonyms(BROKER_SYNONYMS.get(name, (name,)), name),
                      name not in BROKER_CONFIGS, definition)
            for name, definition in sorted(ALL_BROKER_CONFIGS.items())]


def default_broker_configs(levels: BrokerLevels) -> list[Described]:
    """The configs set dynamically for every broker, with only such synonyms."""
    described = []
    for name, value in sorted(levels.dynamic_default.items()):
        synonyms = [s for s in levels.synonyms(BROKER_SYNONYMS.get(name, (name,)), name)
                    if s.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
        described.append(Described(name, value, synonyms, name not in BROKER_CONFIGS, ALL_BROKER_CONFIGS.get(name)))
    return described


def static_broker_configs(source: str) -> dict[str, str]:
    """The broker configs kraft knows as the node's server.properties sets them. The node's
    ServerConfig keeps only the keys it runs with, so the file is read back (at start)."""
    path = Path(source)
    if not path.is_file():
        return {}
    entries = parse_properties(path.read_bytes().decode("utf-8", errors="replace"))
    return {k: v.strip() for k, v in entries.items() if k in ALL_BROKER_CONFIGS}


class DescribeConfigs:
    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.static = static_broker_configs(node.config.source)

    def register(self, server: KafkaServer) -> None:
        server.register(DESCRIBE_CONFIGS, 1, 4, self.describe_configs)

    def levels(self, image: MetadataImage) -> BrokerLevels:
        broker = ConfigResource(ConfigResourceType.BROKER, str(self.node.node_id))
        return BrokerLevels(image.configs_of(broker), image.configs_of(ConfigResource(ConfigResourceType.BROKER, "")),
                            self.static)

    def configs_of(self, resource_type: int, name: str) -> list[Described]:
        """A resource's configs; raises a Refusal saying why there are none."""
        image = self.node.image
        if resource_type == ConfigResourceType.TOPIC:
            if name == CLUSTER_METADATA_TOPIC:
                return [Described(k, v, [], True, TOPIC_CONFIGS.get(k)) for k, v in CLUSTER_METADATA_CONFIGS.items()]
            try:
                validate_topic_name(name)
            except ControllerError as e:
                raise Refusal(ErrorCode(int(e.error)), e.message) from None
            if image.topic(name) is None:
                raise Refusal(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
            return topic_configs(image.configs_of(ConfigResource(ConfigResourceType.TOPIC, name)), self.levels(image))
        if resource_type == ConfigResourceType.BROKER:
            if not name:
                return default_broker_configs(self.levels(image))
            if not name.lstrip("-").isdigit():
                raise Refusal(ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}")
            if int(name) != self.node.node_id:
                raise Refusal(ErrorCode.invalid_request,
                              f"Unexpected broker id, expected {self.node.node_id} or empty string, but received {name}")
            return broker_configs(self.levels(image))
        raise Refusal(ErrorCode.invalid_request, f"Unsupported resource type: {resource_type} (kraft describes "
                      "topics (2) and brokers (4))")

    def _authorize(self, resource_type: int, name: str) -> None:
        """DESCRIBE_CONFIGS on the topic, or on the cluster for a broker's (Kafka's rule)."""
        topic = resource_type == ConfigResourceType.TOPIC
        if not self.node.authorization.allowed(AclOperation.DESCRIBE_CONFIGS,
                                               ResourceType.TOPIC if topic else ResourceType.CLUSTER,
                                               name if topic else CLUSTER_NAME):
            raise Refusal(ErrorCode.topic_authorization_failed if topic else ErrorCode.cluster_authorization_failed,
                          REFUSED)

    async def describe_configs(self, header: Any, request: Any) -> Any:
        documented = getattr(request, "include_documentation", False)
        results = []
        for r in request.resources:
            entry: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None, "configs": [],
                                     "resource_type": r.resource_type, "resource_name": r.resource_name}
            try:
                self._authorize(r.resource_type, r.resource_name)
                described = self.configs_of(r.resource_type, r.resource_name)
            except Refusal as e:
                entry.update(error_code=e.error, error_message=e.message)
                results.append(entry)
                continue
            wanted = set(r.configuration_keys or ())  # null or empty: every config
            entry["configs"] = [
                {"name": d.name, "value": d.value, "read_only": d.read_only, "config_source": d.source,
                 "is_sensitive": False, "documentation": d.definition.doc if documented and d.definition else None,
                 "config_type": CONFIG_TYPES[d.definition.type] if d.definition else 0,
                 "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in d.synonyms]
                 if request.include_synonyms else []}
                for d in described if not wanted or d.name in wanted
            ]
            results.append(entry)
        return build_response(DESCRIBE_CONFIGS, header.request_api_version,
                              {"throttle_time": timedelta(0), "results": results})
