"""The kraft.version upgrade (Kafka 4.1) on a running static quorum of three real node
processes (controller.quorum.voters), as an operator does it with Kafka's commands:
`kafka-features upgrade --feature kraft.version=1`, then `kafka-metadata-quorum
add-controller` for a fourth controller and `remove-controller` for one of the first three;
a downgrade of kraft.version is refused as Kafka refuses it, and after every node restarts
the voters are the log's, not controller.quorum.voters."""

import asyncio
import os
import signal
import subprocess
import sys
import uuid

from kafka.admin import KafkaAdminClient

from kraft.cli.local_cluster import LOCAL_DEFAULTS, LocalCluster, free_port
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.connection import KafkaConnection
from kraft.storage.meta_properties import kafka_text, read_directory_id

from .test_dynamic_quorum import kraft, until
from .test_features_tool import described


def kraft_version(client: str) -> tuple[str, str, str] | None:
    """kraft.version's line of `kraft features describe` at a node, once it has applied the
    metadata log's first records (before, Kafka's tool prints Epoch: - and level UNKNOWN 0)."""
    out = kraft("features", "--bootstrap-server", client, "describe")
    assert out.returncode == 0, out.stderr
    if "Epoch: -" in out.stdout:
        return None
    return described(out.stdout)["kraft.version"]


def registration_answer(cluster: LocalCluster, kraft_versions: tuple[int, int]) -> str | None:
    """The active controller's answer (its error's name) to a BrokerRegistration of a broker 9
    listing metadata.version 7 and `kraft_versions` (the other controllers: NOT_CONTROLLER)."""
    low, high = kraft_versions
    request = build_request(62, 3, {
        "broker_id": 9, "cluster_id": cluster.cluster_id, "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9, "security_protocol": 0}],
        "features": [{"name": "kraft.version", "min_supported_version": low, "max_supported_version": high},
                     {"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 7}],
        "rack": None, "log_dirs": [], "previous_broker_epoch": -1})

    async def ask(port: int) -> ErrorCode:
        connection = await KafkaConnection.connect("127.0.0.1", port)
        try:
            return (await connection.request(request, 10)).error_code
        finally:
            connection.close()

    for node in cluster.nodes.values():
        answer = asyncio.run(ask(node.controller_port))
        if answer != ErrorCode.not_controller:
            return answer.name
    return None


def registered_brokers(cluster: LocalCluster) -> set[int]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(), request_timeout_ms=30000)
    try:
        return {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()


def test_a_static_quorum_upgraded_to_kraft_version_1_takes_voter_changes_that_survive_a_restart(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0)
    controllers = ",".join(f"127.0.0.1:{n.controller_port}" for n in cluster.nodes.values())
    first = f"127.0.0.1:{cluster.nodes[1].controller_port}"
    # The fourth controller finds the quorum through controller.quorum.bootstrap.servers (a
    # controller named in no controller.quorum.voters), formatted without initial controllers.
    ports = (free_port(), free_port(), free_port())
    node4 = tmp_path / "node-4.properties"
    node4.write_text("".join(f"{k}={v}\n" for k, v in {
        "node.id": 4, "process.roles": "broker,controller", "controller.quorum.bootstrap.servers": controllers,
        "listeners": f"CONTROLLER://127.0.0.1:{ports[0]},PLAINTEXT://127.0.0.1:{ports[1]}",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": tmp_path / "data-4",
        "kraft.metrics.port": ports[2], **LOCAL_DEFAULTS}.items()))
    formatted = kraft("storage", "format", "-t", cluster.cluster_id, "-c", str(node4), "--no-initial-controllers")
    assert formatted.returncode == 0, formatted.stderr
    directories = {n: kafka_text(read_directory_id(node.data_dir)) for n, node in cluster.nodes.items()}
    directories[4] = kafka_text(read_directory_id(tmp_path / "data-4"))
    fourth: subprocess.Popen | None = None

    def start_fourth() -> subprocess.Popen:
        with open(tmp_path / "node-4.log", "ab") as log:
            return subprocess.Popen([sys.executable, "-m", "kraft.cli", "server", "start", str(node4)], stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    features = ("features", "--bootstrap-controller", first)
    quorum = ("metadata-quorum", "--bootstrap-controller", first)

    def voters() -> str | None:
        out = kraft(*quorum, "describe", "--status")
        return out.stdout.split("CurrentObservers")[0] if out.returncode == 0 else None

    try:
        cluster.start()
        assert until(lambda: kraft_version(cluster.nodes[2].client)) == ("0", "1", "0")
        same = kraft(*features, "downgrade", "--feature", "kraft.version=0")  # its level already: Kafka says done
        assert (same.returncode, same.stdout) == (0, "kraft.version was downgraded to 0.\n"), same.stderr
        refused_add = kraft(*quorum, "--command-config", str(node4), "add-controller")
        assert refused_add.returncode == 1 and "UNSUPPORTED_VERSION" in refused_add.stderr, refused_add.stderr

        def upgraded() -> str | None:
            out = kraft(*features, "upgrade", "--feature", "kraft.version=1")
            if out.returncode == 0:
                return out.stdout
            # Until every voter has told the leader its entry (UpdateRaftVoter).
            assert "because not all of the voters support it" in out.stdout, out.stdout + out.stderr
            return None

        assert until(upgraded, what="kraft.version upgraded") == "kraft.version was upgraded to 1.\n"
        for node in cluster.nodes.values():  # every node's ApiVersions, once it has the records
            until(lambda c=node.client: kraft_version(c) == ("0", "1", "1"), what=f"kraft.version 1 at {node.client}")
        down = kraft(*features, "downgrade", "--feature", "kraft.version=0")
        assert (down.returncode, down.stdout, down.stderr) == (
            1, "Could not downgrade kraft.version to 0. The update failed for all features since the following "
               "feature had an error: Invalid update version 0 for feature kraft.version. Can't downgrade the "
               "version of this feature.\n", "1 out of 1 operation(s) failed.\n")
        # A broker that knows only a static quorum may not join now (Kafka's controller refuses it).
        assert until(lambda: registration_answer(cluster, (0, 0))) == "unsupported_version"
        first_voters = voters()
        assert first_voters and all(f'"id": {n}, "directoryId": "{directories[n]}"' in first_voters for n in (1, 2, 3))

        fourth = start_fourth()

        def added() -> str | None:
            out = kraft(*quorum, "--command-config", str(node4), "add-controller")
            if out.returncode == 0:
                return out.stdout
            assert "REQUEST_TIMED_OUT" in out.stderr, out.stderr  # node 4 not caught up yet
            return None

        assert until(added, what="node 4 added") == (
            f"Added controller 4 with directory id {directories[4]} and endpoints: CONTROLLER://127.0.0.1:{ports[0]}\n")
        removed = kraft("metadata-quorum", "--bootstrap-controller", controllers, "remove-controller",
                        "--controller-id", "1", "--controller-directory-id", directories[1])
        assert (removed.returncode, removed.stdout) == (
            0, f"Removed KRaft controller 1 with directory id {directories[1]}\n"), removed.stderr

        def log_voters(v: str | None) -> bool:
            return bool(v) and '"id": 1,' not in v and all(  # type: ignore[operator]
                f'"id": {n}, "directoryId": "{directories[n]}"' in v for n in (2, 3, 4))  # type: ignore[operator]

        until(lambda: log_voters(voters()), what="voters 2, 3 and 4")

        # Every node restarts; nodes 1-3 still say controller.quorum.voters=1,2,3.
        cluster.stop()
        os.killpg(fourth.pid, signal.SIGTERM)
        fourth.wait(30)
        cluster.start()
        fourth = start_fourth()
        quorum = ("metadata-quorum", "--bootstrap-controller", controllers)
        until(lambda: log_voters(voters()), what="voters 2, 3 and 4 after the restart")
        assert until(lambda: kraft_version(cluster.nodes[3].client)) == ("0", "1", "1")
        # kraft's own brokers, which list kraft.version 0-1, registered again under kraft.version 1.
        until(lambda: registered_brokers(cluster) == {1, 2, 3, 4}, what="brokers 1-4 registered")
    finally:
        if fourth is not None:
            os.killpg(fourth.pid, signal.SIGKILL)
            fourth.wait()
        cluster.stop()
