"""Local clusters: two processes never hand out the same port, and a failed start leaves no node behind."""

import socket
import subprocess
import sys

import pytest

from kraft.cli.local_cluster import LocalCluster, _claim, free_port


def test_a_port_claimed_here_is_refused_to_another_process_until_this_one_exits():
    port = free_port()
    assert not _claim(port), "a port is handed out once per process"
    probe = f"from kraft.cli.local_cluster import _claim; print(_claim({port}))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
    # The claim lives as long as its process: once a claiming child exits, the port is free.
    child_port = int(subprocess.run([sys.executable, "-c", "from kraft.cli.local_cluster import free_port; "
                                     "print(free_port())"], capture_output=True, text=True, check=True).stdout)
    assert _claim(child_port)


def test_a_node_that_fails_to_start_takes_the_nodes_started_with_it_down(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", voters=3, observers=0)
    with socket.socket() as holder:  # node 2's client port is taken: it cannot start
        holder.bind(("127.0.0.1", cluster.nodes[2].client_port))
        holder.listen()
        with pytest.raises(RuntimeError, match="node 2 exited"):
            cluster.start()
    assert not any(node.running for node in cluster.nodes.values()), "a node was left running"


def test_a_cluster_started_again_on_its_directory_keeps_every_port(tmp_path):
    def ports(cluster: LocalCluster) -> dict:  # an observer has no controller listener
        return {n: (node.controller_port if node.voter else None, node.client_port, node.metrics_port)
                for n, node in cluster.nodes.items()}

    first = LocalCluster(tmp_path / "cluster", voters=2, observers=1)
    again = LocalCluster(tmp_path / "cluster", voters=2, observers=1)
    assert ports(again) == ports(first)
    assert again.cluster_id == first.cluster_id


@pytest.mark.parametrize("voters, observers", [(0, 1), (-1, 1), (1, -2)])
def test_cluster_up_refuses_an_impossible_cluster_before_writing_anything(tmp_path, voters, observers):
    out = subprocess.run([sys.executable, "-m", "kraft.cli", "cluster", "up", "--voters", str(voters),
                          "--observers", str(observers), "--dir", str(tmp_path / "c")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "at least one voter" in out.stderr
    assert not (tmp_path / "c").exists()
