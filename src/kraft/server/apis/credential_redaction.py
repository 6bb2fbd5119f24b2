"""What the client listener serves of the metadata log carries no credential (issue 25).

A client may read `__cluster_metadata` (with READ on it), by Fetch and by FetchSnapshot;
peers and observers fetch on the controller listener (CLUSTER_ACTION) and get the exact
bytes, since they authenticate users with them. On the client listener every batch holding
a UserScramCredentialRecord goes out rewritten, its salt, StoredKey and ServerKey empty
(metadata/redaction.py says what is kept: everything else), and every other byte as before.

- **Fetch.** The log's FileRegion still goes to the socket by sendfile; only the batches
  holding credentials (a few: one per credential change) go as bytes between pieces of the
  file. Which batches they are is learnt by reading each byte of a segment once, the first
  time a client's Fetch reaches it, and kept per segment file: what a client reads is
  committed, so those bytes never change, and a deleted segment's knowledge goes with its
  file (a weak reference). A tail consumer pays the scan of what it reads, once per node.
- **FetchSnapshot.** A snapshot holding credentials is served as its redacted self: the size
  and positions a client sees are those of the redacted bytes, so its chunks add up to a
  valid snapshot. Its layout (pieces of the file and rewritten batches) is made once per
  snapshot file; a snapshot without credentials is served as it was.
"""

import bisect
import dataclasses
import os
import weakref
from collections.abc import Iterator
from typing import Any

from kio.schema.errors import ErrorCode

from kraft.metadata.redaction import redactions
from kraft.protocol.regions import Pieces, Segment
from kraft.records import HEADER_SIZE, BatchHeader, iter_batches, parse_header
from kraft.storage import FileRegion
from kraft.storage.types import SharedFd

_READ = 8 << 20  # bytes read at a time while scanning


def _rewrites(fd: int, start: int, end: int) -> Iterator[tuple[BatchHeader, bytearray]]:
    """The batches holding credentials between `start` and `end` of the file (both batch
    boundaries), each with its redacted bytes; read a few MiB at a time."""
    position = start
    while position < end:
        buffer = os.pread(fd, min(_READ, end - position), position)
        if len(buffer) < HEADER_SIZE:
            raise EOFError(f"no whole batch at {position}: {len(buffer)} bytes before {end}")
        size = parse_header(memoryview(buffer), 0, position).size
        if size > len(buffer):  # one batch larger than a read: read it whole
            buffer = os.pread(fd, size, position)
        headers = list(iter_batches(buffer, position=position, partial_tail="stop"))
        yield from redactions(buffer, position, headers)
        position = headers[-1].position + headers[-1].size


class _Segment:
    """What is known of one segment file: the byte ranges scanned (sorted, disjoint) and, in
    them, each batch holding credentials: position -> (its size, its redacted bytes)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.secret: dict[int, tuple[int, bytes]] = {}
        self.positions: list[int] = []  # of `secret`, sorted

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        found, at = [], start
        for low, high in self.ranges:
            if high <= at:
                continue
            if low >= end:
                break
            if low > at:
                found.append((at, low))
            at = max(at, high)
        if at < end:
            found.append((at, end))
        return found

    def scanned(self, start: int, end: int) -> None:
        merged: list[tuple[int, int]] = []
        for low, high in sorted([*self.ranges, (start, end)]):
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        self.ranges = merged

    def found(self, position: int, size: int, rewritten: bytes) -> None:
        self.secret[position] = (size, rewritten)
        bisect.insort(self.positions, position)


@dataclasses.dataclass(frozen=True, slots=True)
class _Layout:
    """A snapshot file as clients see it: pieces in order, each (its start in the redacted
    bytes, its start in the file or -1, its length, its bytes if rewritten)."""

    pieces: tuple[tuple[int, int, int, bytes | None], ...]
    size: int

    def chunk(self, file: SharedFd, position: int, length: int) -> Pieces:
        parts: list[Segment] = []
        end = position + length
        for start, real, size, rewritten in self.pieces:
            low, high = max(position, start), min(end, start + size)
            if low >= high:
                continue
            if rewritten is None:
                parts.append(FileRegion(file, real + low - start, high - low))
            else:
                parts.append(rewritten[low - start: high - start])
        return Pieces(tuple(parts))


class CredentialRedaction:
    """One per node, for its client listener's reads of the metadata log."""

    def __init__(self) -> None:
        self._segments: weakref.WeakKeyDictionary[SharedFd, _Segment] = weakref.WeakKeyDictionary()
        self._snapshots: weakref.WeakKeyDictionary[SharedFd, _Layout | None] = weakref.WeakKeyDictionary()

    def log_records(self, data: Any) -> Any:
        """A Fetch's records as a client may read them: the region itself if it holds no
        credential, else its pieces with those batches rewritten."""
        if not isinstance(data, FileRegion):
            return _redacted_bytes(data)
        segment = self._segments.get(data.file)
        if segment is None:
            segment = self._segments[data.file] = _Segment()
        start, end = data.position, data.position + data.length
        for low, high in segment.gaps(start, end):
            for header, rewritten in _rewrites(data.file.fd, low, high):
                segment.found(header.position, header.size, bytes(rewritten))
            segment.scanned(low, high)
        first = bisect.bisect_left(segment.positions, start)
        hits = segment.positions[first: bisect.bisect_left(segment.positions, end)]
        if not hits:
            return data
        parts: list[Segment] = []
        at = start
        for position in hits:
            size, replacement = segment.secret[position]
            if position > at:
                parts.append(FileRegion(data.file, at, position - at))
            parts.append(replacement)
            at = position + size
        if at < end:
            parts.append(FileRegion(data.file, at, end - at))
        return Pieces(tuple(parts))

    def snapshot_partition(self, partition: Any) -> Any:
        """A FetchSnapshot answer's partition as a client may read it: unchanged if it holds no
        chunk or its snapshot no credential; else size, position and chunk in the redacted
        snapshot's terms, POSITION_OUT_OF_RANGE past its end."""
        region = partition.unaligned_records
        if partition.error_code != ErrorCode.none or not isinstance(region, FileRegion):
            return partition
        if region.file not in self._snapshots:
            self._snapshots[region.file] = _layout(region.file, partition.size)
        layout = self._snapshots[region.file]
        if layout is None:
            return partition
        position = partition.position
        if position >= layout.size:
            return dataclasses.replace(partition, error_code=ErrorCode.position_out_of_range, size=-1, position=-1,
                                       unaligned_records=b"")
        length = min(region.length, layout.size - position)
        return dataclasses.replace(partition, size=layout.size, unaligned_records=layout.chunk(region.file, position,
                                                                                               length))


def _layout(file: SharedFd, size: int) -> _Layout | None:
    """The snapshot file's redacted layout, or None if it holds no credential."""
    pieces: list[tuple[int, int, int, bytes | None]] = []
    real = out = 0  # the next unplaced byte, in the file and in the redacted bytes
    for header, rewritten in _rewrites(file.fd, 0, size):
        position = header.position
        if position > real:
            pieces.append((out, real, position - real, None))
            out += position - real
        pieces.append((out, -1, len(rewritten), bytes(rewritten)))
        out += len(rewritten)
        real = position + header.size
    if not pieces:
        return None
    if real < size:
        pieces.append((out, real, size - real, None))
        out += size - real
    return _Layout(tuple(pieces), out)


def _redacted_bytes(data: bytes | memoryview) -> bytes | memoryview:
    """Batches held in memory (a log in memory), rewritten where they hold credentials."""
    buffer = bytes(data)
    parts: list[bytes] = []
    at = 0
    for header, rewritten in redactions(buffer, 0, iter_batches(buffer)):
        parts += [buffer[at: header.position], bytes(rewritten)]
        at = header.position + header.size
    return b"".join([*parts, buffer[at:]]) if parts else data
