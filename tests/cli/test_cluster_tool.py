"""`kraft cluster cluster-id` and `kraft cluster unregister` against live clusters (plain
and secured), as Kafka's kafka-cluster prints them."""

from ..server.cluster_helpers import wait_for


def test_cluster_id_is_the_one_kafka_python_reads(tools):
    admin = tools.admin()
    try:
        cluster_id = admin.describe_cluster()["cluster_id"]
    finally:
        admin.close()
    shown = tools.kraft("cluster cluster-id", config_flag="--config")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"Cluster ID: {cluster_id}\n", "")
    through_controller = tools.kraft("cluster cluster-id", "--bootstrap-controller",
                                     f"127.0.0.1:{tools.cluster.nodes[1].controller_port}", connect=False)
    if tools.config is None:  # the secured cluster's controller listener takes the nodes' certificate only
        assert through_controller.stdout == f"Cluster ID: {cluster_id}\n"


def test_unregister_removes_a_stopped_brokers_registration(plain):
    def registered() -> set[int]:
        admin = plain.admin()
        try:
            return {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
        finally:
            admin.close()

    missing = plain.kraft("cluster unregister", "--id", "9", config_flag="--config")
    assert (missing.returncode, missing.stderr) == (
        1, "org.apache.kafka.common.errors.BrokerIdNotRegisteredException: Broker ID 9 is not currently registered\n")
    plain.cluster.stop(4)
    try:
        done = plain.kraft("cluster unregister", "--id", "4", config_flag="--config")
        assert (done.returncode, done.stdout) == (0, "Broker 4 is no longer registered.\n")
        wait_for(lambda: 4 not in registered(), what="broker 4 gone from DescribeCluster")
        again = plain.kraft("cluster unregister", "--id", "4", config_flag="--config")
        assert again.returncode == 1
    finally:
        plain.cluster.start(4)
    wait_for(lambda: 4 in registered(), timeout=60, what="broker 4 registered again at its start")
    plain.brokers_unfenced(4)


def test_unregister_needs_alter_on_the_cluster(secured):
    unknown = secured.kraft("cluster unregister", "--id", "9", config_flag="--config")
    assert "BrokerIdNotRegisteredException" in unknown.stderr, "admin, a super user, is let through"
    reader = secured.login_of("unregister-reader", "reader-pw")
    refused = secured.kraft("cluster unregister", "--bootstrap-server", secured.bootstrap, "--config", str(reader),
                            "--id", "2", connect=False)
    assert (refused.returncode, refused.stderr) == (
        1, "org.apache.kafka.common.errors.ClusterAuthorizationException: Authorization failed.\n")
