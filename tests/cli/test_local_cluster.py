"""Port picking for local clusters: two processes never hand out the same port."""

import subprocess
import sys

from kraft.cli.local_cluster import _claim, free_port


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
