"""Keeping an image out of the cyclic collector's walks: its immutable entries are untracked
as they are built (kraft.metadata._collector), what could hold a cycle never is."""

import gc
from dataclasses import dataclass
from typing import NamedTuple

from kraft.metadata import operations as ctl
from kraft.metadata._collector import untracked
from kraft.metadata.image import PartitionRegistration
from tests.metadata.cluster import Cluster


class Pair(NamedTuple):
    a: object
    b: object


@dataclass
class Box:
    value: object


def test_a_namedtuple_of_ids_and_id_lists_leaves_the_collector():
    p = PartitionRegistration((1, 2, 3), (1, 2), (), (), 1, 0, 4, 5)
    assert gc.is_tracked(p), "CPython never untracks a tuple subclass by itself"
    assert untracked(p) is p
    assert not gc.is_tracked(p) and not gc.is_tracked(p.replicas) and not gc.is_tracked(p.isr)


def test_what_could_hold_a_cycle_stays_tracked():
    holds_list = Pair(1, [2])
    holds_box = Pair((1, 2), Box(3))
    nested = Pair(Pair(1, (2, [3])), 4)
    for value in (holds_list, holds_box, nested, [1, 2], Box((1,))):
        assert untracked(value) is value
        assert gc.is_tracked(value), f"{value!r} holds a mutable object and must stay tracked"
    cycle = Box(None)
    cycle.value = Pair(cycle, 1)
    untracked(cycle.value)
    assert gc.is_tracked(cycle.value)


def test_a_container_untracked_for_now_keeps_its_tuple_tracked():
    """CPython untracks a dict of atomic values and tracks it again once it holds a
    container: a cycle through it and an untracked tuple would then hide from the collector."""
    atoms: dict = {1: 2}
    assert not gc.is_tracked(atoms)
    holder = untracked(Pair(atoms, 1))
    assert gc.is_tracked(holder)
    atoms[3] = holder
    assert gc.is_tracked(atoms), "the dict now holds a tuple: the cycle is the collector's to find"


def test_the_partitions_and_topics_a_batch_builds_are_untracked():
    c = Cluster()
    c.add_brokers(1, 2, 3)
    c.create("a", partitions=3)
    c.commit(ctl.fence_broker(c.image, 1))
    topic = c.image.topic("a")
    assert any(p.leader_epoch > 0 for p in topic.partitions), "the fence changed partitions of a"
    assert not gc.is_tracked(topic) and not gc.is_tracked(topic.partitions)
    assert not any(gc.is_tracked(p) for p in topic.partitions)
