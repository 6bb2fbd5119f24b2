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


class InvalidClusterIdError(ValueError):
    """A cluster id that is not a Kafka UUID (22 characters of URL-safe base64, 16 bytes)."""


def check_cluster_id(text: str) -> str:
    """`text` if it is a Kafka UUID as Uuid.fromString reads it; else InvalidClusterIdError."""
    if len(text) > 24:
        raise InvalidClusterIdError(f"Cluster ID string {text[:24]}... is too long to be a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raw = b""
    if len(raw) != 16 or text.startswith("-"):
        raise InvalidClusterIdError(
            f"Cluster ID string {text!r} does not appear to be a valid UUID: it must be 16 bytes in URL-safe "
            "base64 (22 characters), not starting with '-'; `kraft storage random-uuid` makes one"
        )
    return text


def random_cluster_id() -> str:
    """Kafka's cluster ids: 16 random bytes in URL-safe base64, 22 characters. Like Kafka's
    Uuid.randomUuid, never one that starts with '-', which a command line takes for a flag."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def format_storage(log_dir: Path, cluster_id: str, node_id: int, *, ignore_formatted: bool = True) -> bool:
    """`kafka-storage format`: writes meta.properties; True if it did. A directory already
    formatted for this cluster and node is left alone when `ignore_formatted` (Kafka's
    --ignore-formatted), an error otherwise; formatted for another, always an error."""
    path = log_dir / META_PROPERTIES
    if path.exists():
        found = read_meta_properties(log_dir)
        if found != (cluster_id, node_id):
            raise StorageNotFormattedError(
                f"{path} is already formatted for cluster {found[0]} node {found[1]}, not {cluster_id} node {node_id}"
            )
        if not ignore_formatted:
            raise StorageNotFormattedError(
                f"Log directory {log_dir} is already formatted. Use --ignore-formatted to ignore this directory "
                "and format the others."
            )
        return False
    log_dir.mkdir(parents=True, exist_ok=True)
    body = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode()
    fsutil.atomic_write(path, body + f"{_CHECKSUM}{crc32c.crc32c(body)}\n".encode())
    return True


def read_meta_entries(log_dir: Path) -> dict[str, str]:
    """meta.properties' keys and values, checksum checked (`kraft storage info` shows them)."""
    path = log_dir / META_PROPERTIES
    try:
        text = _checked(path).decode()
    except UnicodeDecodeError as e:
        raise StorageNotFormattedError(f"{path} is not a meta.properties file ({e})") from None
    return {k.strip(): v.strip() for k, v in (line.split("=", 1) for line in text.splitlines()
                                              if "=" in line and not line.startswith("#"))}


def _checked(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise StorageNotFormattedError(f"{path.parent} is not formatted: run `kraft storage format`") from None
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
    return raw


def read_meta_properties(log_dir: Path) -> tuple[str, int]:
    """(cluster id, node id), or StorageNotFormattedError naming the file and what is wrong."""
    entries = read_meta_entries(log_dir)
    try:
        return entries["cluster.id"], int(entries["node.id"])
    except (KeyError, ValueError) as e:
        raise StorageNotFormattedError(f"{log_dir / META_PROPERTIES} is not a meta.properties file ({e})") from None
