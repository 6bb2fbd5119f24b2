"""Quorum arithmetic, once: what a majority of the voters decides.

Raft's safety rests on one rule, that any two majorities of a voter set share a voter. Every
decision the core takes by counting voters goes through this module, so the rule is written
once and table-tested (tests/raft/test_quorum.py), as etcd keeps its quorum package:

    vote_result       an election (or pre-vote) is won, lost or still open
    committed_offset  the largest log offset a majority of voters hold (the high watermark's
                      candidate, before the leader's own-epoch rule)
    quorum_contact    the time by which a majority of voters had been heard from (check quorum)

Only the voters given count: answers and positions of other replicas (observers, voters
removed since) are left out by the caller or ignored here.
"""

from collections.abc import Collection, Iterable, Set
from enum import Enum


def majority(voters: int) -> int:
    """How many of `voters` voters make a majority."""
    return voters // 2 + 1


class VoteResult(Enum):
    WON = "won"
    LOST = "lost"
    OPEN = "open"


def vote_result(voters: Collection[int], granted: Set[int], refused: Set[int]) -> VoteResult:
    """WON once a majority of `voters` granted; LOST once so many refused (or cannot be
    reached, which the caller counts as refusing) that the rest cannot make a majority;
    otherwise OPEN. A voter in both sets counts as granting: a grant is never taken back."""
    needed = majority(len(voters))
    yes = sum(1 for v in voters if v in granted)
    if yes >= needed:
        return VoteResult.WON
    no = sum(1 for v in voters if v in refused and v not in granted)
    return VoteResult.LOST if len(voters) - no < needed else VoteResult.OPEN


def _reached_by_majority(values: Iterable[int]) -> int:
    """The largest value that a majority of the values is at or above."""
    ordered = sorted(values, reverse=True)
    if not ordered:
        raise ValueError("no voters: nothing is reached by a majority of none")
    return ordered[len(ordered) // 2]


def committed_offset(positions: Iterable[int]) -> int:
    """The largest offset that a majority of the voters' log positions (one per voter) reach."""
    return _reached_by_majority(positions)


def quorum_contact(last_heard: Iterable[int]) -> int:
    """The time by which a majority of the voters (one time each) had been heard from."""
    return _reached_by_majority(last_heard)
