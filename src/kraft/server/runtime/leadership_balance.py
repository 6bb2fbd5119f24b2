"""The controller and the group coordinators on different nodes, wherever the voters allow.

Every voter replicates the metadata partition and each `__consumer_offsets` partition, and each
elects its leader on its own, so one node often leads the metadata partition and an offsets
partition together. It then does the leader's work of both on its one thread while the others
do a follower's: on 3 voters, a synchronous write's p50 was 0.5-0.8 ms higher so
(bench/writes_bench.py prints the layout). In Kafka the two never meet: a KRaft controller
leads no `__consumer_offsets` partition (those live on brokers), and brokers spread partition
leadership by preferred replica (`auto.leader.rebalance.enable`, default true). So, as long as
that setting holds, the leader of the metadata partition hands each offsets partition it leads
over to the others as its graceful shutdown does (EndQuorumEpoch, the most caught-up voters
first), once another voter of that partition has caught up within the fetch timeout (so a
successor is at hand). The metadata partition's leadership never moves for this.
"""

import asyncio
import logging
from collections.abc import Callable, Iterable

from kraft.raft import RaftCore
from kraft.server.runtime.partition_driver import PartitionDriver

log = logging.getLogger("kraft.node")

CHECK_INTERVAL_S = 0.1  # a partition is handed over within this of a successor catching up


def to_hand_over(metadata: RaftCore, offsets: Iterable[PartitionDriver], now: int,
                 fetch_timeout_ms: int) -> list[PartitionDriver]:
    """The offsets partitions the metadata partition's leader should hand over now."""
    if not metadata.is_leader:
        return []
    return [d for d in offsets if d.core.is_leader and _successor_ready(d.core, now, fetch_timeout_ms)]


def _successor_ready(core: RaftCore, now: int, fetch_timeout_ms: int) -> bool:
    leader = core.leader_state
    return leader is not None and any(
        voter != core.node_id and now - progress.last_caught_up_ms < fetch_timeout_ms
        for voter, progress in leader.voter_progress.items())


async def keep_apart(metadata: PartitionDriver, offsets: Iterable[PartitionDriver], now: Callable[[], int],
                     fetch_timeout_ms: int) -> None:
    """Runs for the node's life: hands over what `to_hand_over` names, every CHECK_INTERVAL_S."""
    while True:
        await asyncio.sleep(CHECK_INTERVAL_S)
        for driver in to_hand_over(metadata.core, offsets, now(), fetch_timeout_ms):
            where = driver.partition
            log.info("node %d leads the metadata partition and %s-%d: hands the latter over",
                     driver.core.node_id, where.topic, where.index)
            driver.step(lambda core, at: core.resign(at))
