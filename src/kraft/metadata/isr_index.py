"""The image's broker -> topic id -> partition ids index (`brokers_to_isrs`, Kafka's BrokersToIsrs).

Derived fencing changes every partition whose ISR holds the broker (see `kraft.metadata.delta`);
without an index that is a scan of every topic per fenced broker. So each image carries the
index, and each batch updates it by what it changed: a delta collects `IndexChanges` while it
makes its topics (broker -> topic id -> the topic's partition ids whose ISR holds the broker,
None for none), and `applied` makes the next index, touching only the entries that differ.
"""

from collections.abc import Iterable

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


def changed_partitions(index: IndexChanges, image: MetadataImage,
                       topics: Iterable[tuple[bytes, list[PartitionRegistration], set[int]]]) -> None:
    """Index updates for the changed partitions (topic id, its partitions now, the ids of
    those changed) of topics the image has: only the brokers that joined or left an ISR, so
    fencing a broker costs what it hosts, not its topics' size. ISRs are short tuples:
    membership is tested on them, and no set is made per partition or per topic."""
    moves: dict[int, dict[bytes, tuple[list[int], list[int]]]] = {}  # broker -> topic -> (joined, left)
    by_id = image.topics_by_id
    for tid, partitions, changed in topics:
        base = by_id[tid].partitions
        for pid in changed:
            new = partitions[pid].isr
            old = base[pid].isr if pid < len(base) else ()
            if new == old:
                continue
            for b in new:
                if b not in old:
                    _moves(moves, b, tid)[0].append(pid)
            for b in old:
                if b not in new:
                    _moves(moves, b, tid)[1].append(pid)
    for b, topics_moved in moves.items():
        held = image.brokers_to_isrs.get(b, EMPTY_MAP)
        entries = index.setdefault(b, {})
        for tid, (came, gone) in topics_moved.items():
            current = held.get(tid, ())
            if not came and len(gone) == len(current):
                entries[tid] = None  # the broker left every ISR of this topic it was in: a fence
                continue
            pids = tuple(sorted(set(current).difference(gone).union(came)))
            entries[tid] = intern_ids(pids) if pids else None


def _moves(moves: dict[int, dict[bytes, tuple[list[int], list[int]]]], b: int,
           tid: bytes) -> tuple[list[int], list[int]]:
    """The (joined, left) lists of broker `b` in topic `tid`, made on first use: setdefault
    would build two lists and a tuple for each of a fence's thousands of calls."""
    topics = moves.get(b)
    if topics is None:
        topics = moves[b] = {}
    pair = topics.get(tid)
    if pair is None:
        pair = topics[tid] = ([], [])
    return pair


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
