"""Live clusters for the admin tools' tests, and the tools run as a user runs them.

Two clusters, each started once for every test that asks: `plain` (three voters and an
observer, PLAINTEXT) and `secured` (the secure demo's: SASL_SSL with SCRAM-SHA-512 on the
client listener, the authorizer on, admin a super user). A tool is run as a process
(`python -m kraft.cli`), with `--command-config` holding Kafka's client security settings on
the secured cluster. What the tool prints is compared with what Kafka's tool prints for
the state that kafka-python's admin client (a client kraft did not write) reads back.
"""

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft.cli.demo_security import ADMIN, MECHANISM, DemoSecurity
from kraft.cli.local_cluster import LocalCluster
from kraft.server.settings.security_config import STANDARD_AUTHORIZER

from ..server.cluster_helpers import wait_for

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
# Kafka's ACL examples need an authorizer (without one every ACL API answers SECURITY_DISABLED):
# the plain cluster has Kafka's, letting everyone do what no ACL names, as an open cluster does.
OPEN_AUTHORIZER = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}


@dataclass
class ToolCluster:
    name: str
    cluster: LocalCluster
    config: Path | None  # --command-config: Kafka's client settings for admin, on the secured cluster
    kafka_python: dict[str, Any]  # the same for kafka-python's clients

    @property
    def bootstrap(self) -> str:
        return self.cluster.nodes[1].client

    def connection(self, config_flag: str = "--command-config") -> list[str]:
        """--bootstrap-server, and the admin's settings where the cluster needs them."""
        return ["--bootstrap-server", self.bootstrap, *([config_flag, str(self.config)] if self.config else [])]

    def kraft(self, tool: str, *args: str, config_flag: str = "--command-config", stdin: str | None = None,
              connect: bool = True) -> subprocess.CompletedProcess:
        """`kraft <tool> <connection> <args>` as a process: its exit code, stdout and stderr."""
        command = [sys.executable, "-m", "kraft.cli", *tool.split(), *(self.connection(config_flag) if connect
                                                                       else []), *args]
        return subprocess.run(command, capture_output=True, text=True, input=stdin, timeout=120)

    def admin(self) -> Any:
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap_servers(), request_timeout_ms=30000,
                                **self.kafka_python)

    def login_of(self, user: str, password: str) -> Path:
        """A --command-config for `user`, made a SCRAM credential (by admin) on the secured
        cluster: a user no ACL lets do anything."""
        from kafka.admin import UserScramCredentialUpsertion

        assert self.config is not None, "only the secured cluster has logins"
        admin = self.admin()
        try:
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, MECHANISM, password)])
        finally:
            admin.close()
        lines = [line for line in self.config.read_text().splitlines() if not line.startswith("sasl.jaas.config")]
        lines.append(f'sasl.jaas.config={SCRAM_MODULE} required username="{user}" password="{password}";')
        path = self.config.with_name(f"{user}.properties")
        path.write_text("\n".join(lines) + "\n")
        return path

    def brokers_unfenced(self, count: int) -> None:
        """Waits until `count` brokers are registered and unfenced (topics need them)."""
        def ready() -> bool:
            result = self.kraft("topics", "--create", "--topic", "probe-rf", "--replication-factor", str(count),
                                "--if-not-exists")
            return result.returncode == 0
        wait_for(ready, timeout=90, what=f"{count} unfenced brokers")


def plain_cluster(directory: Path) -> Iterator[ToolCluster]:
    cluster = LocalCluster(directory, voters=3, observers=1, overrides={**GROUPS, **OPEN_AUTHORIZER})
    cluster.start()
    try:
        tools = ToolCluster("plain", cluster, None, {})
        tools.brokers_unfenced(4)
        yield tools
    finally:
        cluster.stop()


def secured_cluster(directory: Path) -> Iterator[ToolCluster]:
    security = DemoSecurity(directory / "certs")
    cluster = LocalCluster(directory / "cluster", voters=1, observers=1, overrides={**security.overrides(), **GROUPS},
                           add_scram=security.add_scram())
    cluster.start()
    try:
        config = directory / "admin.properties"  # as a Kafka user writes it for Kafka's tools
        config.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={MECHANISM}\n"
            f'sasl.jaas.config={SCRAM_MODULE} required username="{ADMIN}" password="{security.passwords[ADMIN]}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={security.ca.cert}\n")
        tools = ToolCluster("secured", cluster, config, security.kafka_python(ADMIN))
        tools.brokers_unfenced(2)
        yield tools
    finally:
        cluster.stop()
