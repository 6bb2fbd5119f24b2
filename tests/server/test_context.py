"""The handlers' view of their node (kraft.server.apis.context): they take a NodeContext, never
the node's module, so no import in server/ closes a cycle; they read the log only
as the context gives it (committed bytes, start and end, the epoch history); they act by
`step`, which returns what the action returned."""

import ast
import inspect
from pathlib import Path

import kraft.server
from kraft.cli.cluster_client import create_topic
from kraft.protocol import ErrorCode
from kraft.records import iter_batches
from kraft.server.apis.admin import AdminApi
from kraft.server.apis.broker import BrokerLifecycle
from kraft.server.apis.client_api import ClientApi
from kraft.server.apis.client_reads import ClientReads
from kraft.server.apis.context import NodeContext
from kraft.server.apis.describe_cluster import DescribeCluster
from kraft.server.apis.describe_configs import DescribeConfigs
from kraft.server.apis.forwarding import Forwarding
from kraft.storage import FileRegion

from .cluster_helpers import QUIET
from .test_listeners import NodeThread

SERVER = Path(kraft.server.__file__).parent
# Every module of the server layer and its rooms (runtime, apis, settings), by dotted name.
MODULES = {".".join(("kraft.server", *p.relative_to(SERVER).with_suffix("").parts)): p
           for p in SERVER.rglob("*.py") if p.stem != "__init__"}
HANDLERS = (AdminApi, BrokerLifecycle, ClientApi, ClientReads, DescribeCluster, DescribeConfigs, Forwarding)
# What would let a handler read the files behind the context's back.
STORAGE_INTERNALS = {"FileLog", "FileSnapshotStore", "FileQuorumStateStore", "ReplicatedLog", "SnapshotStore"}


def imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import in the file, those under `if TYPE_CHECKING:` too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return found


def server_imports(path: Path) -> set[str]:
    """The modules of kraft.server the file imports, at any depth (a function's own imports
    too: the node once imported its handlers inside start(), which hid a cycle)."""
    found = set()
    for module, name in imports(path):
        if f"{module}.{name}" in MODULES:
            found.add(f"{module}.{name}")
        elif module in MODULES:
            found.add(module)
    return found


def test_the_server_package_has_no_import_cycle():
    graph = {module: server_imports(path) - {module} for module, path in MODULES.items()}
    assert "kraft.server.apis.client_api" in graph["kraft.server.runtime.node"], "the node builds its handlers"
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, "import cycle: " + " -> ".join(path[path.index(module):] + (module,))
        if module not in done:
            for target in sorted(graph[module]):
                visit(target, path + (module,))
            done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_handlers_take_a_context_and_never_the_storage():
    for handler in HANDLERS:
        path = Path(inspect.getfile(handler))
        assert inspect.signature(handler.__init__).parameters["node"].annotation is NodeContext, handler
        storage = {name for module, name in imports(path) if module.startswith("kraft.storage")}
        assert not storage & STORAGE_INTERNALS, f"{path.name} reaches the storage: {storage & STORAGE_INTERNALS}"
        assert "kraft.server.runtime.node" not in {module for module, _ in imports(path)}, path.name


def test_a_node_gives_its_handlers_committed_reads_and_steps_that_answer(tmp_path):
    n = NodeThread(tmp_path / "data", dict(QUIET))
    node = n.node
    try:
        declared = [name for name in vars(NodeContext) if not name.startswith("_")]
        assert "step" in declared and "read_committed" in declared
        assert [name for name in declared if not hasattr(node, name)] == []

        for i in range(3):
            assert create_topic(n.client_port, f"t-{i}", 1).error_code == ErrorCode.none

        async def read_all() -> tuple[int, int, bytes]:
            info = node.read_committed(node.log_start, 1 << 30)
            assert isinstance(info.data, FileRegion), "the segment's bytes, not a copy"
            return node.high_watermark, info.next_offset, info.tobytes()

        hw, next_offset, data = n.call(read_all())
        assert next_offset <= hw and next_offset > 0
        batches = list(iter_batches(data))
        assert batches[0].base_offset == 0 and batches[-1].next_offset == next_offset
        segment = (n.partition_dir / "00000000000000000000.log").read_bytes()
        assert segment[: len(data)] == data

        async def step() -> object:
            return node.step(lambda core, now: (core.epoch, core.is_leader, now > 0))

        assert n.call(step()) == (node.epoch, True, True)
    finally:
        n.close()
    assert node.step(lambda core, now: core.epoch) is None, "a stopped node runs no action"
