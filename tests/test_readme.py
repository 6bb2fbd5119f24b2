"""The README as a newcomer reads it: every Python block runs as written, and nothing in it
points outside the repository. The chart of the decoded history has its own test, with its
data checked (tests/spark/test_readme.py); the other blocks run here against a node that
listens where they say, 127.0.0.1:9092, with a copy of its metadata.log.dir in ./metadata."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraft.cli.cluster_client import create_topic
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode

from .server.cluster_helpers import QUIET

README = Path(__file__).parents[1] / "README.md"
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "leader-changes.png" not in b]


def test_the_readme_points_nowhere_outside_the_repository():
    text = README.read_text()
    assert "../" not in text and "shared/" not in text
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        assert (README.parent / link).exists(), f"the README links to {link}, which is not in the repository"


@pytest.fixture(scope="module")
def node_on_9092(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("readme") / "cluster", voters=1, observers=0, overrides=QUIET)
    cluster.nodes[1].client_port = 9092
    cluster.write_configs()
    try:
        cluster.start()
    except RuntimeError as e:
        pytest.fail(f"a node must listen on 127.0.0.1:9092, as the README says: {e}")
    try:
        for i in range(3):
            assert create_topic(9092, f"readme-{i}").error_code == ErrorCode.none
        yield cluster
    finally:
        cluster.stop()


# What each block must have done, checked after it runs (keyed by a line of the block).
CHECKS = {
    "consumer.poll": "assert records and positions",
    "kraft.spark.session()": "assert live.count() > 3 and files.count() > 3 and topics.count() >= 3\n"
                             "assert stream.isStreaming",
}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block-{i}" for i in range(len(BLOCKS))])
def test_every_python_block_runs_as_written(node_on_9092, tmp_path, block):
    shutil.copytree(node_on_9092.nodes[1].data_dir, tmp_path / "metadata", ignore=shutil.ignore_patterns(".lock"))
    (check,) = [c for key, c in CHECKS.items() if key in block]
    check = f"\n{check}\nprint('RAN')\n"
    out = subprocess.run([sys.executable, "-c", block + check], cwd=tmp_path, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "RAN", out.stderr[-3000:]
