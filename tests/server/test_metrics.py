"""A node's Prometheus endpoint follows the core: gauges are read from it when scraped."""

from kraft.cli.cluster_client import create_topic, scrape
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
