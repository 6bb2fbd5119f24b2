"""Types of the frame shape check written in C (_shape.c), so its callers are checked."""

from collections.abc import Sequence
from typing import Any

from typing_extensions import Buffer

class ShapeError(ValueError):
    """(position, reason): where a frame first fails its shape, and why."""

class Shape:
    """One message class, compiled for check() (see _shape.c)."""

    def __new__(
        cls,
        name: str,
        flexible: bool,
        fields: Sequence[tuple[str, tuple[Any, ...]]],
        tagged: Sequence[tuple[int, str, tuple[Any, ...]]],
        /,
    ) -> Shape: ...
    @property
    def min_size(self) -> int: ...

def check(shape: Shape, buffer: Buffer, position: int, /) -> int: ...
