"""server.properties: Kafka's names and defaults; unknown keys and bad values stop start-up.
And the node's log format, text or JSON (KRAFT_LOG_FORMAT)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from kraft.server.config import SCHEMA, ConfigError, load_config, parse_properties

BASE = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",
    "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
    "metadata.log.dir": "/tmp/x",
}


def test_defaults_are_kafkas():
    config = load_config(BASE)
    assert config["metadata.log.max.record.bytes.between.snapshots"] == 20 * 1024 * 1024
    assert config["metadata.snapshot.min.changed_records.ratio"] == 0.5
    assert config["metadata.log.max.snapshot.interval.ms"] == 3600 * 1000
    assert config["metadata.max.retention.bytes"] == 100 * 1024 * 1024
    assert config["metadata.max.retention.ms"] == 7 * 24 * 3600 * 1000
    assert config["controller.quorum.election.timeout.ms"] == 1000
    assert config["controller.quorum.fetch.timeout.ms"] == 2000
    assert config.voters[2].port == 9095 and config.is_voter and config.is_broker
    assert config.controller_listener.endpoint.port == 9093 and config.client_listener.endpoint.port == 9092


@pytest.mark.parametrize(
    "change,message",
    [
        ({"metadata.log.segmnet.bytes": "1"}, "unknown configuration key 'metadata.log.segmnet.bytes'"),
        ({"controller.quorum.election.timeout.ms": "soon"}, "controller.quorum.election.timeout.ms: 'soon' is not"),
        ({"metadata.snapshot.min.changed_records.ratio": "1.5"}, "metadata.snapshot.min.changed_records.ratio"),
        ({"controller.quorum.voters": "1@host"}, "controller.quorum.voters: 'host' is not host:port"),
        ({"process.roles": "leader"}, "process.roles"),
        ({"node.id": "7"}, "node.id 7 has process.roles=controller but is not in controller.quorum.voters"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "no listener named in controller.listener.names"),
        ({"metadata.log.dir": None}, "required configuration key 'metadata.log.dir' is missing"),
    ],
)
def test_bad_configs_are_refused_naming_the_key(change, message):
    entries = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(entries, "server.properties")


def test_properties_syntax():
    text = "# a comment\n! another\nnode.id = 3\nlisteners: PLAINTEXT://h:1,\\\n  CONTROLLER://h:2\n\nempty=\n"
    assert parse_properties(text) == {"node.id": "3", "listeners": "PLAINTEXT://h:1,CONTROLLER://h:2", "empty": ""}


def test_every_documented_key_is_in_the_schema():
    for key in ("metadata.log.segment.bytes", "controller.quorum.election.backoff.max.ms",
                "metadata.start.offset.lag.time.max.ms", "replica.fetch.response.max.bytes",
                "replica.fetch.snapshot.max.bytes"):
        assert key in SCHEMA


def test_server_start_stops_with_a_message_naming_the_key(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "metadata.log.dir": str(tmp_path), "bogus.key": "1"}.items()))
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "unknown configuration key 'bogus.key'" in out.stderr
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
    elected = [e for e in entries if e["event"] == "node %d: elected leader of epoch %d with votes from %s"]
    assert [(e["args"], e["message"]) for e in elected] == [
        ([1, epoch, [1]], f"node 1: elected leader of epoch {epoch} with votes from [1]")]
    assert any(e["message"].startswith("node 1 ready: controller") for e in entries)


def test_an_unknown_log_format_stops_start_up_naming_it(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "metadata.log.dir": str(tmp_path)}.items()))
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "server", "start", str(path)], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "KRAFT_LOG_FORMAT": "xml"})
    assert out.returncode == 1 and "KRAFT_LOG_FORMAT: 'xml' is not text or json" in out.stderr, out.stderr
