"""Inputs for the protocol fuzzer (`kraft fuzz`): random messages of any kio class, framed
as requests, and hostile variations of them.

Every input is drawn from one random.Random, so a seed gives the same inputs in the same
order. Messages are built by walking kio's schema classes (the same introspection the
shape check compiles), with values biased towards edges (0, -1, type limits) and, for
fields a hint names (cluster_id, topic names...), towards values the node will take
seriously, so that mutations reach deep into the handlers rather than stopping at the
first field.
"""

import dataclasses
import datetime
import random
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from kraft.protocol.codec import encode_request, request_class
from kraft.varint import uvarint

Hints = dict[str, list[Any]]

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_EDGES = (
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**63 - 1,
    -(2**31),
    -(2**63),
)
_TEXT = "abcdefghijklmnopqrstuvwxyz0123456789._-"
_UTC = datetime.UTC

# Byte strings that claim far more than any frame holds, or are malformed as lengths: a
# compact count of 2^32-2, a 5-byte varint at its maximum, a 6-byte varint, int32 and
# int16 maxima, negative lengths other than -1.
HOSTILE = (
    uvarint(0xFFFFFFFF),
    b"\xff\xff\xff\xff\x7f",
    b"\x80\x80\x80\x80\x80\x01",
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xfe",
    b"\x7f\xff",
    b"\xff\xfe",
    b"\x00\x10\x00\x00",
    b"\x81\x80\x04",
)


def random_int(rng: random.Random, low: int, high: int) -> int:
    """Mostly small values, often an edge, sometimes anything in range."""
    r = rng.random()
    if r < 0.55:
        value = rng.randint(-1, 3)
    elif r < 0.8:
        value = rng.choice(_EDGES)
    else:
        value = rng.randint(low, high)
    return min(max(value, low), high)


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_TEXT) for _ in range(rng.choice((0, 1, 3, 8, 12))))


def _primitive(kafka_type: str, nullable: bool, name: str, rng: random.Random, hints: Hints) -> Any:
    if name in hints and rng.random() < 0.7:
        return rng.choice(hints[name])
    if kafka_type in _INT_RANGES:
        return random_int(rng, *_INT_RANGES[kafka_type])
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.choice((0.0, 1.0, -1.5, 1e300))
    if kafka_type == "error_code":
        return rng.choice(list(ErrorCode))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=random_int(rng, 0, 2**31 - 1))
    if kafka_type == "datetime_i64":
        if nullable and rng.random() < 0.2:
            return None
        return datetime.datetime.fromtimestamp(rng.randint(0, 2**41) / 1000, _UTC)
    if kafka_type == "uuid":
        if nullable and rng.random() < 0.2:
            return None
        return uuid.UUID(int=rng.getrandbits(128) if rng.random() < 0.8 else 0)
    if nullable and rng.random() < 0.1:
        return None
    if kafka_type == "string":
        return _text(rng)
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.choice((0, 1, 7, 61, 200)))
    raise ValueError(f"no generator for kafka_type {kafka_type!r}")


def random_entity(cls: type, rng: random.Random, hints: Hints | None = None, depth: int = 0) -> Any:
    """A random instance of a kio message class, every field set (tagged ones often left
    at their defaults, so they are absent on the wire)."""
    hints = hints or {}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if (
            get_field_tag(f) is not None
            and rng.random() < 0.5
            and f.default is not dataclasses.MISSING
        ):
            continue
        kind = classify_field(f)
        optional = is_optional(f)
        if isinstance(kind, EntityField):
            nullable = optional and get_field_tag(f) is None
            values[f.name] = (
                None
                if nullable and rng.random() < 0.2
                else random_entity(kind.type_, rng, hints, depth + 1)
            )
        elif kind.is_array:
            if optional and rng.random() < 0.1:
                values[f.name] = None
                continue
            n = rng.choice((0, 1, 1, 2, 3)) if depth < 4 else 0
            if isinstance(kind, EntityTupleField):
                values[f.name] = tuple(
                    random_entity(kind.type_, rng, hints, depth + 1) for _ in range(n)
                )
            else:
                values[f.name] = tuple(
                    _primitive(f.metadata["kafka_type"], False, f.name, rng, hints)
                    for _ in range(n)
                )
        else:
            values[f.name] = _primitive(f.metadata["kafka_type"], optional, f.name, rng, hints)
    return cls(**values)


def mutate(body: bytes, rng: random.Random, keep: int = 0) -> bytes:
    """`body` with one to three changes after its first `keep` bytes: bits flipped, a byte
    set to an edge value, a hostile length written over or into it, a cut, a span removed
    or repeated, bytes added at the end."""
    out = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(keep, max(keep, len(out)))
        op = rng.randrange(8)
        if op == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1 and at < len(out):
            out[at] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF))
        elif op == 2:
            hostile = rng.choice(HOSTILE)
            out[at : at + len(hostile)] = hostile
        elif op == 3:
            out[at:at] = rng.choice(HOSTILE)
        elif op == 4:
            del out[at:]
        elif op == 5:
            del out[at : at + rng.randint(1, 8)]
        elif op == 6:
            span = bytes(out[at : at + rng.randint(1, 16)])
            out[at:at] = span * rng.randint(1, 4)
        else:
            out += rng.randbytes(rng.randint(1, 8))
    return bytes(out)


@dataclass(frozen=True)
class Input:
    """One thing to send: `data` is sent as it is (size prefixes included). `complete` is
    False when the server is left waiting for bytes that never come (the sender then
    closes the connection)."""

    kind: str
    data: bytes
    complete: bool
    api: tuple[int, int] | None = None


KINDS = (
    "valid",
    "mutated",
    "random-body",
    "unknown-api",
    "truncated",
    "huge-prefix",
    "random-bytes",
)
_WEIGHTS = (10, 45, 15, 10, 8, 7, 5)
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


class InputMaker:
    """Inputs for one listener, given the APIs it serves (ApiVersions' answer)."""

    def __init__(
        self,
        rng: random.Random,
        apis: list[tuple[int, int, int]],
        hints: Hints,
        max_frame_bytes: int,
        hint_rates: dict[int, float] | None = None,
    ) -> None:
        """`hint_rates`: per API key, the share of its messages built with the hints (else all)."""
        self.rng = rng
        self.hint_rates = hint_rates or {}
        self.apis = [(key, version) for key, low, high in apis for version in range(low, high + 1)]
        self.served = {key: (low, high) for key, low, high in apis}
        self.hints = hints
        self.max_frame_bytes = max_frame_bytes
        self._templates: dict[tuple[int, int], list[bytes]] = {}
        self._makers: dict[str, Callable[[], Input]] = {
            "valid": self._valid,
            "mutated": self._mutated,
            "random-body": self._random_body,
            "unknown-api": self._unknown_api,
            "truncated": self._truncated,
            "huge-prefix": self._huge_prefix,
            "random-bytes": self._random_bytes,
        }

    def next(self) -> Input:
        kind = self.rng.choices(KINDS, _WEIGHTS)[0]
        return self._makers[kind]()

    def template(self, api: tuple[int, int]) -> bytes:
        """A valid request frame body (header and request) for `api`, one of a few kept per
        API and now and then replaced, so that mutations start from many messages."""
        kept = self._templates.setdefault(api, [])
        if len(kept) < 4 or self.rng.random() < 0.02:
            hinted = self.rng.random() < self.hint_rates.get(api[0], 1.0)
            entity = random_entity(request_class(*api), self.rng, self.hints if hinted else {})
            body = encode_request(entity, self.rng.randint(0, 2**31 - 1), self._client_id())[
                _SIZE.size :
            ]
            if len(kept) < 4:
                kept.append(body)
            else:
                kept[self.rng.randrange(len(kept))] = body
            return body
        return self.rng.choice(kept)

    def _client_id(self) -> str | None:
        return self.rng.choice((None, "", "fuzz", "x" * 40))

    def _framed(self, kind: str, body: bytes, api: tuple[int, int] | None) -> Input:
        return Input(kind, _SIZE.pack(len(body)) + body, True, api)

    def _valid(self) -> Input:
        api = self.rng.choice(self.apis)
        return self._framed("valid", self.template(api), api)

    def _mutated(self) -> Input:
        api = self.rng.choice(self.apis)
        keep = 4 if self.rng.random() < 0.9 else 0  # mostly keep the API key and version
        return self._framed("mutated", mutate(self.template(api), self.rng, keep), api)

    def _random_body(self) -> Input:
        api = self.rng.choice(self.apis)
        header = self.template(api)[: _HEADER.size]
        return self._framed(
            "random-body", header + self.rng.randbytes(self.rng.choice((0, 1, 5, 30, 200))), api
        )

    def _unknown_api(self) -> Input:
        api = self.rng.choice(self.apis)
        body = bytearray(self.template(api))
        key, version = api
        if self.rng.random() < 0.5:
            key = self.rng.choice(
                [
                    k
                    for k in (self.rng.randint(-(2**15), 2**15 - 1), 100, 1000, -1)
                    if k not in self.served
                ]
                or [-1]
            )
        else:
            low, high = self.served[key]
            version = self.rng.choice(
                (high + 1, high + 7, -1, 2**15 - 1, *((low - 1,) if low > 0 else ()))
            )
        struct.pack_into(">hh", body, 0, key, version)
        return self._framed("unknown-api", bytes(body), (key, version))

    def _truncated(self) -> Input:
        api = self.rng.choice(self.apis)
        body = self.template(api)
        if self.rng.random() < 0.5:
            body = mutate(body, self.rng, 4)
        cut = self.rng.randint(0, len(body) + 3)  # may cut inside the size prefix
        return Input("truncated", (_SIZE.pack(len(body)) + body)[:cut], False, api)

    def _huge_prefix(self) -> Input:
        size = self.rng.choice(
            (
                self.max_frame_bytes,
                self.max_frame_bytes + 1,
                2**31 - 1,
                self.rng.randint(1 << 16, self.max_frame_bytes),
            )
        )
        api = self.rng.choice(self.apis)
        start = self.template(api)[: self.rng.randint(0, 64)]
        return Input("huge-prefix", _SIZE.pack(size) + start, False, api)

    def _random_bytes(self) -> Input:
        return Input(
            "random-bytes", self.rng.randbytes(self.rng.choice((1, 3, 4, 8, 64, 512))), False
        )
