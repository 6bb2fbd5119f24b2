"""Every Metadata answer is one a client can act on: the controller and each partition
leader it names are brokers of that same answer (or none, -1), also while a restarted
cluster's brokers register again fenced. kafka-python's admin client built on an answer
naming an unlisted node fails every call with UnknownBrokerIdError for its whole life."""

import threading
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode
from tests.server.cluster_helpers import QUIET, create_topics, wait_for
from tests.server.test_client_reads import ask

METADATA = 3
ALL_TOPICS = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def unlisted_names(answer: Any) -> list[str]:
    """What the answer names that its broker list lacks; a leader of none must say why."""
    listed = {b.node_id for b in answer.brokers} | {-1}
    wrong = [] if answer.controller_id in listed else [f"controller {answer.controller_id}"]
    for topic in answer.topics:
        for p in topic.partitions:
            if p.leader_id not in listed:
                wrong.append(f"{topic.name}-{p.partition_index} leader {p.leader_id}")
            elif p.leader_id == -1 and p.error_code not in (ErrorCode.leader_not_available,
                                                            ErrorCode.listener_not_found):
                wrong.append(f"{topic.name}-{p.partition_index} without a leader but error {p.error_code}")
    return wrong


def settled(answer: Any, nodes: int) -> bool:
    return len(answer.brokers) == nodes and all(
        p.leader_id >= 0 for t in answer.topics for p in t.partitions)


def test_metadata_names_only_brokers_it_lists_while_a_cluster_restarts(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0, overrides=QUIET)
    answers: list[Any] = []
    stop = threading.Event()

    def ask_every_node() -> None:
        while not stop.is_set():
            for node in cluster.nodes.values():
                try:
                    answers.append(ask(node.client_port, METADATA, 12, ALL_TOPICS))
                except (TimeoutError, OSError, EOFError):
                    pass  # not listening yet

    asker = threading.Thread(target=ask_every_node, daemon=True)
    try:
        cluster.start()
        create_topics(cluster, "spread", 6)  # leaders on every broker
        cluster.stop()
        asker.start()
        cluster.start()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(), request_timeout_ms=5000)
        try:
            def admin_works() -> bool:
                try:
                    return len(admin.describe_topics([f"spread-{i}" for i in range(6)])) == 6
                except KafkaError:
                    return False

            wait_for(admin_works, timeout=90, what="an admin client made during the start to work")
        finally:
            admin.close()
        wait_for(lambda: bool(answers) and settled(answers[-1], 3), timeout=90, what="every broker registered")
    finally:
        stop.set()
        cluster.stop()
    if asker.is_alive():
        asker.join(30)
    wrong = [(i, unlisted_names(a)) for i, a in enumerate(answers) if unlisted_names(a)]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers name unlisted nodes, first: {wrong[0]}"
