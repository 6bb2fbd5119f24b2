"""`kraft configs` against live clusters (plain and secured): the examples of Kafka's
documentation for topics, brokers, users and clients, their lines as Kafka's ConfigCommand
prints them, and the state they leave as kafka-python's admin client reads it back."""

from typing import Any

from ..server.cluster_helpers import wait_for


def topic_configs(tools, topic: str) -> dict[str, Any]:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = tools.admin()
    try:
        return admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    finally:
        admin.close()


def test_topic_configs(tools):
    topic = f"configured-{tools.name}"
    assert tools.kraft("topics", "--create", "--topic", topic).returncode == 0
    altered = tools.kraft("configs", "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config",
                          "max.message.bytes=128000,cleanup.policy=[compact,delete]")
    assert (altered.returncode, altered.stdout) == (0, f"Completed updating config for topic {topic}.\n")
    wait_for(lambda: topic_configs(tools, topic).get("max.message.bytes", {}).get("value") == "128000",
             what="kafka-python reading the new config")
    described = tools.kraft("configs", "--describe", "--entity-type", "topics", "--entity-name", topic)
    assert described.stdout == (
        f"Dynamic configs for topic {topic} are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  max.message.bytes=128000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=128000, "
        "DEFAULT_CONFIG:message.max.bytes=1048588}\n")
    every = tools.kraft("configs", "--describe", "--topic", topic, "--all")
    lines = every.stdout.splitlines()
    assert lines[0] == f"All configs for topic {topic} are:"
    names = [line.split("=")[0].strip() for line in lines[1:]]
    assert names == sorted(names) and set(names) >= {"retention.ms", "segment.bytes", "max.message.bytes"}
    deleted = tools.kraft("configs", "--alter", "--topic", topic, "--delete-config", "max.message.bytes")
    assert deleted.returncode == 0
    wait_for(lambda: "max.message.bytes" not in topic_configs(tools, topic), what="the config deleted")
    missing = tools.kraft("configs", "--alter", "--topic", topic, "--delete-config", "segment.ms")
    assert (missing.returncode, missing.stderr) == (1, "Invalid config(s): segment.ms\n")
    unknown = tools.kraft("configs", "--alter", "--topic", topic, "--add-config", "segment.msx=1")
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines() == [
        f"Error while executing config command with args '--bootstrap-server {tools.bootstrap} "
        f"{'--command-config ' + str(tools.config) + ' ' if tools.config else ''}--alter --topic {topic} "
        "--add-config segment.msx=1'",
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidConfigurationException: "
        "Unknown topic config name: segment.msx"]


def test_broker_configs_per_broker_and_by_default(tools):
    per_broker = tools.kraft("configs", "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config",
                             "log.cleaner.threads=2")
    assert (per_broker.returncode, per_broker.stdout) == (0, "Completed updating config for broker 1.\n")
    default = tools.kraft("configs", "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                          "log.cleaner.threads=3")
    assert default.stdout == "Completed updating default config for brokers in the cluster.\n"
    one = tools.kraft("configs", "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert one.stdout == ("Dynamic configs for broker 1 are:\n"
                          "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
                          "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=3, DEFAULT_CONFIG:log.cleaner.threads=1}\n")
    defaults = tools.kraft("configs", "--describe", "--entity-type", "brokers", "--entity-default")
    assert defaults.stdout == ("Default configs for brokers in the cluster are:\n"
                               "  log.cleaner.threads=3 sensitive=false "
                               "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=3}\n")
    every = tools.kraft("configs", "--describe", "--entity-type", "brokers")
    headers = [line for line in every.stdout.splitlines() if not line.startswith("  ")]
    ids = sorted(tools.cluster.nodes)
    assert headers == [*(f"Dynamic configs for broker {i} are:" for i in ids),
                       "Default configs for brokers in the cluster are:"]
    assert tools.kraft("configs", "--alter", "--broker", "1", "--delete-config", "log.cleaner.threads").returncode == 0
    assert tools.kraft("configs", "--describe", "--broker", "1").stdout == "Dynamic configs for broker 1 are:\n"
    not_a_broker = tools.kraft("configs", "--describe", "--entity-type", "brokers", "--entity-name", "one")
    assert (not_a_broker.returncode, not_a_broker.stderr) == (
        1, "The entity name for brokers must be a valid integer broker id, but it is: one\n")


def test_through_the_controllers(plain):
    """--bootstrap-controller (KIP-919): the controllers describe and alter configs too."""
    controller = ["--bootstrap-controller", f"127.0.0.1:{plain.cluster.nodes[2].controller_port}"]
    altered = plain.kraft("configs", *controller, "--alter", "--entity-type", "brokers", "--entity-name", "2",
                          "--add-config", "log.cleaner.threads=4", connect=False)
    assert (altered.returncode, altered.stdout) == (0, "Completed updating config for broker 2.\n"), altered.stderr
    described = plain.kraft("configs", *controller, "--describe", "--entity-type", "brokers", "--entity-name", "2",
                            connect=False)
    assert described.stdout.splitlines()[1].startswith("  log.cleaner.threads=4 sensitive=false "
                                                       "synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=4, ")
    assert plain.kraft("configs", "--alter", "--broker", "2", "--delete-config", "log.cleaner.threads").returncode == 0


def test_user_credentials_and_client_quotas(tools):
    user = f"alice-{tools.name}"
    credential = tools.kraft("configs", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-pw]",
                             "--entity-type", "users", "--entity-name", user)
    assert (credential.returncode, credential.stdout) == (0, f"Completed updating config for user {user}.\n")
    second = tools.kraft("configs", "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-pw]",
                         "--entity-type", "users", "--entity-name", user)
    assert second.returncode == 0
    quota = tools.kraft("configs", "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=20000000",
                        "--entity-type", "users", "--entity-name", user)
    assert quota.returncode == 0
    described = tools.kraft("configs", "--describe", "--entity-type", "users", "--entity-name", user)
    assert described.stdout == (
        f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0, consumer_byte_rate=2.0E7\n"
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096\n")
    admin = tools.admin()
    try:
        read_back = admin.describe_user_scram_credentials([user])
    finally:
        admin.close()
    assert "8192" in repr(read_back) and "4096" in repr(read_back), read_back

    client = f"reports-{tools.name}"
    assert tools.kraft("configs", "--alter", "--add-config", "request_percentage=12.5", "--entity-type", "clients",
                       "--entity-name", client).stdout == f"Completed updating config for client {client}.\n"
    assert tools.kraft("configs", "--alter", "--add-config", "producer_byte_rate=2048", "--entity-type", "users",
                       "--entity-name", user, "--entity-type", "clients", "--entity-name", client).returncode == 0
    both = tools.kraft("configs", "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type",
                       "clients", "--entity-name", client)
    assert both.stdout == (f"Quota configs for user-principal '{user}', client-id '{client}' are "
                           "producer_byte_rate=2048.0\n")
    assert tools.kraft("configs", "--describe", "--client", client).stdout == (
        f"Quota configs for client-id '{client}' are request_percentage=12.5\n")
    fractional = tools.kraft("configs", "--alter", "--add-config", "producer_byte_rate=1.5", "--client", client)
    assert fractional.returncode == 1
    assert fractional.stderr.splitlines()[1] == ("java.util.concurrent.ExecutionException: org.apache.kafka.common."
                                                 "errors.InvalidRequestException: producer_byte_rate cannot be a "
                                                 "fractional value.")
    removed = tools.kraft("configs", "--alter", "--delete-config", "SCRAM-SHA-512", "--user", user)
    assert removed.returncode == 0
    assert "SCRAM-SHA-512" not in tools.kraft("configs", "--describe", "--user", user).stdout
    wrong = tools.kraft("configs", "--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--client", client)
    assert wrong.stderr == ("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                            "config names: List(SCRAM-SHA-256)\n")


def test_usage_errors_are_kafkas_lines(plain):
    none = plain.kraft("configs", "--describe")
    assert (none.returncode, none.stderr) == (1, "At least one entity type must be specified\n")
    both = plain.kraft("configs", "--describe", "--alter", "--topic", "t")
    assert both.stderr == "Command must include exactly one action: --describe, --alter\n"
    mixed = plain.kraft("configs", "--describe", "--entity-name", "t", "--topic", "t")
    assert mixed.stderr == ("--entity-{type,name,default} should not be used in conjunction with specific entity "
                            "flags\n")
    bad_type = plain.kraft("configs", "--describe", "--entity-type", "planets")
    assert bad_type.stderr.startswith("Invalid entity type planets, the entity type must be one of topics, ")
    assert "Traceback" not in none.stderr + both.stderr + mixed.stderr + bad_type.stderr
