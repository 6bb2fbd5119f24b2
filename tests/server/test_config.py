"""server.properties: Kafka's names, defaults, aliases and fallbacks; keys kraft does not use
are named once in a warning, bad values of keys it uses stop start-up. And the node's log
format, text or JSON (KRAFT_LOG_FORMAT)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from kraft.server.settings.server_config import (
    KEYS,
    ConfigError,
    attribute_of,
    load_config,
    parse_properties,
    read_config,
    unused_keys_warning,
)

BASE = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",
    "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
    "metadata.log.dir": "/tmp/x",
}


def test_defaults_are_kafkas():
    config = load_config(BASE)
    assert config.metadata_log_max_record_bytes_between_snapshots == 20 * 1024 * 1024
    assert config.metadata_snapshot_min_changed_records_ratio == 0.5
    assert config.metadata_log_max_snapshot_interval_ms == 3600 * 1000
    assert config.metadata_max_retention_bytes == 100 * 1024 * 1024
    assert config.metadata_max_retention_ms == 7 * 24 * 3600 * 1000
    assert config.controller_quorum_election_timeout_ms == 1000
    assert config.controller_quorum_fetch_timeout_ms == 2000
    assert config.voters[2].port == 9095 and config.is_voter and config.is_broker
    assert config.controller_listener.endpoint.port == 9093 and config.client_listener.endpoint.port == 9092


@pytest.mark.parametrize(
    "change,message",
    [
        ({"controller.quorum.election.timeout.ms": "soon"}, "controller.quorum.election.timeout.ms: 'soon' is not"),
        ({"metadata.snapshot.min.changed_records.ratio": "1.5"}, "metadata.snapshot.min.changed_records.ratio"),
        ({"controller.quorum.voters": "1@host"}, "controller.quorum.voters: 'host' is not host:port"),
        ({"process.roles": "leader"}, "process.roles"),
        ({"node.id": "7"}, "node.id 7 has process.roles=controller but is not in controller.quorum.voters"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "no listener named in controller.listener.names"),
        ({"node.id": None}, "required configuration key 'node.id' is missing"),
        ({"broker.id": "2"}, "broker.id 2 and node.id 1 differ"),
        ({"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:SSL"},
         "listener PLAINTEXT is SSL but has no keystore: set ssl.keystore.type=PEM"),
        ({"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:SSL",
          "listener.name.plaintext.ssl.keystore.location": "/x.pem"},
         "ssl.keystore.type is JKS; kraft reads PEM keystores only"),
        ({"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT"},
         "sasl.enabled.mechanisms GSSAPI; kraft serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT",
          "sasl.enabled.mechanisms": "PLAIN"},
         "offers PLAIN but listener.name.plaintext.plain.sasl.jaas.config is missing"),
        ({"listener.name.plaintext.plain.sasl.jaas.config": "PlainLoginModule required user_a=\"b\""},
         "invalid value for listener.name.plaintext.plain.sasl.jaas.config: expected"),
        ({"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
          "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
          "sasl.mechanism.controller.protocol": "PLAIN",
          "listener.name.controller.plain.sasl.jaas.config":
              "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=b;"},
         "logs in to the controllers with PLAIN: give username=... password=..."),
        ({"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
          "sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.controller.protocol": "SCRAM-SHA-256"},
         "sasl.mechanism.controller.protocol is SCRAM-SHA-256; kraft's nodes log in"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth: 'sometimes' is not one of 'none'"),
        ({"listener.name.plaintext.ssl.client.auth": "sometimes"},
         "listener.name.plaintext.ssl.client.auth: 'sometimes' is not one of"),
        ({"listeners": "CONTROLLER://127.0.0.1:9093,INTERNAL://127.0.0.1:9092"},
         "no protocol for listener INTERNAL; add INTERNAL:PLAINTEXT"),
        ({"listener.security.protocol.map": "CONTROLLER:TLS"}, "is not LISTENER_NAME:PROTOCOL"),
        ({"inter.broker.listener.name": "EXTERNAL"}, "inter.broker.listener.name EXTERNAL is not one of listeners"),
        ({"controller.quorum.voters": None}, "give controller.quorum.voters (id@host:port,...: a static quorum) or "
         "controller.quorum.bootstrap.servers"),
        ({"controller.quorum.voters": None, "controller.quorum.bootstrap.servers": "127.0.0.1"},
         "invalid value for controller.quorum.bootstrap.servers: '127.0.0.1' is not host:port"),
    ],
)
def test_bad_configs_are_refused_naming_the_key(change, message):
    entries = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(entries, "server.properties")


def test_properties_syntax():
    text = "# a comment\n! another\nnode.id = 3\nlisteners: PLAINTEXT://h:1,\\\n  CONTROLLER://h:2\n\nempty=\n"
    assert parse_properties(text) == {"node.id": "3", "listeners": "PLAINTEXT://h:1,CONTROLLER://h:2", "empty": ""}


def test_every_key_is_read_as_the_attribute_named_after_it():
    for key in ("metadata.log.segment.bytes", "controller.quorum.election.backoff.max.ms",
                "metadata.start.offset.lag.time.max.ms", "replica.fetch.response.max.bytes",
                "replica.fetch.snapshot.max.bytes", "ssl.keystore.type", "super.users"):
        assert key in KEYS
    assert {declared.name for declared in KEYS.values()} == {attribute_of(key) for key in KEYS}
    assert all(declared.name == attribute_of(key) for key, declared in KEYS.items())
    given = load_config({"node.id": "1", "process.roles": "controller", "controller.quorum.voters": "1@h:9093",
                         "listeners": "CONTROLLER://h:9093,PLAINTEXT://h:9092",
                         "controller.quorum.election.timeout.ms": "1500", "allow.everyone.if.no.acl.found": "true"})
    assert (given.controller_quorum_election_timeout_ms, given.allow_everyone_if_no_acl_found) == (1500, True)
    assert given.controller_quorum_fetch_timeout_ms == 2000  # Kafka's default


# A stock Kafka 3.x config/kraft/server.properties, its keys and values (comments left out).
STOCK = {
    "process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "inter.broker.listener.name": "PLAINTEXT",
    "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                      "SASL_SSL:SASL_SSL",
    "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600",
    "log.dirs": "/tmp/kraft-combined-logs", "num.partitions": "1", "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1", "log.retention.hours": "168", "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
}


def test_a_stock_kafka_server_properties_loads_and_names_what_kraft_does_not_use():
    config = load_config(STOCK, "server.properties")
    assert str(config.metadata_dir) == "/tmp/kraft-combined-logs"  # log.dirs, as Kafka takes it
    assert config.client_listener.name == "PLAINTEXT" and config.controller_listener.endpoint.port == 9093
    assert config.advertised(config.client_listener).host == "localhost"
    assert set(config.unused) == {"num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
                                  "socket.receive.buffer.bytes", "num.partitions", "num.recovery.threads.per.data.dir",
                                  "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                                  "transaction.state.log.min.isr", "log.retention.hours", "log.segment.bytes",
                                  "log.retention.check.interval.ms"}
    warning = unused_keys_warning(config)
    assert warning.startswith("server.properties: 12 keys kraft does not use, ignored: ") and "\n" not in warning


def test_a_misspelt_key_is_named_with_the_key_it_looks_like():
    config = load_config({**BASE, "metadata.log.segmnet.bytes": "1"}, "server.properties")
    assert "metadata.log.segmnet.bytes (did you mean metadata.log.segment.bytes?)" in unused_keys_warning(config)


def test_kafkas_fallbacks_and_aliases():
    entries = {k: v for k, v in BASE.items() if k not in ("metadata.log.dir", "node.id")}
    config = load_config({**entries, "broker.id": "1", "log.dirs": " /a , /b", "log.dir": "/c"})
    assert config.node_id == 1 and str(config.metadata_dir) == "/a"
    assert str(load_config({**entries, "node.id": "1", "log.dir": "/c"}).log_dir) == "/c"
    assert str(load_config({**entries, "node.id": "1"}).log_dir) == "/tmp/kafka-logs"  # Kafka's log.dir default
    two = {**BASE, "listeners": "CONTROLLER://h:9093,A://h:1,B://h:2", "listener.security.protocol.map":
           "CONTROLLER:PLAINTEXT,A:PLAINTEXT,B:PLAINTEXT"}
    assert load_config(two).client_listener.name == "A"
    assert load_config({**two, "inter.broker.listener.name": "b"}).client_listener.name == "B"


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "server.properties"
    path.write_bytes(b"node.id=1\nprocess.roles=broker\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"server.properties: line 3 is not UTF-8 text \(byte 36\)"):
        read_config(path)


def test_server_start_stops_with_a_message_naming_the_key(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "metadata.log.dir": str(tmp_path),
                                                       "controller.quorum.election.timeout.ms": "soon"}.items()))
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "controller.quorum.election.timeout.ms: 'soon' is not an integer" in out.stderr
    path.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "metadata.log.dir": str(tmp_path)}.items()))
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "is not formatted" in out.stderr


@pytest.mark.parametrize("taken", ["client", "metrics"])
def test_server_start_names_a_port_that_is_taken(tmp_path, taken):
    from kraft.cli.local_cluster import free_port
    from kraft.storage.meta_properties import format_storage

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        ports = {"controller": free_port(), "client": free_port(), "metrics": free_port(), taken: busy}
        props = {
            **BASE,
            "controller.quorum.voters": f"1@127.0.0.1:{ports['controller']}",
            "listeners": f"CONTROLLER://127.0.0.1:{ports['controller']},PLAINTEXT://127.0.0.1:{ports['client']}",
            "metadata.log.dir": str(tmp_path),
            "kraft.metrics.port": str(ports["metrics"]),
        }
        path = tmp_path / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        format_storage(tmp_path, "MkU3OEVBNTcwNTJENDM2Qk", 1)
        out = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(path)], capture_output=True,
                             text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert f"{busy}" in out.stderr and "in use" in out.stderr.lower() and "Traceback" not in out.stderr


def test_kraft_log_format_json_writes_each_event_as_a_json_object(tmp_path, monkeypatch):
    from kraft.cli.cluster_client import leader
    from kraft.cli.local_cluster import LocalCluster

    monkeypatch.setenv("KRAFT_LOG_FORMAT", "json")  # the node processes inherit it
    cluster = LocalCluster(tmp_path / "cluster", voters=1, observers=0)
    with cluster:
        cluster.start()
        _, epoch = leader(cluster)
    entries = [json.loads(line) for line in cluster.nodes[1].log_path.read_text().splitlines()]
    assert entries and all(e["node"] == 1 and e["level"] and e["logger"] and e["time"] for e in entries)
    elected = [e for e in entries if e["event"] == "node %d: elected leader of epoch %d with votes from %s"
               and e["partition"] == "__cluster_metadata-0"]  # each __consumer_offsets partition elects too
    assert [(e["args"], e["message"]) for e in elected] == [
        ([1, epoch, [1]], f"node 1: elected leader of epoch {epoch} with votes from [1]")]
    assert any(e["message"].startswith("node 1 ready: controller") for e in entries)


def test_an_unknown_log_format_stops_start_up_naming_it(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "metadata.log.dir": str(tmp_path)}.items()))
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(path)], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "KRAFT_LOG_FORMAT": "xml"})
    assert out.returncode == 1 and "KRAFT_LOG_FORMAT: 'xml' is not text or json" in out.stderr, out.stderr


def test_a_node_starts_from_a_stock_kafka_server_properties(tmp_path):
    """Kafka's own file, ports and directory moved aside: formatted and started as an
    operator would, it serves, advertises what advertised.listeners says, and warns once."""
    from kraft.cli.cluster_client import request, run_async
    from kraft.cli.local_cluster import free_port
    from kraft.protocol.build import build_request
    from tests.server.cluster_helpers import wait_for

    client, controller = free_port(), free_port()
    props = {**STOCK, "controller.quorum.voters": f"1@localhost:{controller}",
             "listeners": f"PLAINTEXT://:{client},CONTROLLER://:{controller}",
             "advertised.listeners": f"PLAINTEXT://localhost:{client},CONTROLLER://localhost:{controller}",
             "log.dirs": str(tmp_path / "logs"), "kraft.metrics.port": "-1"}
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    kraft = [sys.executable, "-m", "kraft.cli"]
    formatted = subprocess.run([*kraft, "storage", "format", "--config", str(path), "--cluster-id",
                                "MkU3OEVBNTcwNTJENDM2Qk"], capture_output=True, text=True, timeout=60)
    assert formatted.returncode == 0, formatted.stderr
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        node = subprocess.Popen([*kraft, "server", "start", str(path)], stdout=log, stderr=subprocess.STDOUT)
    try:
        metadata = build_request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})

        def registered() -> bool:
            try:
                brokers = run_async(request(client, metadata, 5)).brokers
            except OSError:
                return False
            return [(b.node_id, b.host, b.port) for b in brokers] == [(1, "localhost", client)]

        wait_for(registered, 60, "the node to serve Metadata with its advertised listener")
    finally:
        node.terminate()
        node.wait(30)
    warnings = [line for line in log_path.read_text().splitlines() if "keys kraft does not use" in line]
    assert len(warnings) == 1 and "num.io.threads" in warnings[0]
