"""Which `__consumer_offsets` partition keeps a group: Kafka's rule, written once.

Kafka's coordinator is the leader of partition `Utils.abs(groupId.hashCode()) %
offsets.topic.num.partitions`, with Java's String.hashCode (31-polynomial over the UTF-16
code units, wrapping at 32 bits) and Utils.abs (0 for Integer.MIN_VALUE, whose Math.abs is
negative). Every node, and any tool that looks a group up, must compute the same partition,
so FindCoordinator, the request handlers and the tests all call `partition_for`.
"""

from functools import lru_cache

OFFSETS_TOPIC = "__consumer_offsets"
_INT_MIN = -(2**31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, int32."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of `group_id` among `partitions` (at least 1)."""
    if partitions < 1:
        raise ValueError(f"offsets.topic.num.partitions must be at least 1, got {partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions
