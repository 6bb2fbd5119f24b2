"""Kafka message schemas declared once per class, and the one codec that walks them.

A message is a frozen dataclass whose fields carry their wire type, the version they
appeared in, nullability and tag, as Kafka's JSON schemas do:

    @message(api_key=7, versions=(0, 0))
    class FenceBrokerRecord:
        id: int = wire(INT32)
        epoch: int = wire(INT64)

Every field has a default (Kafka's generated classes have one too: 0, "", the zero UUID,
an empty array, or the schema's own), so records are built by keyword and a reader of an
old version fills in what that version lacks.

Only the flexible encoding (KIP-482) is implemented, because every KRaft metadata record is
flexible from version 0 (KIP-746): strings and arrays are compact (unsigned varint length
plus one, 0 for null) and every struct ends with a tagged-field section. Tagged fields are
written only when they differ from their default; on read, tags this build does not know
are skipped, so records from newer writers still load.

Per version, a schema is compiled once, both ways. The reader is a plan (each field's slot,
layout and nullability, the known tags, the defaults) that a small interpreter in C runs
(`_fields.c`): every replica decodes every committed record, and a snapshot load decodes a
million, so reading is a node's hottest metadata code. The writer stays in Python, where a
value its field cannot hold must be reported by name: runs of fixed-width fields (int32,
int64, uuid...) are packed by a single `struct.Struct`.
"""

import dataclasses
import struct
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

import kraft.metadata._fields as _fields
from kraft.varint import uvarint as encode_uvarint

ZERO_UUID = bytes(16)

Writer = Callable[[Any, list], None]
Layout = str | tuple[str, "str | _fields.Plan"]  # how _fields.Plan takes a field's type

_VARINT_BYTES = [bytes([i]) for i in range(128)]


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (7 bits a byte, low bits first); one-byte values from a table."""
    return _VARINT_BYTES[n] if n < 128 else encode_uvarint(n)


class WireType:
    """How one field type is laid out in flexible versions."""

    name: str
    default: Any
    code: str | None = None  # struct format of a fixed-width type, None for variable width

    def layout(self, version: int) -> Layout:
        """The type as the C reader's plan names it: a kind ("int32", "string"...) or an array."""
        raise NotImplementedError

    def writer(self, version: int, nullable: bool) -> Writer:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class _Fixed(WireType):
    def __init__(self, name: str, code: str, default: Any) -> None:
        self.name = name
        self.code = code
        self.default = default
        self._struct = struct.Struct(">" + code)

    def layout(self, version: int) -> Layout:
        return self.name

    def writer(self, version: int, nullable: bool) -> Writer:
        pack = self._struct.pack

        def write(value: Any, out: list) -> None:
            out.append(pack(value))

        return write


INT8 = _Fixed("int8", "b", 0)
INT16 = _Fixed("int16", "h", 0)
INT32 = _Fixed("int32", "i", 0)
INT64 = _Fixed("int64", "q", 0)
UINT16 = _Fixed("uint16", "H", 0)
BOOL = _Fixed("bool", "?", False)
UUID = _Fixed("uuid", "16s", ZERO_UUID)
FLOAT64 = _Fixed("float64", "d", 0.0)


def _out_of_range(wire_type: WireType, error: Exception) -> str:
    """struct's complaint, saying which type the value does not fit (out of range, or not a number)."""
    if isinstance(error, struct.error):
        return f"not a valid {wire_type.name}: {error}"
    return str(error)


def _write_null(nullable: bool, what: str) -> bytes:
    if not nullable:
        raise ValueError(f"None for a non-nullable {what}")
    return b"\x00"


class _String(WireType):
    name = "string"
    default = ""
    max_bytes = 0x7FFF  # Kafka's limit for a string field

    def layout(self, version: int) -> Layout:
        return "string"  # read without the write limit: a longer string from elsewhere still loads

    def writer(self, version: int, nullable: bool) -> Writer:
        max_bytes = self.max_bytes

        def write(value: str | None, out: list) -> None:
            if value is None:
                out.append(_write_null(nullable, "string"))
                return
            data = value.encode()
            if len(data) > max_bytes:
                raise ValueError(f"string of {len(data)} bytes is longer than {max_bytes}")
            out.append(uvarint(len(data) + 1))
            out.append(data)

        return write


STRING = _String()


class _Bytes(WireType):
    name = "bytes"
    default = b""

    def layout(self, version: int) -> Layout:
        return "bytes"

    def writer(self, version: int, nullable: bool) -> Writer:
        def write(value: bytes | None, out: list) -> None:
            if value is None:
                out.append(_write_null(nullable, "bytes"))
                return
            out.append(uvarint(len(value) + 1))
            out.append(bytes(value))

        return write


BYTES = _Bytes()


class ArrayOf(WireType):
    """A compact array of a fixed-width type or of a struct (a class declared with `message`)."""

    default = ()

    def __init__(self, element: "WireType | type") -> None:
        self.element = element
        self.name = f"[]{getattr(element, '__name__', element)}"

    def _write_items(self, version: int) -> Writer:
        """Writes the elements: one struct call for fixed-width ones, a loop otherwise."""
        element = self.element
        if isinstance(element, type):
            return _repeat(schema_of(element).writer(version))
        if element is UUID:
            return _write_uuids
        code = element.code
        if code is None:  # strings
            return _repeat(element.writer(version, False))

        def write_items(items: tuple, out: list) -> None:
            out.append(struct.pack(f">{len(items)}{code}", *items))

        return write_items

    def layout(self, version: int) -> Layout:
        element = self.element
        if isinstance(element, type):
            return "array", schema_of(element).plan(version)
        return "array", element.name

    def writer(self, version: int, nullable: bool) -> Writer:
        write_items = self._write_items(version)

        def write(items: tuple | None, out: list) -> None:
            if items is None:
                out.append(_write_null(nullable, "array"))
                return
            out.append(uvarint(len(items) + 1))
            write_items(items, out)

        return write


def _write_uuids(items: tuple, out: list) -> None:
    for u in items:
        if len(u) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(u)}")
        out.append(u)


def _repeat(write_one: Writer) -> Writer:
    def write_items(items: tuple, out: list) -> None:
        for item in items:
            write_one(item, out)

    return write_items


@dataclasses.dataclass(frozen=True, slots=True)
class WireField:
    type: WireType
    since: int = 0
    nullable: bool = False
    tag: int | None = None


def wire(
    type: WireType,
    *,
    since: int = 0,
    nullable: bool = False,
    tag: int | None = None,
    default: Any = dataclasses.MISSING,
) -> Any:
    """Declares a message field: its wire type, first version, nullability, tag and default."""
    if default is dataclasses.MISSING:
        default = type.default
    return dataclasses.field(default=default, metadata={"wire": WireField(type, since, nullable, tag)})


def _tuple_getter(names: list[str]) -> Callable[[Any], tuple]:
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names)


class Schema:
    """A message class's fields in wire order, compiled per version into a reader's plan and a writer."""

    def __init__(self, cls: type, api_key: int | None, versions: tuple[int, int]) -> None:
        self.cls = cls
        self.api_key = api_key
        self.versions = versions
        self.fields = [(f.name, f.metadata["wire"], f.default) for f in dataclasses.fields(cls)]
        # Fields newer than the lowest version, newest first: what decides the version to write.
        self._newer = sorted(
            ((wf.since, attrgetter(name), default) for name, wf, default in self.fields if wf.since > versions[0]),
            key=lambda entry: -entry[0],
        )
        self._plans: dict[int, _fields.Plan] = {}
        self._writers: dict[int, Writer] = {}

    def plan(self, version: int) -> _fields.Plan:
        """What the C reader runs to read this version (kraft.metadata.serde's Decoder)."""
        p = self._plans.get(version)
        if p is None:
            p = self._plans[version] = self._compile_plan(version)
        return p

    def version_for(self, obj: Any) -> int:
        """The lowest version that holds `obj`: the first to have every field it sets."""
        for since, get, default in self._newer:
            if get(obj) != default:
                return since
        return self.versions[0]

    def writer(self, version: int) -> Writer:
        w = self._writers.get(version)
        if w is None:
            w = self._writers[version] = self._compile_writer(version)
        return w

    def field_error(self, obj: Any, version: int) -> str | None:
        """Why `obj` cannot be written at `version`, as "field: reason", or None if no single
        field is at fault. The compiled writer packs runs of fields at once, so its errors
        cannot say which; this slow path, taken only after a failure, writes them one by one."""
        for name, wf, default in self.fields:
            value = getattr(obj, name)
            if wf.since > version:
                if value != default:
                    return f"{name}: version {version} cannot hold a non-default value"
                continue
            try:
                wf.type.writer(version, wf.nullable)(value, [])
            except (struct.error, ValueError, TypeError) as e:
                return f"{name}: {_out_of_range(wf.type, e)}"
        return None

    def _writer_steps(self, version: int) -> tuple[list, list]:
        """Untagged steps in wire order (fixed-width runs merged) and tagged fields by tag."""
        steps: list[tuple[struct.Struct | None, Any, Any]] = []
        tagged: list[tuple[int, int, WireField]] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                fmt = struct.Struct(">" + "".join(self.fields[i][1].type.code for i in run))
                steps.append((fmt, list(run), None))
                run.clear()

        for i, (_, wf, _) in enumerate(self.fields):
            if wf.since > version:
                continue
            if wf.tag is not None:
                tagged.append((wf.tag, i, wf))
            elif wf.type.code is not None:
                run.append(i)
            else:
                flush()
                steps.append((None, i, wf))
        flush()
        tagged.sort()
        return steps, tagged

    def _compile_plan(self, version: int) -> _fields.Plan:
        """The untagged fields in wire order, the tagged ones this version knows, and a
        default for every slot no untagged field fills (tagged, or newer than `version`).
        Each field is named by its slot (the member descriptor of the slotted class): the
        reader stores straight into it, as a frozen dataclass's __init__ would."""
        slots = self.cls.__dict__
        fields, tagged, defaults = [], [], []
        for name, wf, default in self.fields:
            if wf.since > version or wf.tag is not None:
                defaults.append((slots[name], default))
            if wf.since > version:
                continue
            step = (slots[name], wf.type.layout(version), wf.nullable)
            if wf.tag is None:
                fields.append(step)
            else:
                tagged.append((wf.tag, step))
        return _fields.Plan(self.cls, fields, tagged, defaults)

    def _compile_writer(self, version: int) -> Writer:
        steps, tagged_fields = self._writer_steps(version)
        names = [name for name, _, _ in self.fields]
        # (pack, getter, None) for a run of fixed-width fields, (None, getter, writer) for one other field
        write_steps: list[tuple[Callable[..., bytes] | None, Callable[[Any], Any], Any]] = []
        for fmt, where, wf in steps:
            if fmt is not None:
                write_steps.append((fmt.pack, _tuple_getter([names[i] for i in where]), None))
            else:
                write_steps.append((None, attrgetter(names[where]), wf.type.writer(version, wf.nullable)))
        tagged = [
            (uvarint(tag), attrgetter(names[i]), self.fields[i][2], wf.type.writer(version, wf.nullable))
            for tag, i, wf in tagged_fields
        ]
        absent: list[tuple[str, Callable[[Any], Any], Any]] = [
            (name, attrgetter(name), default) for name, wf, default in self.fields if wf.since > version
        ]
        cls_name = self.cls.__name__

        def write(obj: Any, out: list) -> None:
            for name, get, default in absent:
                if get(obj) != default:
                    raise ValueError(f"{cls_name} version {version} cannot hold a non-default {name}")
            for pack, get, write_field in write_steps:
                if pack is not None:
                    out.append(pack(*get(obj)))
                else:
                    write_field(get(obj), out)
            present: list[bytes] = []  # tag, length, data for each tagged field written
            for tag, get, default, write_field in tagged:
                value = get(obj)
                if value != default:
                    body: list[bytes] = []
                    write_field(value, body)
                    data = b"".join(body)
                    present += (tag, uvarint(len(data)), data)
            out.append(uvarint(len(present) // 3))
            out += present

        return write


_Message = TypeVar("_Message")


@dataclass_transform(frozen_default=True)  # wire() is not a field specifier: to a checker it is the default it always gives
def message(
    *, api_key: int | None = None, versions: tuple[int, int] = (0, 0)
) -> Callable[[type[_Message]], type[_Message]]:
    """Makes a class a frozen, slotted dataclass and attaches its compiled `__schema__`.

    Without an api_key the class is a struct used as an array element (BrokerEndpoint).
    A type checker sees the class as the dataclass it becomes (dataclass_transform), so
    records are checked where they are built; `schema_of` reads the schema back.
    """

    def wrap(cls: type[_Message]) -> type[_Message]:
        cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
        setattr(cls, "__schema__", Schema(cls, api_key, versions))  # noqa: B010 (a type checker cannot see a new class attribute)
        return cls

    return wrap


def schema_of(cls: type) -> Schema:
    """The schema `message` compiled for `cls`."""
    schema: Schema = cls.__dict__["__schema__"]
    return schema
