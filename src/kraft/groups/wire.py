"""Kafka's two encodings of a message's fields, as `__consumer_offsets` records use them.

The coordinator's record schemas (OffsetCommitKey/Value, GroupMetadataKey/Value) are old:
every version before 4 uses the classic encoding (int16 lengths for strings, int32 for bytes
and arrays, -1 for null), and version 4 of the values is the first flexible one (KIP-482:
unsigned-varint lengths plus one, 0 for null, a tagged-field section ending every struct).
kraft.metadata's schema codec speaks only the flexible encoding (every KRaft metadata record
is flexible), so these records are read and written here, field by field, by the schemas in
records.py. Unknown tagged fields are skipped on read, as Kafka's readers skip them.
"""

import struct

from kraft.varint import uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MAX_STRING_BYTES = 0x7FFF  # a classic string's int16 length (and Kafka's limit for any string field)


class GroupRecordError(ValueError):
    """A `__consumer_offsets` record that does not read, or a value its field cannot hold."""


class Reader:
    """A cursor over one key or value; a short or malformed read raises GroupRecordError
    naming what was being read and where."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def error(self, reason: str) -> GroupRecordError:
        return GroupRecordError(f"{self.what}: {reason}")

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise self.error(f"ends early at byte {self.pos} (needs {n} more)")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise self.error(f"has a varint longer than 5 bytes at byte {self.pos}")

    def _length(self, flexible: bool, wide: bool) -> int:
        """A length: -1 for null (classic) or 0 (flexible, read as -1)."""
        if flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self, flexible: bool) -> str | None:
        n = self._length(flexible, wide=False)
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise self.error(f"has a string that is not UTF-8 ({e})") from None

    def string(self, flexible: bool) -> str:
        start = self.pos
        value = self.nullable_string(flexible)
        if value is None:
            raise self.error(f"has a null string at byte {start} where the schema allows none")
        return value

    def bytes_(self, flexible: bool) -> bytes:
        start = self.pos
        n = self._length(flexible, wide=True)
        if n < 0:
            raise self.error(f"has null bytes at byte {start} where the schema allows none")
        return bytes(self._take(n))

    def array_length(self, flexible: bool) -> int:
        start = self.pos
        n = self._length(flexible, wide=True)
        if n < 0:
            raise self.error(f"has a null array at byte {start} where the schema allows none")
        if n > len(self.data) - self.pos:  # every element takes at least a byte
            raise self.error(f"has an array of {n} elements in the {len(self.data) - self.pos} bytes left")
        return n

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.error(f"has {len(self.data) - self.pos} bytes after its last field")


class Writer:
    """Collects one key's or value's fields; `value()` joins them. A value a field cannot
    hold raises GroupRecordError naming the field."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def _fixed(self, packer: struct.Struct, value: int, name: str) -> None:
        try:
            self.parts.append(packer.pack(value))
        except struct.error as e:
            raise GroupRecordError(f"{name}: {value!r} does not fit ({e})") from None

    def int16(self, value: int, name: str) -> None:
        self._fixed(_I16, value, name)

    def int32(self, value: int, name: str) -> None:
        self._fixed(_I32, value, name)

    def int64(self, value: int, name: str) -> None:
        self._fixed(_I64, value, name)

    def _length(self, n: int, flexible: bool, wide: bool) -> None:
        if flexible:
            self.parts.append(uvarint(n + 1))
        else:
            self.parts.append(_I32.pack(n) if wide else _I16.pack(n))

    def nullable_string(self, value: str | None, flexible: bool, name: str) -> None:
        if value is None:
            self._length(-1, flexible, wide=False)
            return
        data = value.encode()
        if len(data) > MAX_STRING_BYTES:
            raise GroupRecordError(f"{name}: {len(data)} bytes, more than a string's {MAX_STRING_BYTES}")
        self._length(len(data), flexible, wide=False)
        self.parts.append(data)

    def string(self, value: str, flexible: bool, name: str) -> None:
        if value is None:
            raise GroupRecordError(f"{name}: null where the schema allows none")
        self.nullable_string(value, flexible, name)

    def bytes_(self, value: bytes, flexible: bool) -> None:
        self._length(len(value), flexible, wide=True)
        self.parts.append(bytes(value))

    def array_length(self, n: int, flexible: bool) -> None:
        self._length(n, flexible, wide=True)

    def no_tagged_fields(self) -> None:
        self.parts.append(b"\x00")

    def value(self) -> bytes:
        return b"".join(self.parts)
