import pytest

from kraft.cli.local_cluster import LocalCluster


@pytest.fixture
def single(tmp_path):
    """One voter, which commits alone; a snapshot once 3000 bytes are committed since the last."""
    c = LocalCluster(tmp_path / "cluster", voters=1, observers=0, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "3000",
        "metadata.snapshot.min.changed_records.ratio": "0",
    })
    c.start()
    yield c
    c.stop()


@pytest.fixture
def cluster(tmp_path):
    """Three voters and an observer."""
    c = LocalCluster(tmp_path / "cluster", voters=3, observers=1)
    c.start()
    yield c
    c.stop()


@pytest.fixture
def node(tmp_path):
    """One voter run in a thread of the test process (test_listeners.NodeThread), which
    snapshots every 2000 bytes."""
    from .cluster_helpers import QUIET
    from .test_listeners import NodeThread

    n = NodeThread(tmp_path / "data", {
        "metadata.log.max.record.bytes.between.snapshots": "2000",
        "metadata.snapshot.min.changed_records.ratio": "0",
        **QUIET,
    })
    yield n
    n.close()
