"""The code's shape as docs/architecture.md draws it: each layer imports only what its row of
the layer table names, and no two modules share a file name (a name says one thing)."""

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kraft"
ROOMS = ("runtime", "apis", "settings")
TOP_LEVEL = "kraft"  # a module directly in src/kraft/ (java_order.py): any layer may import it


def _layer_of(module: str) -> str:
    """`kraft.server.apis.admin` -> `server.apis`; `kraft.raft.core` -> `raft`."""
    parts = module.split(".")[1:]
    if len(parts) == 1 and (SRC / f"{parts[0]}.py").exists():
        return TOP_LEVEL
    if len(parts) > 1 and parts[0] == "server" and parts[1] in ROOMS:
        return f"server.{parts[1]}"
    return parts[0] if parts else ""


def _module_of(path: Path) -> str:
    return ".".join(("kraft", *path.relative_to(SRC).with_suffix("").parts))


def _imports(path: Path) -> set[str]:
    """Every kraft module `path` imports, at any depth of its code (deferred imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kraft":
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if node.module == "kraft.server")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "kraft")
    return found


def _layer_table() -> dict[str, set[str]]:
    """The layer table's rows: layer -> the layers its 'may import' column names."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc[doc.index("| package | owns | may import |"):].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        layer = cells[0].strip("`")
        rows[layer] = set(re.findall(r"`([a-z_.]+)`", cells[-1]))
    return {layer: named & set(rows) for layer, named in rows.items()}  # module names in passing are not layers


def test_the_layer_table_names_every_package():
    table = _layer_table()
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    layers = (packages - {"server"}) | {"server", *(f"server.{room}" for room in ROOMS)}
    assert set(table) == layers


def test_every_import_is_one_the_layer_table_allows():
    table = _layer_table()
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        layer = _layer_of(_module_of(path))
        for imported in sorted(_imports(path)):
            target = _layer_of(imported)
            if layer == TOP_LEVEL:
                wrong.append(f"{path.relative_to(ROOT)} imports {imported} (a top-level module imports nothing of "
                             "kraft's)")
            elif target not in (layer, "", TOP_LEVEL) and target not in table[layer]:
                wrong.append(f"{path.relative_to(ROOT)} imports {imported} ({layer} may not import {target})")
    assert not wrong, "\n".join(wrong)


def test_no_two_modules_share_a_file_name():
    places = defaultdict(list)
    for path in SRC.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            places[path.name].append(str(path.relative_to(SRC)))
    assert {name: where for name, where in places.items() if len(where) > 1} == {}
