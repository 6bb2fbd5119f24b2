"""One Raft partition on a node, driven: its core, its files, its state machine, its timer.

A node replicates `__cluster_metadata-0` (the QuorumController its state machine) and the
`__consumer_offsets` partitions (a GroupCoordinator each). Each is a RaftCore of its own,
over a FileLog, a FileQuorumStateStore and a FileSnapshotStore in its own directory, and
each is driven the same way: by the step loop every driver of a core shares
(kraft.raft.driver, which the simulator runs too), through a PartitionDriver, the node's
IO for it. Every event (a request, a response, a finished fsync, a timer) becomes one
step; what the loop then asks for is done here: requests go out through the node's shared
peer connections, answers to the parked futures of the controller listener, an fsync and
a snapshot job each in a worker thread, the timer on asyncio's loop.

What a driver needs of its node is a `DriverHost`: whether it still runs, the peers (and
the batcher its FetchSnapshot requests go through, so that partitions downloading from one
leader share a request), the clock, and how to stop it (a fatal error in any partition stops the whole node: the
disk is shared, and a node that serves some partitions of a failing disk would hide it).
"""

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from kraft.groups import GroupRecordError, GroupStateError
from kraft.metadata import ReplayError
from kraft.raft import InvariantViolation, RaftCore, Reply, Send
from kraft.raft import messages as m
from kraft.raft.driver import Driver, StateMachine
from kraft.server.node_metrics import NodeMetrics
from kraft.server.runtime.fetch_batch import QUIET_SHARE_OF_WAIT, FetchBatcher
from kraft.server.runtime.fetch_snapshot_batch import FetchSnapshotBatcher
from kraft.server.runtime.peers import Peers
from kraft.statemachine.snapshot_jobs import SnapshotJob
from kraft.storage import CorruptLogError, CorruptSnapshotError, FileLog

log = logging.getLogger("kraft.server")
T = TypeVar("T")

# What stops a node at once: a write, sync, truncation, rename or removal that failed (the
# data's durability is unknown: after a failed fsync the kernel may have dropped the pages
# it could not write, and a second fsync would succeed with the data gone), durable data
# that no longer reads back, a committed record that cannot be replayed (a metadata record
# newer than this build or contradicting the image: Kafka's loader stops there too; a group
# record that does not decode), or the Raft core or a group coordinator finding its own rules
# broken. The core is sans-IO, so an OSError out of a step can only come from the storage it
# was handed.
FATAL = (InvariantViolation, OSError, CorruptLogError, CorruptSnapshotError, ReplayError, GroupRecordError,
         GroupStateError)

# The partition whose step is running: the core's log lines ("node 1: elected leader of
# epoch 3") do not name it, so the node's log handler adds it (kraft.cli.server_cmd).
LOG_PARTITION: contextvars.ContextVar[str] = contextvars.ContextVar("kraft_partition", default=str(m.METADATA))


@contextmanager
def logging_as(partition: m.LogPartition) -> Iterator[None]:
    """Log lines written meanwhile are this partition's."""
    token = LOG_PARTITION.set(str(partition))
    try:
        yield
    finally:
        LOG_PARTITION.reset(token)


class DriverHost(Protocol):
    """What a driver needs of its node."""

    node_id: int
    stopping: bool
    failure: BaseException | None
    peers: Peers
    fetches: FetchBatcher
    snapshot_fetches: FetchSnapshotBatcher
    metrics: NodeMetrics

    def now(self) -> int: ...

    def fail(self, error: BaseException) -> None:
        """Stops the node: nothing is stepped, sent or acknowledged after this."""
        ...

    def spawn(self, coroutine: Any) -> asyncio.Task: ...


class PartitionDriver:
    """The node's adapter over the step loop (kraft.raft.driver): its transport is the peer
    connections and the parked answers of the controller listener, its clock asyncio's, its
    disk the FileLog fsynced and snapshots written in worker threads; a fatal error stops
    the node."""

    def __init__(self, host: DriverHost, core: RaftCore, log_: FileLog, machine: StateMachine[SnapshotJob]) -> None:
        self.host = host
        self.log = log_
        self.partition: m.LogPartition = core.config.partition
        self._key = (self.partition.topic_id, self.partition.index)  # as a Fetch names it
        self.loop: Driver[SnapshotJob] = Driver(core, machine, self)
        self.timed: Callable[[RaftCore, float], None] | None = None  # the step's duration, for metrics
        self._replies: dict[int, asyncio.Future] = {}
        self._next_handle = 0
        self._flush_tasks: set[asyncio.Task] = set()  # a flush, and the recovery point after it
        self._together: list[tuple[Callable[[RaftCore, int], Any], asyncio.Future]] = []  # step_together's
        self._timer: asyncio.TimerHandle | None = None
        # For fetch_batch.serve_across: each replica's last Fetch stepped into the core, with no
        # news for it, and when; and the future of the next news, with the state it is news to.
        self._quiet_fetches: dict[int, tuple[tuple[int, int, int, int], int]] = {}
        self._news: asyncio.Future[None] | None = None
        self._news_of: tuple[int, int | None, int, bool] | None = None
        self.loop.step_listeners.append(self._tell_news)

    @property
    def core(self) -> RaftCore:
        return self.loop.core

    @property
    def step_listeners(self) -> list[Callable[[RaftCore], None]]:
        return self.loop.step_listeners

    @property
    def running(self) -> bool:
        return not self.host.stopping and self.host.failure is None

    def now(self) -> int:
        return self.host.now()

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """One event into the core, then what it asks for (kraft.raft.driver); returns the
        action's result, or None if the node no longer steps or the step failed it. A fatal
        error (see FATAL) stops the node before anything else is sent; any other error is
        the action's own answer to its caller (a refused controller or coordinator
        operation) and leaves the core as it was."""
        return self.loop.step(action)

    def step_together(self, action: Callable[[RaftCore, int], T]) -> "asyncio.Future[T | None]":
        """`step` for a client's request: the requests that arrive in one turn of the loop are
        stepped together at its end, in order, as one step (one outbox poll, one deadline, one
        after-step for all: at 64 clients a commit's share of that was a sixth of the leader's
        CPU). Each gets its own result or exception; None if the node no longer steps. A
        request whose handler was cancelled meanwhile (its client left) is not run."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T | None] = loop.create_future()
        if not self._together:
            loop.call_soon(self._step_together)
        self._together.append((action, future))
        return future

    def _step_together(self) -> None:
        queued, self._together = self._together, []

        def each(core: RaftCore, now: int) -> None:
            for action, future in queued:
                if future.done():  # cancelled
                    continue
                try:
                    result = action(core, now)
                except FATAL:
                    raise
                except Exception as e:  # that request's own answer; the others go on, as separate steps would
                    future.set_exception(e)
                else:
                    future.set_result(result)

        self.step(each)
        for _, future in queued:
            if not future.done():  # the node stopped, before or during the step
                future.set_result(None)

    @contextmanager
    def stepping(self) -> Iterator[None]:
        started = time.perf_counter()
        token = LOG_PARTITION.set(str(self.partition))
        try:
            yield
        except FATAL as e:
            self.host.fail(e)
        finally:
            LOG_PARTITION.reset(token)
        if not self.loop.flushing:  # not about to ask its leader again after an fsync (fetch_batch.py)
            self.host.fetches.settle(self._key)
        if self.timed is not None:
            self.timed(self.core, time.perf_counter() - started)

    def start(self) -> None:
        self.loop.start()

    # ---------------------------------------------------------------- messages

    def send(self, send: Send) -> None:
        request_id = send.request_id
        extra = 0
        if isinstance(send.request, m.FetchRequest):
            extra = int(send.request.max_wait.total_seconds() * 1000)
        metrics = self.host.metrics

        def on_response(response: Any) -> None:
            if isinstance(response, m.FetchSnapshotResponse):
                for topic in response.topics:
                    for p in topic.partitions:
                        metrics.snapshot_bytes_fetched.inc(len(p.unaligned_records or b""))
            self.step(lambda core, now: core.handle_response(request_id, response, now))

        # A Fetch or FetchSnapshot may go out with other partitions' (fetch_batch.py, fetch_snapshot_batch.py).
        sender: Any = self.host.peers
        if isinstance(send.request, m.FetchRequest):
            sender = self.host.fetches
        elif isinstance(send.request, m.FetchSnapshotRequest):
            sender = self.host.snapshot_fetches
        sender.send(
            send.destination,
            send.request,
            on_response,
            lambda: self.step(lambda core, now: core.handle_send_failure(request_id, now)),
            extra,
        )

    def reply(self, reply: Reply) -> None:
        future = self._replies.pop(reply.handle, None)
        if future is None or future.done():
            return
        response = reply.response
        metrics = self.host.metrics
        if isinstance(response, m.FetchResponse):
            for topic in response.responses:
                for p in topic.partitions:
                    metrics.fetch_bytes.inc(len(p.records) if p.records is not None else 0)
        elif isinstance(response, m.FetchSnapshotResponse):
            for snapshot_topic in response.topics:
                for chunk in snapshot_topic.partitions:
                    metrics.snapshot_bytes_served.inc(len(chunk.unaligned_records or b""))
        future.set_result(response)

    async def handle_request(self, request: Any) -> Any:
        """A Raft request into the core; the answer may come later (a parked Fetch)."""
        handle, future = self.begin_request(request)
        try:
            return await future
        finally:
            self._replies.pop(handle, None)

    def begin_request(self, request: Any) -> tuple[int, asyncio.Future]:
        """A Raft request into the core, in this step; its handle, and its answer to come."""
        self._next_handle += 1
        handle = self._next_handle
        future = asyncio.get_running_loop().create_future()
        self._replies[handle] = future
        self.step(lambda core, now: core.handle_request(handle, request, now))
        return handle, future

    def complete_fetch(self, handle: int) -> None:
        """The Fetch parked as `handle` is answered now (RaftCore.complete_fetch)."""
        self.step(lambda core, now: core.complete_fetch(handle, now))

    def has_news(self, fetch_offset: int, high_watermark: int) -> bool:
        """Whether a Fetch from this position would be answered at once (RaftCore.has_news;
        fetch_batch.serve_across orders its work so)."""
        return self.core.has_news(fetch_offset, high_watermark)

    # ---------------------------------------------------------------- a leader's quiet partitions

    def fetched_quietly(self, replica_id: int, part: Any, at: int) -> None:
        """A Fetch of this replica's, stepped into the core at `at`, was answered with nothing new."""
        self._quiet_fetches[replica_id] = (_position(part), at)

    def still_quiet(self, replica_id: int, part: Any, wait_ms: int) -> bool:
        """Whether this replica's Fetch may stay out of the core this time and be answered with
        `answer_at_end` (fetch_batch.serve_across): it asks from exactly where its last one,
        stepped less than QUIET_SHARE_OF_WAIT of its MaxWait ago, was answered with nothing new
        (so that one's contact and position still hold for check quorum and the high
        watermark), this node still leads in the epoch it names, and there is still no news for it."""
        last = self._quiet_fetches.get(replica_id)
        if last is None or last[0] != _position(part) or self.host.now() - last[1] >= wait_ms * QUIET_SHARE_OF_WAIT:
            return False
        core = self.core
        return (core.is_leader and core.epoch == part.current_leader_epoch and part.fetch_offset == core.log.end_offset
                and not core.has_news(part.fetch_offset, part.high_watermark))

    def answer_at_end(self) -> Any:
        """A quiet Fetch's part of the answer (RaftCore.fetch_answer_at_end)."""
        return self.core.fetch_answer_at_end().responses[0].partitions[0]

    def news(self) -> "asyncio.Future[None]":
        """Done after the first step that moves the log's end, the high watermark, the epoch or
        the role: what a quiet Fetch, left out of the core, is woken by as a parked one would be."""
        if self._news is None:
            core = self.core
            self._news = asyncio.get_running_loop().create_future()
            self._news_of = (core.log.end_offset, core.high_watermark, core.epoch, core.is_leader)
        return self._news

    def _tell_news(self, core: RaftCore) -> None:
        news = self._news
        if news is not None and self._news_of != (core.log.end_offset, core.high_watermark, core.epoch,
                                                  core.is_leader):
            self._news = self._news_of = None
            if not news.done():
                news.set_result(None)

    def fail_replies(self, error: BaseException) -> None:
        for future in self._replies.values():
            if not future.done():
                future.set_exception(error)

    # ---------------------------------------------------------------- time

    def call_at(self, deadline: int, callback: Callable[[], None]) -> int:
        """asyncio's timer, at most a second ahead: `now` is the wall clock and the loop's
        is monotonic, so a far deadline is looked at again rather than trusted."""
        if self._timer is not None:
            self._timer.cancel()
        now = self.host.now()
        delay = min(max(0, deadline - now), 1000)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + delay / 1000, callback)
        return now + delay

    # ---------------------------------------------------------------- the disk

    def flush(self, done: Callable[[], None]) -> None:
        task = asyncio.create_task(self._flush(done))
        self._flush_tasks.add(task)
        task.add_done_callback(self._flush_tasks.discard)

    async def _flush(self, done: Callable[[], None]) -> None:
        """Group commit: one fsync, in a worker thread, for every append made before it began.
        `done` is called as soon as the data is durable, while the thread goes on to raise the
        recovery point (FileLog.flush_data): that second device flush is off the answer's path."""
        loop = asyncio.get_running_loop()

        def sync() -> None:
            self.log.flush_data()
            loop.call_soon_threadsafe(done)
            self.log.write_recovery_point()

        try:
            await asyncio.to_thread(sync)
        except FATAL as e:
            self.host.fail(e)

    def write_snapshot(self, job: SnapshotJob, done: Callable[[BaseException | None], None]) -> None:
        self.host.spawn(self._snapshot(job, done))

    async def _snapshot(self, job: SnapshotJob, done: Callable[[BaseException | None], None]) -> None:
        started = time.monotonic()
        try:
            await asyncio.to_thread(job.run)
        except FATAL as e:  # the snapshot's file could not be written: the disk is failing
            done(e)
            self.host.fail(e)
            return
        except Exception as e:  # any other failure is logged and the snapshot retried later
            done(e)
            return
        log.info(
            "node %d wrote snapshot %d-%d of %s in %.0f ms (%s)",
            self.host.node_id, job.writer.snapshot_id.end_offset, job.writer.snapshot_id.epoch, self.partition,
            (time.monotonic() - started) * 1000, job.reason,
        )
        done(None)

    async def stop(self) -> None:
        """After the node stopped stepping: no timer, no fsync under way, the log closed
        (flushed unless the node failed)."""
        if self._timer is not None:
            self._timer.cancel()
        await asyncio.gather(*self._flush_tasks, return_exceptions=True)  # never close under a running fsync
        for future in self._replies.values():
            future.cancel()
        self.log.close(flush=self.host.failure is None)


def _position(part: Any) -> tuple[int, int, int, int]:
    """What a Fetch's partition asks from: fetch offset, last fetched epoch, leader epoch, high watermark."""
    return part.fetch_offset, part.last_fetched_epoch, part.current_leader_epoch, part.high_watermark
