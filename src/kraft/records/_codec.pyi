"""Types of the record codec written in C (_codec.c), so its callers are checked."""

from collections.abc import Iterable, Sequence
from typing import TypeVar

from typing_extensions import Buffer

_Header = TypeVar("_Header")

class Record(tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]):
    """A decoded record: (offset, timestamp, key, value, headers), a tuple with named fields."""

    def __new__(cls, sequence: Iterable[object], /) -> Record: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...

def encode_records(
    records: Sequence[tuple[object, ...]], base_timestamp: int, default_timestamp: int, /
) -> tuple[bytes, int]: ...
def decode_records(
    buffer: Buffer,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    count: int,
    log_append_time: int | None,
    /,
) -> list[Record]: ...
def walk_batches(
    buffer: Buffer,
    start: int,
    limit: int,
    verify_crc: bool,
    expected_offset: int | None,
    stop_at_partial: bool,
    header_type: type[_Header],
    position: int,
    stamp_epoch: int | None,
    /,
) -> tuple[list[_Header], int, tuple[bool, int, str] | None]: ...
