"""meta.properties: which cluster and which node a data directory belongs to, and the
directory's own id.

`kafka-storage format` writes it once; every start reads it, and a node refuses a directory
formatted for another cluster or node id. Version 1 (Kafka's since KIP-858) also names the
directory: `directory.id`, a Kafka UUID made when the directory is formatted. KIP-853 keys a
voter by (node id, directory id), so a voter whose disk was lost and formatted again comes
back as another replica, which cannot vote on the strength of what the old disk promised.

kraft adds a checksum as a comment line, which Kafka's properties reader skips: a flipped
bit in the cluster id would otherwise make the node join no cluster at all (its peers
refuse an unknown id), or, in the node id, take another node's place. A file written by
Kafka has no checksum line and is read as it is.
"""

import base64
import uuid
from collections.abc import Callable
from pathlib import Path

import crc32c

from kraft.storage import fsutil

META_PROPERTIES = "meta.properties"
_CHECKSUM = "# kraft crc32c="


class StorageNotFormattedError(Exception):
    """The directory holds no usable meta.properties for this node."""


class InvalidClusterIdError(ValueError):
    """A cluster id that is not a Kafka UUID (22 characters of URL-safe base64, 16 bytes)."""


def uuid_from_kafka_text(text: str) -> uuid.UUID:
    """A Kafka UUID's text (Uuid.fromString: URL-safe base64 of 16 bytes, padding optional);
    ValueError saying what is wrong otherwise."""
    if len(text) > 24:
        raise ValueError(f"{text[:24]}... is too long to be a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a UUID: 16 bytes in URL-safe base64 (22 characters)")
    return uuid.UUID(bytes=raw)


def kafka_text(value: uuid.UUID) -> str:
    """Kafka's text form of a UUID: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def check_cluster_id(text: str) -> str:
    """`text` if it is a Kafka UUID as Uuid.fromString reads it; else InvalidClusterIdError."""
    if len(text) > 24:
        raise InvalidClusterIdError(f"Cluster ID string {text[:24]}... is too long to be a base64 UUID")
    try:
        uuid_from_kafka_text(text)
    except ValueError:
        valid = False
    else:
        valid = not text.startswith("-")
    if not valid:
        raise InvalidClusterIdError(
            f"Cluster ID string {text!r} does not appear to be a valid UUID: it must be 16 bytes in URL-safe "
            "base64 (22 characters), not starting with '-'; `kraft storage random-uuid` makes one"
        )
    return text


def _random_uuid() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: never one whose text starts with '-', which a command line
    takes for a flag."""
    while True:
        value = uuid.uuid4()
        if not kafka_text(value).startswith("-"):
            return value


def random_cluster_id() -> str:
    """Kafka's cluster ids: 16 random bytes in URL-safe base64, 22 characters."""
    return kafka_text(_random_uuid())


RESERVED_DIRECTORY_IDS = 100  # Kafka's DirectoryId: the ids 0 to 99 mean "unassigned", "lost", ...


def is_reserved_directory_id(value: uuid.UUID) -> bool:
    return value.int < RESERVED_DIRECTORY_IDS


def random_directory_id() -> uuid.UUID:
    """A new directory id, as Kafka's DirectoryId.random: never a reserved one."""
    while True:
        value = _random_uuid()
        if not is_reserved_directory_id(value):
            return value


def format_storage(log_dir: Path, cluster_id: str, node_id: int, *, ignore_formatted: bool = True,
                   directory_id: uuid.UUID | None = None, before_write: Callable[[], object] | None = None) -> bool:
    """`kafka-storage format`: writes meta.properties with the directory's id (`directory_id`,
    else a new random one); True if it did. A directory already formatted for this cluster
    and node is left alone when `ignore_formatted` (Kafka's --ignore-formatted), an error
    otherwise; formatted for another, always an error.

    `before_write` writes the directory's other files (bootstrap records, the bootstrap
    snapshot) once the directory is known to be new, before meta.properties, which is
    written last: a directory counts as formatted only once everything is in it."""
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
    fsutil.make_dirs(log_dir)
    if before_write is not None:
        before_write()
    directory = kafka_text(directory_id or random_directory_id())
    body = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={directory}\n".encode()
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


def read_directory_id(log_dir: Path) -> uuid.UUID | None:
    """meta.properties' directory.id; None in a directory formatted before kraft wrote one
    (or by a Kafka before KIP-858). StorageNotFormattedError if it is not a UUID."""
    text = read_meta_entries(log_dir).get("directory.id")
    if text is None:
        return None
    try:
        return uuid_from_kafka_text(text)
    except ValueError as e:
        raise StorageNotFormattedError(f"{log_dir / META_PROPERTIES}: directory.id {e}") from None
