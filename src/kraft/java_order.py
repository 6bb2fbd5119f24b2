"""The order in which a Java HashMap yields its keys: for the rows Kafka's tools print from
one (ConsumerGroupCommand collects offsets with Collectors.toMap), so that scripts and eyes
used to Kafka's output see the same rows in the same order; and for what Kafka's controller
checks in a map's order (UpdateFeatures' updates), so that the same one is refused first.

A HashMap puts a key in bucket (n - 1) & (h ^ (h >>> 16)) of a table of n buckets (16 at
first, doubled each time the map holds more than three quarters of n), keeps the keys of a
bucket in the order they were put, and iterates bucket by bucket; a resize splits each
bucket keeping that order, so the final table alone decides. (Buckets of 8 keys or more
become trees in Java; the tools' maps are far from that.)
"""

from collections.abc import Callable, Iterable
from typing import TypeVar

K = TypeVar("K")


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = _int32(31 * h + ((data[i] << 8) | data[i + 1]))
    return h


def topic_partition_hash(key: tuple[str, int]) -> int:
    """Kafka's TopicPartition.hashCode."""
    topic, partition = key
    return _int32(31 * (31 + partition) + string_hash(topic))


def hash_map_order(keys: Iterable[K], hash_code: Callable[[K], int]) -> list[K]:
    """`keys`, put into a HashMap in this order, as the map iterates them."""
    keys = list(dict.fromkeys(keys))
    buckets = 16
    while len(keys) > buckets * 3 // 4:
        buckets *= 2

    def bucket(key: K) -> int:
        h = hash_code(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (buckets - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: a bucket keeps the order of puts
