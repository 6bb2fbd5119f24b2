"""The map and the decision records point at things that exist: every link resolves, every
file and module they name is in the tree (the moves of issue 27 renamed many, and a map
naming a file that is gone sends a newcomer nowhere), and the one list of deliberate
differences from Kafka is where the team rule says it is, one complete row per difference."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kraft"
DOCS = [ROOT / "README.md", ROOT / "docs" / "architecture.md", *sorted((ROOT / "docs" / "decisions").glob("*.md"))]
DIFFERENCES = "## Where kraft differs from Kafka"


def _files_named(name: str) -> list[Path]:
    return [p for top in ("src", "tests", "bench") for p in (ROOT / top).rglob(name)]


def _file_exists(reference: str) -> bool:
    """`raft/core.py`, `src/kraft/raft/core.py`, `tests/x.py`, `bench/x.py` or a bare `core.py`."""
    reference = reference.removeprefix("./")
    if "/" not in reference:
        return (ROOT / reference).exists() or bool(_files_named(reference))
    return any((base / reference).exists() for base in (ROOT, SRC))


def _module_exists(dotted: str, source: str) -> bool:
    """`kraft.spark.logdir`, or a module and a name it defines (`kraft.protocol.ErrorCode`);
    a key or feature name kraft's code spells as a string (`kraft.metrics.port`) is not a module."""
    if f'"{dotted}"' in source:
        return True
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        path = ROOT / "src" / Path(*parts[:end])
        found = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
        if found.exists():
            rest = parts[end:]
            return not rest or re.search(rf"\b{re.escape(rest[0])}\b", found.read_text()) is not None
    return False


def test_every_link_in_the_docs_resolves():
    broken = []
    for doc in DOCS:
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in link and not (doc.parent / link).exists():
                broken.append(f"{doc.relative_to(ROOT)} links to {link}")
    assert not broken, "\n".join(broken)


def test_every_file_and_module_the_docs_name_exists():
    source = "\n".join(p.read_text() for p in SRC.rglob("*.py"))
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        for reference in sorted(set(re.findall(r"[\w./-]*\w\.(?:py|pyi|c)\b", text))):
            if not _file_exists(reference):
                missing.append(f"{doc.relative_to(ROOT)} names {reference}")
        for dotted in sorted(set(re.findall(r"`(kraft(?:\.\w+)+)", text))):
            if not _module_exists(dotted, source):
                missing.append(f"{doc.relative_to(ROOT)} names {dotted}")
    assert not missing, "\n".join(missing)


def test_the_differences_from_kafka_are_one_table_of_complete_rows():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert doc.count(DIFFERENCES) == 1
    section = doc.split(DIFFERENCES, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[0].replace(" ", "") == "|area|Kafka|kraft|why|"
    incomplete = [row for row in rows[2:] if len([c for c in row.strip("|").split(" | ") if c.strip()]) != 4]
    assert rows[2:] and not incomplete, "\n".join(incomplete)
    for decisions in (ROOT / "docs").rglob("*.md"):
        if decisions.name != "architecture.md":
            assert DIFFERENCES not in decisions.read_text(), f"{decisions} holds a second list of differences"
