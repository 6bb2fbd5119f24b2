"""meta.properties: which cluster and which node a data directory belongs to.

`kafka-storage format` writes it once; every start reads it, and a node refuses a directory
formatted for another cluster or node id. kraft adds a checksum as a comment line, which
Kafka's properties reader skips: a flipped bit in the cluster id would otherwise make the
node join no cluster at all (its peers refuse an unknown id), or, in the node id, take
another node's place. A file written by Kafka has no checksum line and is read as it is.
"""

import base64
import uuid
from pathlib import Path

import crc32c

from kraft.storage import fsutil

META_PROPERTIES = "meta.properties"
_CHECKSUM = "# kraft crc32c="


class StorageNotFormattedError(Exception):
    """The directory holds no usable meta.properties for this node."""


def random_cluster_id() -> str:
    """Kafka's cluster ids: 16 random bytes in URL-safe base64, 22 characters. Like Kafka's
    Uuid.randomUuid, never one that starts with '-', which a command line takes for a flag."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def format_storage(log_dir: Path, cluster_id: str, node_id: int) -> None:
    """`kafka-storage format`: writes meta.properties (once; a formatted dir is left alone
    if it matches, and refused if it does not)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / META_PROPERTIES
    if path.exists():
        found = read_meta_properties(log_dir)
        if found != (cluster_id, node_id):
            raise StorageNotFormattedError(
                f"{path} is already formatted for cluster {found[0]} node {found[1]}, not {cluster_id} node {node_id}"
            )
        return
    body = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode()
    fsutil.atomic_write(path, body + f"{_CHECKSUM}{crc32c.crc32c(body)}\n".encode())


def read_meta_properties(log_dir: Path) -> tuple[str, int]:
    """(cluster id, node id), or StorageNotFormattedError naming the file and what is wrong."""
    path = log_dir / META_PROPERTIES
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise StorageNotFormattedError(f"{log_dir} is not formatted: run `kraft storage format`") from None
    except OSError as e:
        raise StorageNotFormattedError(f"{path}: cannot read: {e.strerror}") from None
    mark = raw.rfind(_CHECKSUM.encode())
    if mark >= 0:
        expected = raw[mark + len(_CHECKSUM) :].strip()
        if not expected.isdigit() or int(expected) != crc32c.crc32c(raw[:mark]):
            raise StorageNotFormattedError(
                f"{path}: checksum mismatch: the file is damaged; format the directory's meta.properties "
                "again with the cluster's id (`kraft storage format --config ... --cluster-id ...`) after "
                "moving the damaged file away"
            )
    try:
        text = raw.decode()
        entries = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
        return entries["cluster.id"].strip(), int(entries["node.id"])
    except (KeyError, ValueError) as e:
        raise StorageNotFormattedError(f"{path} is not a meta.properties file ({e})") from None
