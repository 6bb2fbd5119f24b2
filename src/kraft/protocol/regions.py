"""Responses whose record bytes go from a file to the socket without a copy in Python.

A Fetch or FetchSnapshot response may carry, where kio expects `records` bytes, a *region*:
any object with `fileno()`, `position` and `length` (storage's FileRegion is one). The
response is encoded once with a short random token in each region's place; the token is
found in the bytes, its length prefix rewritten for the region's length, and the frame
split there. The server then writes the bytes and os.sendfile()s each region in between.
`Pieces` stands for one field's bytes made of several regions and byte strings in order (a
Fetch answer whose batches were mostly left in the file and a few rewritten).
"""

import dataclasses
import os
import struct
from typing import Any, Protocol, cast, runtime_checkable

from kraft.protocol.codec import encode
from kraft.varint import uvarint

_TOKEN_LENGTH = 16
_INT32 = struct.Struct(">i")


@runtime_checkable
class Region(Protocol):
    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...

    def fileno(self) -> int: ...


Segment = bytes | Region


@dataclasses.dataclass(frozen=True, slots=True)
class Pieces:
    """One `records` field sent as several segments, in order."""

    parts: tuple[Segment, ...]

    @property
    def length(self) -> int:
        return sum(_length(p) for p in self.parts)

    def __len__(self) -> int:
        return self.length


def _length(segment: Segment) -> int:
    return len(segment) if isinstance(segment, bytes) else segment.length


_REGION_TYPES: dict[type, bool] = {}


def is_region(value: Any) -> bool:
    """isinstance(value, Region), remembered per type. A runtime Protocol check looks up the
    protocol's members on every call (microseconds each), and every response is walked
    field by field: uncached, encoding one Fetch response took about 330 us, now 65 us."""
    kind = type(value)
    known = _REGION_TYPES.get(kind)
    if known is None:
        known = _REGION_TYPES[kind] = isinstance(value, Region)
    return known


def _swap_regions(value: Any, found: list[tuple[bytes, Region | Pieces]]) -> Any:
    """A copy of `value` with every region replaced by a fresh token (recorded in `found`)."""
    if isinstance(value, Pieces) or is_region(value):
        token = os.urandom(_TOKEN_LENGTH)
        found.append((token, value))
        return token
    if isinstance(value, tuple):
        swapped = tuple(_swap_regions(v, found) for v in value)
        return swapped if any(a is not b for a, b in zip(swapped, value)) else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            current = getattr(value, f.name)
            swapped = _swap_regions(current, found)
            if swapped is not current:
                changes[f.name] = swapped
        return dataclasses.replace(value, **changes) if changes else value
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class Encoded:
    """A response its handler wrote as bytes itself (kraft.server.apis.raft_fetch_answer: the Raft Fetch
    answer, the one a leader writes to every follower and observer on every commit), its body
    as bytes and regions; the server puts the header before it. `flexible`: whether the
    version's header has tagged fields (response header v1). `errors`: the error codes its
    items carry, which the forwarder reads (an item refused with NOT_CONTROLLER is retried
    on the new active controller)."""

    body: list[Segment]
    flexible: bool
    errors: frozenset[int] = frozenset()


# The responses whose `records` may be a region: Fetch (1) and FetchSnapshot (59). Any other is
# encoded as it is: walking every OffsetCommit answer field by field for regions was a tenth of a
# group coordinator's CPU under load (64 clients' commits, profiled).
_REGION_CARRIERS = frozenset({1, 59})


def encode_response_segments(correlation_id: int, response: Any) -> list[Segment]:
    """The response frame as bytes and regions, in order (one bytes segment if no region)."""
    if isinstance(response, Encoded):
        size = sum(_length(s) for s in response.body)
        header = _INT32.pack(correlation_id) + (b"\x00" if response.flexible else b"")
        first = response.body[0]
        assert isinstance(first, bytes), "a body starts with bytes"
        return [_INT32.pack(size + len(header)) + header + first, *response.body[1:]]
    found: list[tuple[bytes, Region | Pieces]] = []
    carries = getattr(type(response), "__api_key__", None) in _REGION_CARRIERS
    swapped = _swap_regions(response, found) if carries else response
    header = type(response).__header_schema__(correlation_id=correlation_id)
    body = encode(header) + encode(swapped)
    flexible = type(response).__flexible__
    token_prefix = 1 if flexible else 4  # uvarint(16 + 1) or an int32 16
    segments: list[Segment] = []
    position = 0
    for token, region in found:
        at = body.find(token)
        prefix = uvarint(region.length + 1) if flexible else _INT32.pack(region.length)
        segments.append(body[position : at - token_prefix] + prefix)
        if isinstance(region, Pieces):
            segments += [p for p in region.parts if _length(p)]
        elif region.length:
            segments.append(region)
        position = at + _TOKEN_LENGTH
    segments.append(body[position:])
    total = sum(_length(s) for s in segments)
    segments[0] = _INT32.pack(total) + cast(bytes, segments[0])  # bytes: a region always follows bytes
    return segments
