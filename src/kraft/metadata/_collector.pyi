"""Types of the image entries' untracking written in C (_collector.c), so its callers are checked."""

from typing import TypeVar

T = TypeVar("T")

def untracked(obj: T, /) -> T:
    """`obj`, out of the cyclic collector if it is a tuple (or NamedTuple) whose items are no
    containers (ints, bytes, str, None) or are such tuples; anything else stays as it is."""
