"""Types of the metadata record reader written in C (_fields.c), so its callers are checked."""

from collections.abc import Sequence
from typing import Any

from typing_extensions import Buffer

class Plan:
    """One message class at one version, compiled for the reader (see _fields.c)."""

    def __new__(
        cls,
        message_class: type,
        fields: Sequence[tuple[object, Any, bool]],
        tagged: Sequence[tuple[int, tuple[object, Any, bool]]],
        defaults: Sequence[tuple[object, object]],
        /,
    ) -> Plan: ...

class Decoder:
    """Reads framed metadata records; every problem with a value raises `error`."""

    def __new__(
        cls,
        error: type[Exception],
        frame_version: int,
        record_types: Sequence[tuple[int, str, int, int, tuple[Plan, ...]]],
    ) -> Decoder: ...
    def decode(self, value: Buffer | None, /) -> Any: ...
