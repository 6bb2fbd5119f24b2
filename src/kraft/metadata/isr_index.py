"""The image's broker -> topic id -> partition ids index (`brokers_to_isrs`, Kafka's BrokersToIsrs).

Derived fencing changes every partition whose ISR holds the broker (see `kraft.metadata.delta`);
without an index that is a scan of every topic per fenced broker. So each image carries the
index, and each batch updates it by what it changed: a delta collects `IndexChanges` while it
makes its topics (broker -> topic id -> the topic's partition ids whose ISR holds the broker,
None for none), and `applied` makes the next index, touching only the entries that differ.
"""

import immutables

from kraft.metadata.image import EMPTY_MAP, MetadataImage, PartitionRegistration, intern_ids, merged

IndexChanges = dict[int, dict[bytes, tuple[int, ...] | None]]


def removed_topic(index: IndexChanges, tid: bytes, partitions: tuple[PartitionRegistration, ...]) -> None:
    """A topic the image had is gone: every broker in one of its ISRs loses it."""
    for p in partitions:
        for b in p.isr:
            index.setdefault(b, {})[tid] = None


def added_topic(index: IndexChanges, tid: bytes, partitions: tuple[PartitionRegistration, ...]) -> None:
    """A topic new in this batch: every broker in one of its ISRs gains it."""
    for pid, p in enumerate(partitions):
        for b in p.isr:
            entries = index.get(b)
            if entries is None:
                entries = index[b] = {}
            pids = entries.get(tid)
            entries[tid] = intern_ids((pid,)) if pids is None else pids + (pid,)


def changed_partitions(index: IndexChanges, image: MetadataImage, tid: bytes,
                       partitions: list[PartitionRegistration], changed: set[int]) -> None:
    """Index updates for the `changed` partitions of a topic the image has: only the brokers
    that joined or left an ISR, so fencing a broker costs what it hosts, not its topics' size."""
    base = image.topics_by_id[tid].partitions
    moves: dict[int, tuple[set[int], set[int]]] = {}  # broker -> (partitions joined, left)
    for pid in changed:
        old = set(base[pid].isr) if pid < len(base) else set()
        new = set(partitions[pid].isr)
        for b in new - old:
            moves.setdefault(b, (set(), set()))[0].add(pid)
        for b in old - new:
            moves.setdefault(b, (set(), set()))[1].add(pid)
    for b, (joined, left) in moves.items():
        current = image.brokers_to_isrs.get(b, EMPTY_MAP).get(tid, ())
        pids = tuple(sorted((set(current) - left) | joined))
        index.setdefault(b, {})[tid] = intern_ids(pids) if pids else None


def applied(base: immutables.Map, changes: IndexChanges) -> immutables.Map:
    """`base` (an image's `brokers_to_isrs`) with `changes`, touching only the entries that differ."""
    out = base.mutate()
    for b, entries in changes.items():
        current = base.get(b, EMPTY_MAP)
        if not current:  # a broker new to the index: its entries can only be additions
            out[b] = immutables.Map(entries)
            continue
        updated = merged(current, {tid: pids for tid, pids in entries.items() if current.get(tid) != pids})
        if updated:
            out[b] = updated
        else:
            out.pop(b, None)
    return out.finish()
