"""Where a new topic's replicas go, and its id: deterministic given the caller's random source.

The controller runs on the leader only and its choices travel in the records, so they need
not be reproducible by other replicas; they are made from a `random.Random` the caller
passes (the Raft core's seeded source) so that a simulation replays exactly.
"""

import random
from collections.abc import Container, Sequence

from kraft.metadata.records import uuid_str

# Kafka never hands out these ids: the zero UUID means "none", and 0...01 is the
# metadata topic's own id.
RESERVED_TOPIC_IDS = frozenset({bytes(16), bytes(15) + b"\x01"})


def assign_replicas(
    brokers: Sequence[int], partitions: int, replication_factor: int, rng: random.Random
) -> list[tuple[int, ...]]:
    """Kafka's rack-unaware assignment: partition p's first replica (its leader) is broker
    (start + p) mod n, so leaders go round-robin; the followers come after it at a distance
    `shift` that grows by one every n partitions, so replicas spread over pairs of brokers.
    `start` and `shift` are drawn from `rng`. No broker appears twice in a partition."""
    n = len(brokers)
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} with {n} brokers")
    start = rng.randrange(n)
    shift = rng.randrange(n)
    assignment = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        followers = (brokers[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(replication_factor - 1))
        assignment.append((brokers[first], *followers))
    return assignment


def new_topic_id(rng: random.Random, in_use: Container[bytes]) -> bytes:
    """A random (version 4) UUID that is not reserved, not in `in_use`, and whose text form
    does not start with '-' (Kafka avoids those: they read as command-line options)."""
    while True:
        raw = bytearray(rng.getrandbits(128).to_bytes(16, "big"))
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        topic_id = bytes(raw)
        if topic_id in RESERVED_TOPIC_IDS or topic_id in in_use or uuid_str(topic_id).startswith("-"):
            continue
        return topic_id
