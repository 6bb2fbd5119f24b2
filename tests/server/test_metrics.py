"""A node's Prometheus endpoint follows the core: gauges are read from it when scraped."""

from kraft.cli.cluster_client import create_topic, leader, scrape
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode

from .cluster_helpers import wait_for


def create(cluster: LocalCluster, name: str) -> None:
    assert create_topic(cluster.nodes[1].client_port, name, partitions=1, rf=1).error_code == ErrorCode.none


def test_quorum_gauges_and_snapshot_lag_follow_the_high_watermark(single):
    wait_for(lambda: scrape(single, 1)["kraft_current_leader"] == 1, what="node 1 to lead")
    before = scrape(single, 1)
    assert before["kraft_current_epoch"] >= 1 and before["kraft_log_start_offset"] == 0
    for name in ("a-0", "a-1", "a-2"):
        create(single, name)
    samples = scrape(single, 1)
    assert samples["kraft_high_watermark"] > before["kraft_high_watermark"] + 3
    assert samples["kraft_log_end_offset"] >= samples["kraft_high_watermark"]

    created = iter(range(1000))

    def snapshotted() -> bool:
        create(single, f"b-{next(created)}")
        return scrape(single, 1)["kraft_latest_snapshot_end_offset"] > 0

    wait_for(snapshotted, what="a snapshot")
    create(single, "c")  # committed after the snapshot: the lag must count it
    samples = scrape(single, 1)
    end = samples["kraft_latest_snapshot_end_offset"]
    assert samples["kraft_snapshot_lag"] == samples["kraft_high_watermark"] - end > 0
    assert samples["kraft_snapshot_size_bytes"] > 0


def test_kafkas_raft_metrics_are_served_under_the_jmx_exporters_names(tmp_path):
    """Dashboards made for Kafka read kraft: kafka_server_raft_metrics_* with node and role."""
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=1)
    with cluster:
        cluster.start()
        leader_id, epoch = leader(cluster)
        for i in range(3):
            assert create_topic(cluster.nodes[leader_id].client_port, f"m-{i}").error_code == ErrorCode.none
        observer = next(n for n, node in cluster.nodes.items() if not node.voter)
        wait_for(lambda: scrape(cluster, observer)[f'{RAFT}fetch_records_rate{{node="{observer}",role="observer"}}'] > 0,
                 what="the observer to count the records it fetched")
        samples = scrape(cluster, leader_id)
    labels = f'{{node="{leader_id}",role="voter"}}'
    assert samples[f'{RAFT}current_state{{node="{leader_id}",role="voter",state="leader"}}'] == 1
    assert samples[f"{RAFT}current_leader{labels}"] == leader_id
    assert samples[f"{RAFT}current_vote{labels}"] == leader_id  # a leader voted for itself
    assert samples[f"{RAFT}current_epoch{labels}"] == epoch
    assert samples[f"{RAFT}log_end_offset{labels}"] >= samples[f"{RAFT}high_watermark{labels}"] > 3
    assert samples[f"{RAFT}commit_latency_max{labels}"] >= samples[f"{RAFT}commit_latency_avg{labels}"] > 0
    assert samples[f"{RAFT}append_records_rate{labels}"] > 0
    assert 0 <= samples[f"{RAFT}poll_idle_ratio_avg{labels}"] <= 1
    assert samples[f"{RAFT}election_latency_max{labels}"] >= samples[f"{RAFT}election_latency_avg{labels}"] > 0


RAFT = "kafka_server_raft_metrics_"
