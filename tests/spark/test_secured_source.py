"""format("kraft") against a secured cluster, with the security options written exactly as
for Spark's own Kafka source (kafka.security.protocol, kafka.ssl.*, kafka.sasl.*), in a real
local[2] Spark against a real node whose client listener is SASL_SSL with SCRAM-SHA-512.
The settings travel to every task as text; each task's consumer makes its own TLS context
and login."""

import json

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.client import Consumer, ConsumerRecord, TopicPartition
from kraft.metadata import decode_record
from kraft.protocol.connection import ClientLogin
from kraft.security.local_ca import CertificateAuthority
from tests.security.secured import client_tls, tls_overrides, wait_for_leader
from tests.server.cluster_helpers import wait_for

TOPIC = "__cluster_metadata"
TP = TopicPartition(TOPIC, 0)
PASSWORD = "reader-Secret-1"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secured")
    ca = CertificateAuthority(directory / "certs")
    overrides = {**tls_overrides(ca, ca.issue("node"), "CONTROLLER:SSL,PLAINTEXT:SASL_SSL"),
                 "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    cluster = LocalCluster(directory / "cluster", voters=1, observers=0, overrides=overrides,
                           add_scram=[f"SCRAM-SHA-512=[name=reader,password={PASSWORD}]"])
    cluster.start()
    try:
        wait_for_leader(cluster, client_tls(ca), ClientLogin.with_password("SCRAM-SHA-512", "reader", PASSWORD))
        yield cluster, ca
    finally:
        cluster.stop()


def spark_kafka_options(cluster: LocalCluster, ca: CertificateAuthority, password: str) -> dict[str, str]:
    """What a Spark user writes for format("kafka") against a SASL_SSL/SCRAM cluster."""
    return {"kafka.bootstrap.servers": cluster.bootstrap_servers(), "subscribe": TOPIC,
            "kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(ca.cert), "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": f'{SCRAM_MODULE} required username="reader" password="{password}";'}


def test_a_batch_read_over_sasl_ssl_with_spark_kafka_source_options(spark, secured):
    cluster, ca = secured
    security = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.cert), "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "reader", "sasl.password": PASSWORD}
    reference: list[ConsumerRecord] = []
    with Consumer(cluster.bootstrap_servers(), security=security, auto_offset_reset="earliest",
                  include_control=True, fetch_max_wait_ms=100) as consumer:
        consumer.assign([TP])
        end = consumer.end_offsets([TP])[TP].offset
        wait_for(lambda: bool(reference.extend(consumer.poll(200))) or consumer.position(TP) >= end,
                 what=f"offset {end}")
    reference = [r for r in reference if r.offset < end]
    assert end > 0

    df = (spark.read.format("kraft").options(**spark_kafka_options(cluster, ca, PASSWORD))
          .option("startingOffsets", "earliest").option("endingOffsets", json.dumps({TOPIC: {"0": end}}))
          .option("minPartitions", "2").load())
    assert df.rdd.getNumPartitions() == 2  # two tasks, each logging in on its own
    rows = df.orderBy("offset").collect()
    assert [(r.offset, r.leaderEpoch, r.isControl, r.key, r.value) for r in rows] == \
        [(r.offset, r.leader_epoch, r.is_control, r.key, r.value) for r in reference]
    # reader's credential is read with its name, mechanism and iterations, its salt and keys
    # emptied by the node (issue 25: no credential leaves a node but to a node)
    [credential] = [decode_record(bytes(r.value)) for r in rows
                    if not r.isControl and r.value is not None and bytes(r.value)[1] == 11]
    assert (credential.name, credential.mechanism, credential.iterations) == ("reader", 2, 4096)
    assert (credential.salt, credential.stored_key, credential.server_key) == (b"", b"", b"")

    wrong = spark.read.format("kraft").options(**spark_kafka_options(cluster, ca, "wrong")).load()
    with pytest.raises(Exception, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        wrong.collect()
