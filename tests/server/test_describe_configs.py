"""DescribeConfigs' rules (Kafka's ConfigHelper), on configs at every level, without a cluster."""

from kraft.server.apis.describe_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
    BrokerLevels,
    broker_configs,
    default_broker_configs,
    topic_configs,
)


def by_name(described):
    return {d.name: d for d in described}


def test_a_topic_config_comes_from_the_topic_then_each_broker_level_then_kafkas_default():
    levels = BrokerLevels(dynamic_broker={"log.segment.bytes": "1000"},
                          dynamic_default={"log.segment.bytes": "2000", "log.retention.bytes": "3000"},
                          static={"log.segment.bytes": "4000", "message.max.bytes": "5000"})
    topic = by_name(topic_configs({"cleanup.policy": "compact"}, levels))
    assert (topic["cleanup.policy"].value, topic["cleanup.policy"].source) == ("compact", TOPIC_CONFIG)
    assert [(s.name, s.source) for s in topic["cleanup.policy"].synonyms] == [
        ("cleanup.policy", TOPIC_CONFIG), ("log.cleanup.policy", DEFAULT_CONFIG)]
    segment = topic["segment.bytes"]
    assert (segment.value, segment.source) == ("1000", DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in segment.synonyms] == [
        ("1000", DYNAMIC_BROKER_CONFIG), ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG), ("4000", STATIC_BROKER_CONFIG),
        ("1073741824", DEFAULT_CONFIG)]
    assert (topic["retention.bytes"].value, topic["retention.bytes"].source) == ("3000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (topic["max.message.bytes"].value, topic["max.message.bytes"].source) == ("5000", STATIC_BROKER_CONFIG)
    assert (topic["segment.ms"].value, topic["segment.ms"].source, topic["segment.ms"].synonyms) == (
        "604800000", DEFAULT_CONFIG, [])  # log.roll.ms has no default; log.roll.hours' is dropped before it
    assert not any(d.read_only for d in topic.values())


def test_retention_hours_set_the_value_but_not_the_source_as_in_kafka():
    """Kafka's configSynonyms drops synonyms before the first named as the primary one."""
    hours = by_name(topic_configs({}, BrokerLevels({}, {}, {"log.retention.hours": "2"})))["retention.ms"]
    assert (hours.value, hours.source, hours.synonyms) == ("7200000", DEFAULT_CONFIG, [])
    minutes = by_name(topic_configs({}, BrokerLevels({}, {}, {"log.retention.ms": "5", "log.retention.minutes": "3"})))
    assert (minutes["retention.ms"].value, minutes["retention.ms"].source) == ("5", STATIC_BROKER_CONFIG)
    assert [s.name for s in minutes["retention.ms"].synonyms] == [
        "log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    only_minutes = by_name(topic_configs({}, BrokerLevels({}, {}, {"log.retention.minutes": "3"})))["retention.ms"]
    assert only_minutes.value == "180000"


def test_a_broker_lists_every_config_read_only_unless_kraft_changes_it_dynamically():
    broker = by_name(broker_configs(BrokerLevels({"num.io.threads": "16"}, {}, {"log.retention.hours": "24"})))
    assert (broker["num.io.threads"].value, broker["num.io.threads"].source) == ("16", DYNAMIC_BROKER_CONFIG)
    assert (broker["log.retention.hours"].value, broker["log.retention.hours"].source) == ("24", STATIC_BROKER_CONFIG)
    assert broker["log.retention.hours"].read_only and not broker["log.retention.ms"].read_only
    assert (broker["log.retention.ms"].value, broker["log.retention.ms"].source) == (None, DEFAULT_CONFIG)
    assert [(s.name, s.value) for s in broker["log.retention.hours"].synonyms] == [
        ("log.retention.hours", "24"), ("log.retention.hours", "168")]
    assert all(d.definition is not None and d.definition.doc for d in broker.values())


def test_the_default_broker_resource_lists_only_dynamic_defaults():
    levels = BrokerLevels({"num.io.threads": "16"}, {"num.io.threads": "12"}, {"num.io.threads": "10"})
    (only,) = default_broker_configs(levels)
    assert (only.name, only.value, only.source) == ("num.io.threads", "12", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s.source for s in only.synonyms] == [DYNAMIC_DEFAULT_BROKER_CONFIG]
