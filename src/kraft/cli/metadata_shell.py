"""`kraft metadata-shell`: browse a metadata image like Kafka's metadata shell.

The image comes from a snapshot (`--snapshot FILE`), or from a partition directory (`--dir`):
its latest `.checkpoint`, then the `.log` segments after it, batch by batch. Given a node's
metadata.log.dir instead, the shell reads the __cluster_metadata-0 inside it; a directory
with neither snapshots nor segments is an error, not an empty image. Nothing is written: no
recovery, no cleanup of the directory. The log is read to its end, so what is shown may
include records not yet committed, as with Kafka's shell.

The image is a tree of directories and files:

    /brokers/<id>                   a broker's registration
    /topics/<name>/id               the topic id
    /topics/<name>/<partition>      a partition: replicas, ISR, leader, epochs
    /configs/<type>/<name>          a resource's configs (type: topic, broker, ...);
                                    <default> for the cluster-wide default (name "")
    /features/<name>                a finalized feature level
    /producerIds                    the next producer-id block
    /offset                         the last offset and epoch the image reflects

Commands: ls, cat, tree, cd, pwd, help, exit.
"""

import json
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from kraft.metadata import MetadataCache, MetadataError, MetadataImage, uuid_str
from kraft.metadata.image import BrokerRegistration, ConfigResourceType, PartitionRegistration
from kraft.records import RecordBatch, RecordError, iter_file_batches
from kraft.storage.errors import SnapshotError
from kraft.storage.snapshot import CHECKPOINT_SUFFIX, SnapshotReader, parse_snapshot_file_name

HELP = """\
ls [PATH...]     list a directory (directories end in /)
cat PATH...      print a file
tree [PATH]      print a directory and everything below it
cd [PATH]        change directory (/ by default)
pwd              print the current directory
help             this text
exit             leave the shell"""


class ShellError(Exception):
    """A command that cannot be carried out (no such path, a file where a directory is wanted)."""


# ------------------------------------------------------------------------------ loading

METADATA_PARTITION = "__cluster_metadata-0"  # the partition directory inside metadata.log.dir
DEFAULT_RESOURCE = "<default>"  # how the cluster-wide default (resource name "") is shown
_LOAD_ERRORS = (SnapshotError, RecordError, MetadataError, OSError)


def _error_in(path: Path, error: Exception) -> ShellError:
    """The error, naming the file it is about once (snapshot errors name it already)."""
    message = str(error)
    return ShellError(message if str(path) in message else f"{path}: {message}")


def load_snapshot_file(path: Path, cache: MetadataCache) -> None:
    try:
        reader = SnapshotReader.open(path, parse_snapshot_file_name(path.name))
        cache.load_snapshot(reader.records(), end_offset=reader.snapshot_id.end_offset, epoch=reader.snapshot_id.epoch)
    except _LOAD_ERRORS as e:
        raise _error_in(path, e) from None


def _apply_segment(segment: Path, cache: MetadataCache) -> None:
    """Every batch of one .log segment past the cache's offset, in order."""
    fd = os.open(segment, os.O_RDONLY)
    try:
        for h in iter_file_batches(fd, partial_tail="stop"):
            if h.last_offset <= cache.offset:
                continue  # in the snapshot already
            if h.is_control:
                cache.advance(base_offset=h.base_offset, last_offset=h.last_offset, epoch=h.partition_leader_epoch)
            else:
                records = RecordBatch(h, os.pread(fd, h.size, h.position)).records()
                cache.apply_batch(
                    records, base_offset=h.base_offset, last_offset=h.last_offset, epoch=h.partition_leader_epoch
                )
    except _LOAD_ERRORS as e:
        raise _error_in(segment, e) from None
    finally:
        os.close(fd)


def load_directory(directory: Path) -> MetadataImage:
    """The latest snapshot in a partition directory, then every log batch after it. A
    metadata.log.dir stands for the partition directory inside it; a directory with
    neither snapshots nor segments is refused rather than shown as an empty image."""
    snapshots = []
    segments = []
    for p in directory.iterdir():
        if p.name.endswith(CHECKPOINT_SUFFIX):
            try:
                snapshots.append((parse_snapshot_file_name(p.name), p))
            except SnapshotError as e:  # as the snapshot store does: not a snapshot of this log
                print(f"kraft metadata-shell: ignored: {e}", file=sys.stderr)
        elif p.suffix == ".log" and p.stem.isdigit():
            segments.append(p)
    if not snapshots and not segments:
        inner = directory / METADATA_PARTITION
        if inner.is_dir():
            return load_directory(inner)
        raise ShellError(
            f"{directory}: no .checkpoint snapshots and no .log segments: give a metadata partition directory "
            f"({METADATA_PARTITION}) or the metadata.log.dir holding one"
        )
    cache = MetadataCache()
    if snapshots:
        load_snapshot_file(max(snapshots)[1], cache)
    for segment in sorted(segments, key=lambda p: int(p.stem)):
        _apply_segment(segment, cache)
    return cache.image


def load(snapshot: str | None, directory: str | None) -> MetadataImage:
    """The image to browse; raises ShellError saying what could not be read, and why."""
    path = Path(snapshot or directory or "")
    try:
        if snapshot is not None:
            if not path.is_file():
                raise ShellError(f"{path}: no such file")
            cache = MetadataCache()
            load_snapshot_file(path, cache)
            return cache.image
        if not path.is_dir():
            raise ShellError(f"{path}: no such directory")
        return load_directory(path)
    except _LOAD_ERRORS as e:  # listing the directory
        raise _error_in(path, e) from None


# ------------------------------------------------------------------------------ the tree


def _broker(b: BrokerRegistration) -> dict:
    return {
        "id": b.id,
        "epoch": b.epoch,
        "incarnationId": uuid_str(b.incarnation_id),
        "listeners": [
            {"name": e.name, "host": e.host, "port": e.port, "securityProtocol": e.security_protocol}
            for e in b.endpoints
        ],
        "supportedFeatures": {
            f.name: {"minVersion": f.min_supported_version, "maxVersion": f.max_supported_version} for f in b.features
        },
        "rack": b.rack,
        "fenced": b.fenced,
    }


def _partition(p: PartitionRegistration) -> dict:
    return {
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "removingReplicas": list(p.removing_replicas),
        "addingReplicas": list(p.adding_replicas),
        "leader": p.leader,
        "leaderRecoveryState": p.leader_recovery_state,
        "leaderEpoch": p.leader_epoch,
        "partitionEpoch": p.partition_epoch,
    }


def _pretty(value: object) -> str:
    """JSON with one line per top-level field: readable, and short lists stay on one line."""
    if not isinstance(value, dict) or not value:
        return json.dumps(value)
    fields = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
    return "{\n" + fields + "\n}"


Dir = Callable[[], list[str]]  # a directory: its children's names, in display order


class MetadataTree:
    """Resolves paths in an image to directories (lists of names) and files (JSON values)."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._configs: dict[str, dict[str, Mapping[str, str]]] | None = None

    def children(self, parts: list[str]) -> list[str] | None:
        """The names in the directory at `parts`, None if it is a file; ShellError if absent."""
        node = self._node(parts)
        return node() if callable(node) else None

    def content(self, parts: list[str]) -> object:
        node = self._node(parts)
        if callable(node):
            raise ShellError(f"{'/' + '/'.join(parts)}: is a directory")
        return node

    def _node(self, parts: list[str]) -> Dir | object:
        image = self.image
        missing = ShellError(f"{'/' + '/'.join(parts)}: no such file or directory")
        if not parts:
            return lambda: ["brokers/", "configs/", "features/", "topics/", "offset", "producerIds"]
        head, rest = parts[0], parts[1:]
        if head == "offset" and not rest:
            return {"offset": image.offset, "epoch": image.epoch}
        if head == "producerIds" and not rest:
            return {"nextProducerId": image.next_producer_id}
        if head == "brokers":
            if not rest:
                return lambda: [str(b) for b in sorted(image.brokers.keys())]
            broker = image.broker(int(rest[0])) if rest[0].isdigit() and len(rest) == 1 else None
            if broker is None:
                raise missing
            return _broker(broker)
        if head == "features":
            if not rest:
                return lambda: sorted(image.features.keys())
            if len(rest) == 1 and rest[0] in image.features:
                return image.features[rest[0]]
            raise missing
        if head == "topics":
            return self._topic_node(rest, missing)
        if head == "configs":
            return self._config_node(rest, missing)
        raise missing

    def _topic_node(self, rest: list[str], missing: ShellError) -> Dir | object:
        if not rest:
            return lambda: [f"{name}/" for name in sorted(self.image.topics_by_name.keys())]
        topic = self.image.topic(rest[0])
        if topic is None or len(rest) > 2:
            raise missing
        if len(rest) == 1:
            return lambda: ["id", *(str(pid) for pid in range(len(topic.partitions)))]
        if rest[1] == "id":
            return uuid_str(topic.id)
        if rest[1].isdigit() and int(rest[1]) < len(topic.partitions):
            return _partition(topic.partitions[int(rest[1])])
        raise missing

    def _config_node(self, rest: list[str], missing: ShellError) -> Dir | object:
        if self._configs is None:  # type name -> shown resource name -> configs, built once
            self._configs = {}
            for resource, entries in self.image.configs.items():
                shown = resource.name or DEFAULT_RESOURCE
                self._configs.setdefault(ConfigResourceType(resource.type).name.lower(), {})[shown] = entries
        by_type = self._configs
        if not rest:
            return lambda: [f"{t}/" for t in sorted(by_type)]
        names = by_type.get(rest[0])
        if names is None or len(rest) > 2:
            raise missing
        if len(rest) == 1:
            return lambda: sorted(names)
        if rest[1] not in names:
            raise missing
        return dict(sorted(names[rest[1]].items()))


# ------------------------------------------------------------------------------ the shell


class Shell:
    def __init__(self, image: MetadataImage, out=sys.stdout) -> None:
        self.tree = MetadataTree(image)
        self.cwd: list[str] = []
        self.out = out

    def _parts(self, path: str) -> list[str]:
        parts = [] if path.startswith("/") else list(self.cwd)
        for piece in path.split("/"):
            if piece in ("", "."):
                continue
            if piece == "..":
                if parts:
                    parts.pop()
            else:
                parts.append(piece)
        return parts

    def _print(self, line: str) -> None:
        print(line, file=self.out)

    def run(self, line: str) -> bool:
        """Runs one command line; False if it failed (the error is printed to stderr)."""
        try:
            words = shlex.split(line)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return False
        if not words:
            return True
        command, args = words[0], words[1:]
        handler = getattr(self, f"_cmd_{command}", None)
        if handler is None:
            print(f"error: unknown command {command!r}; try help", file=sys.stderr)
            return False
        try:
            handler(args)
        except ShellError as e:
            print(f"error: {e}", file=sys.stderr)
            return False
        return True

    def _cmd_ls(self, args: list[str]) -> None:
        for path in args or ["."]:
            parts = self._parts(path)
            names = self.tree.children(parts)
            if len(args) > 1:
                self._print(f"{path}:")
            for name in names if names is not None else [parts[-1]]:
                self._print(name)

    def _cmd_cat(self, args: list[str]) -> None:
        if not args:
            raise ShellError("cat: which file?")
        for path in args:
            self._print(_pretty(self.tree.content(self._parts(path))))

    def _cmd_tree(self, args: list[str]) -> None:
        parts = self._parts(args[0] if args else ".")
        path = "/" + "/".join(parts)
        if self.tree.children(parts) is None:  # a file: the tree is the file
            self._print(f"{path}: {self._compact(parts)}")
            return
        self._print(path)
        for line in self._walk(parts, "  "):
            self._print(line)

    def _compact(self, parts: list[str]) -> str:
        return json.dumps(self.tree.content(parts), separators=(",", ":"))

    def _walk(self, parts: list[str], indent: str) -> Iterator[str]:
        for name in self.tree.children(parts) or []:
            child = parts + [name.rstrip("/")]
            if name.endswith("/"):
                yield f"{indent}{name}"
                yield from self._walk(child, indent + "  ")
            else:
                yield f"{indent}{name}: {self._compact(child)}"

    def _cmd_cd(self, args: list[str]) -> None:
        parts = self._parts(args[0] if args else "/")
        if self.tree.children(parts) is None:
            raise ShellError(f"{'/' + '/'.join(parts)}: not a directory")
        self.cwd = parts

    def _cmd_pwd(self, args: list[str]) -> None:
        self._print("/" + "/".join(self.cwd))

    def _cmd_help(self, args: list[str]) -> None:
        self._print(HELP)

    def interact(self) -> None:
        while True:
            try:
                line = input(f"kraft:/{'/'.join(self.cwd)}> ")
            except EOFError:
                self._print("")
                return
            if line.strip() in ("exit", "quit"):
                return
            self.run(line)


def main(snapshot: str | None, directory: str | None, command: str | None, words: list[str]) -> int:
    try:
        image = load(snapshot, directory)
    except ShellError as e:
        print(f"kraft metadata-shell: {e}", file=sys.stderr)
        return 2
    shell = Shell(image)
    if command is not None or words:
        return 0 if shell.run(command if command is not None else shlex.join(words)) else 1
    shell.interact()
    return 0
