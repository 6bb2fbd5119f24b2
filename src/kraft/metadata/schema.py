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

Per version, a schema is compiled once into a list of steps. Runs of fixed-width fields
(int32, int64, uuid...) become a single `struct.Struct`, so a PartitionRecord decodes in
seven steps rather than fourteen field visits: loading a million-partition snapshot is
dominated by this loop.
"""

import dataclasses
import struct
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from kraft.records.control import uvarint as encode_uvarint

ZERO_UUID = bytes(16)

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[Any, list], None]

_VARINT_BYTES = [bytes([i]) for i in range(128)]


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (7 bits a byte, low bits first); one-byte values from a table."""
    return _VARINT_BYTES[n] if n < 128 else encode_uvarint(n)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (an unsigned 32-bit value); IndexError if cut."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise ValueError(f"varint longer than 5 bytes at byte {pos}")


class WireType:
    """How one field type is laid out in flexible versions."""

    name: str
    default: Any
    code: str | None = None  # struct format of a fixed-width type, None for variable width

    def reader(self, version: int, nullable: bool) -> Reader:
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

    def reader(self, version: int, nullable: bool) -> Reader:
        unpack, size = self._struct.unpack_from, self._struct.size

        def read(buf: bytes, pos: int) -> tuple[Any, int]:
            return unpack(buf, pos)[0], pos + size

        return read

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


def _out_of_range(wire_type: WireType, error: Exception) -> str:
    """struct's complaint, saying which type the value does not fit (out of range, or not a number)."""
    if isinstance(error, struct.error):
        return f"not a valid {wire_type.name}: {error}"
    return str(error)


def _read_null(nullable: bool, what: str, pos: int) -> tuple[None, int]:
    if not nullable:
        raise ValueError(f"null {what} at byte {pos} where the schema does not allow null")
    return None, pos


def _write_null(nullable: bool, what: str) -> bytes:
    if not nullable:
        raise ValueError(f"None for a non-nullable {what}")
    return b"\x00"


class _String(WireType):
    name = "string"
    default = ""
    max_bytes = 0x7FFF  # Kafka's limit for a string field

    def reader(self, version: int, nullable: bool) -> Reader:
        def read(buf: bytes, pos: int) -> tuple[str | None, int]:
            n, pos = read_uvarint(buf, pos)
            if n == 0:
                return _read_null(nullable, "string", pos)
            end = pos + n - 1
            if end > len(buf):
                raise ValueError(f"string of {n - 1} bytes runs past the end at byte {pos}")
            return buf[pos:end].decode(), end

        return read

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


class ArrayOf(WireType):
    """A compact array of a fixed-width type or of a struct (a class declared with `message`)."""

    default = ()

    def __init__(self, element: "WireType | type") -> None:
        self.element = element
        self.name = f"[]{getattr(element, '__name__', element)}"

    def _items(self, version: int) -> tuple[Callable[[bytes, int, int], tuple[tuple, int]], Writer]:
        """Reads and writes n elements at once: one struct call for int32s, a loop otherwise."""
        element = self.element
        if isinstance(element, type):
            schema: Schema = element.__schema__
            return _repeat(schema.reader(version), schema.writer(version))
        if element is UUID:
            return _read_uuids, _write_uuids
        code = element.code
        formats: dict[int, struct.Struct] = {}  # replica lists are short: one Struct per length

        def read_items(buf: bytes, pos: int, n: int) -> tuple[tuple, int]:
            fmt = formats.get(n)
            if fmt is None:
                fmt = struct.Struct(f">{n}{code}")
                if n <= 64:
                    formats[n] = fmt
            return fmt.unpack_from(buf, pos), pos + fmt.size

        def write_items(items: tuple, out: list) -> None:
            out.append(struct.pack(f">{len(items)}{code}", *items))

        return read_items, write_items

    def reader(self, version: int, nullable: bool) -> Reader:
        read_items, _ = self._items(version)

        def read(buf: bytes, pos: int) -> tuple[tuple | None, int]:
            n = buf[pos]
            if n < 0x80:  # fewer than 127 elements: the length is one byte
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos)
            if n == 0:
                return _read_null(nullable, "array", pos)
            if n - 1 > len(buf) - pos:  # every element takes at least a byte
                raise ValueError(f"array of {n - 1} elements cannot fit in {len(buf) - pos} bytes")
            return read_items(buf, pos, n - 1)

        return read

    def writer(self, version: int, nullable: bool) -> Writer:
        _, write_items = self._items(version)

        def write(items: tuple | None, out: list) -> None:
            if items is None:
                out.append(_write_null(nullable, "array"))
                return
            out.append(uvarint(len(items) + 1))
            write_items(items, out)

        return write


def _read_uuids(buf: bytes, pos: int, n: int) -> tuple[tuple, int]:
    end = pos + 16 * n
    if end > len(buf):
        raise ValueError(f"{n} UUIDs run past the end at byte {pos}")
    return tuple(buf[i : i + 16] for i in range(pos, end, 16)), end


def _write_uuids(items: tuple, out: list) -> None:
    for u in items:
        if len(u) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(u)}")
        out.append(u)


def _repeat(read_one: Reader, write_one: Writer) -> tuple[Callable, Writer]:
    def read_items(buf: bytes, pos: int, n: int) -> tuple[tuple, int]:
        items = []
        for _ in range(n):
            item, pos = read_one(buf, pos)
            items.append(item)
        return tuple(items), pos

    def write_items(items: tuple, out: list) -> None:
        for item in items:
            write_one(item, out)

    return read_items, write_items


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


def _string_lines(var: str, nullable: bool) -> list[str]:
    """Source lines that read a compact string into `var` (what _String.reader does)."""
    return [
        "    n = buf[pos]",
        "    if n < 0x80:",
        "        pos += 1",
        "    else:",
        "        n, pos = read_uvarint(buf, pos)",
        "    if n == 0:",
        f"        {var}, pos = _read_null({nullable}, 'string', pos)",
        "    else:",
        "        end = pos + n - 1",
        "        if end > len(buf):",
        "            raise ValueError(f'string of {n - 1} bytes runs past the end at byte {pos}')",
        f"        {var} = buf[pos:end].decode()",
        "        pos = end",
    ]


class Schema:
    """A message class's fields in wire order, compiled per version into a reader and a writer."""

    def __init__(self, cls: type, api_key: int | None, versions: tuple[int, int]) -> None:
        self.cls = cls
        self.api_key = api_key
        self.versions = versions
        self.fields = [(f.name, f.metadata["wire"], f.default) for f in dataclasses.fields(cls)]
        self._readers: dict[int, Reader] = {}
        self._writers: dict[int, Writer] = {}

    def reader(self, version: int) -> Reader:
        r = self._readers.get(version)
        if r is None:
            r = self._readers[version] = self._compile_reader(version)
        return r

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

    def _plan(self, version: int) -> tuple[list, list]:
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

    def _compile_reader(self, version: int) -> Reader:
        """A reader made for this version: Python source with one statement per step,
        strings inline and the usual empty tagged section as a one-byte check, compiled
        once. Followers decode every committed record, so this loop is a node's hottest
        code under write load (a ConfigRecord: 3.9 us with a generic loop over steps)."""
        steps, tagged_fields = self._plan(version)
        env: dict[str, Any] = {
            "cls": self.cls,
            "read_uvarint": read_uvarint,
            "read_tagged": self._tagged_reader(version, tagged_fields),
            "_read_null": _read_null,
            "len": len,
        }
        present = set()
        lines = ["def read(buf, pos):"]
        for k, (fmt, where, wf) in enumerate(steps):
            if fmt is not None:
                env[f"unpack{k}"] = fmt.unpack_from
                names = "".join(f"v{i}, " for i in where)
                lines += [f"    {names}= unpack{k}(buf, pos)", f"    pos += {fmt.size}"]
                present.update(where)
            elif wf.type is STRING:
                lines += _string_lines(f"v{where}", wf.nullable)
                present.add(where)
            else:
                env[f"read{k}"] = wf.type.reader(version, wf.nullable)
                lines.append(f"    v{where}, pos = read{k}(buf, pos)")
                present.add(where)
        values = []
        for i, (_, _, default) in enumerate(self.fields):
            if i in present:
                values.append(f"v{i}")
            else:  # tagged, or not in this version: its default unless a tag sets it
                env[f"d{i}"] = default
                values.append(f"d{i}")
        if tagged_fields:
            lines += ["    values = [" + ", ".join(values) + "]", "    pos = read_tagged(buf, pos, values)",
                      "    return cls(*values), pos"]
        else:
            make = self._constructor(env, values)
            lines += ["    if buf[pos] == 0:", "        pos += 1", "    else:", "        pos = read_tagged(buf, pos, None)",
                      *make, "    return o, pos"]
        exec(compile("\n".join(lines), f"<{self.cls.__name__} v{version} reader>", "exec"), env)  # noqa: S102
        return env["read"]

    def _constructor(self, env: dict[str, Any], values: list[str]) -> list[str]:
        """Source lines that build the message `o` from `values`. A frozen dataclass's
        __init__ sets each field through object.__setattr__ (1.1 us for a ConfigRecord);
        setting the slots directly gives the same object in half the time. Classes with a
        __post_init__ or without slots are built through __init__."""
        cls = self.cls
        names = [name for name, _, _ in self.fields]
        if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
            return ["    o = cls(" + ", ".join(values) + ")"]
        env["new"] = object.__new__
        lines = ["    o = new(cls)"]
        for i, (name, value) in enumerate(zip(names, values, strict=True)):
            env[f"set{i}"] = cls.__dict__[name].__set__
            lines.append(f"    set{i}(o, {value})")
        return lines

    def _tagged_reader(self, version: int, tagged_fields: list) -> Callable[[bytes, int, list | None], int]:
        """Reads a tagged-field section into `values`; tags this build does not know are skipped."""
        tagged = {tag: (i, wf.type.reader(version, wf.nullable)) for tag, i, wf in tagged_fields}

        def read_tagged(buf: bytes, pos: int, values: list | None) -> int:
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise ValueError(f"tagged field {tag} of {size} bytes runs past the end at byte {pos}")
                known = tagged.get(tag)
                if known is not None and values is not None:
                    i, read_field = known
                    values[i], at = read_field(buf[:end], pos)
                    if at != end:
                        raise ValueError(f"tagged field {tag} declares {size} bytes but holds {at - pos}")
                pos = end
            return pos

        return read_tagged

    def _compile_writer(self, version: int) -> Writer:
        steps, tagged_fields = self._plan(version)
        names = [name for name, _, _ in self.fields]
        write_steps = []
        for fmt, where, wf in steps:
            if fmt is not None:
                write_steps.append((fmt.pack, _tuple_getter([names[i] for i in where]), None))
            else:
                write_steps.append((None, attrgetter(names[where]), wf.type.writer(version, wf.nullable)))
        tagged = [
            (uvarint(tag), attrgetter(names[i]), self.fields[i][2], wf.type.writer(version, wf.nullable))
            for tag, i, wf in tagged_fields
        ]
        absent = [
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
            present = []
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


def message(*, api_key: int | None = None, versions: tuple[int, int] = (0, 0)) -> Callable[[type], type]:
    """Makes a class a frozen, slotted dataclass and attaches its compiled `__schema__`.

    Without an api_key the class is a struct used as an array element (BrokerEndpoint).
    """

    def wrap(cls: type) -> type:
        cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
        cls.__schema__ = Schema(cls, api_key, versions)  # type: ignore[attr-defined]
        return cls

    return wrap
