"""One Raft partition on a node, driven: its core, its files, its state machine, its timer.

A node replicates `__cluster_metadata-0` (the QuorumController its state machine) and the
`__consumer_offsets` partitions (a GroupCoordinator each). Each is a RaftCore of its own,
over a FileLog, a FileQuorumStateStore and a FileSnapshotStore in its own directory, and
each is driven the same way, by one PartitionDriver: every event (a request, a response,
a finished fsync, a timer) becomes one `step`, after which the driver sends what the
core's outbox holds (through the node's shared peer connections), starts an fsync in a
worker thread if the log has unflushed appends (group commit: appends go on while it
runs), polls the state machine, starts its snapshot job in a worker thread if one is due,
and re-arms the timer for the earlier of the core's and the state machine's deadlines.

The timer is one loop.call_at handle, re-armed after a step only when the next deadline
comes earlier than the one armed (a step is often a single request's worth of work, tens
of thousands a second under load; the timer must cost nothing per step).

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

from kraft.groups import GroupRecordError
from kraft.metadata import ReplayError
from kraft.raft import InvariantViolation, RaftCore, Reply, Send
from kraft.raft import messages as m
from kraft.server.node_metrics import NodeMetrics
from kraft.server.runtime.fetch_snapshot_batch import FetchSnapshotBatcher
from kraft.server.runtime.peers import Peers
from kraft.storage import CorruptLogError, CorruptSnapshotError, FileLog, SnapshotWriter

log = logging.getLogger("kraft.server")
T = TypeVar("T")

# What stops a node at once: a write, sync, truncation, rename or removal that failed (the
# data's durability is unknown: after a failed fsync the kernel may have dropped the pages
# it could not write, and a second fsync would succeed with the data gone), durable data
# that no longer reads back, a committed record that cannot be replayed (a metadata record
# newer than this build or contradicting the image: Kafka's loader stops there too; a group
# record that does not decode), or the core finding its own rules broken. The core is
# sans-IO, so an OSError out of a step can only come from the storage it was handed.
FATAL = (InvariantViolation, OSError, CorruptLogError, CorruptSnapshotError, ReplayError, GroupRecordError)

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


class SnapshotJob(Protocol):
    """A state machine's snapshot being written: `run` on a worker thread."""

    writer: SnapshotWriter
    reason: str

    def run(self) -> None: ...


class StateMachine(Protocol):
    """What the driver calls on a partition's state machine (the QuorumController, a
    GroupCoordinator) besides the Raft listener calls the core makes."""

    def poll(self, now: int) -> None:
        """Its own timeouts; called after every step."""
        ...

    def next_deadline(self, now: int) -> int | None:
        """When `poll` next has something to do (None: nothing planned)."""
        ...

    def start_snapshot(self, now: int) -> Any:
        """A SnapshotJob if one is due, else None."""
        ...

    def finish_snapshot(self, job: Any, error: BaseException | None = None) -> None: ...


class DriverHost(Protocol):
    """What a driver needs of its node."""

    node_id: int
    stopping: bool
    failure: BaseException | None
    peers: Peers
    snapshot_fetches: FetchSnapshotBatcher
    metrics: NodeMetrics

    def now(self) -> int: ...

    def fail(self, error: BaseException) -> None:
        """Stops the node: nothing is stepped, sent or acknowledged after this."""
        ...

    def spawn(self, coroutine: Any) -> asyncio.Task: ...


class PartitionDriver:
    def __init__(self, host: DriverHost, core: RaftCore, log_: FileLog, machine: StateMachine) -> None:
        self.host = host
        self.core = core
        self.log = log_
        self.machine = machine
        self.partition: m.LogPartition = core.config.partition
        self.step_listeners: list[Callable[[RaftCore], None]] = []
        self.timed: Callable[[RaftCore, float], None] | None = None  # the step's duration, for metrics
        self._replies: dict[int, asyncio.Future] = {}
        self._next_handle = 0
        self._flushing = False
        self._flush_task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0  # loop time the armed timer fires at

    @property
    def running(self) -> bool:
        return not self.host.stopping and self.host.failure is None

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """One event into the core, then what it asks for; returns the action's result, or
        None if the node no longer steps. A fatal error (see FATAL) stops the node before
        anything else is sent; any other error is the action's own answer to its caller (a
        refused controller or coordinator operation) and leaves the core as it was."""
        if not self.running:
            return None
        core = self.core
        started = time.perf_counter()
        with logging_as(self.partition):
            try:
                result = action(core, self.host.now())
            except FATAL as e:
                self.host.fail(e)
                return None
            try:
                self._after_step(core)
            except FATAL as e:
                self.host.fail(e)
        if self.timed is not None:
            self.timed(core, time.perf_counter() - started)
        return result

    def _after_step(self, core: RaftCore) -> None:
        for message in core.poll_outbox():
            if isinstance(message, Send):
                self._send(message)
            else:
                self._reply(message)
        if core.wants_flush and not self._flushing:
            self._flushing = True
            self._flush_task = asyncio.create_task(self._flush())
        now = self.host.now()
        self.machine.poll(now)
        job = self.machine.start_snapshot(now)
        if job is not None:
            self.host.spawn(self._snapshot(job))
        for listener in self.step_listeners:
            listener(core)
        self._arm_timer(core)

    # ---------------------------------------------------------------- messages

    def _send(self, send: Send) -> None:
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

        # A FetchSnapshot may go out with other partitions' (fetch_snapshot_batch.py).
        sender = self.host.snapshot_fetches if isinstance(send.request, m.FetchSnapshotRequest) else self.host.peers
        sender.send(
            send.destination,
            send.request,
            on_response,
            lambda: self.step(lambda core, now: core.handle_send_failure(request_id, now)),
            extra,
        )

    def _reply(self, reply: Reply) -> None:
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
        self._next_handle += 1
        handle = self._next_handle
        future = asyncio.get_running_loop().create_future()
        self._replies[handle] = future
        self.step(lambda core, now: core.handle_request(handle, request, now))
        try:
            return await future
        finally:
            self._replies.pop(handle, None)

    def fail_replies(self, error: BaseException) -> None:
        for future in self._replies.values():
            if not future.done():
                future.set_exception(error)

    # ---------------------------------------------------------------- time

    def start(self) -> None:
        self.step(lambda core, now: core.tick(now))

    def _deadline(self, core: RaftCore, now: int) -> int:
        machine = self.machine.next_deadline(now)
        return core.next_deadline() if machine is None else min(core.next_deadline(), machine)

    def _arm_timer(self, core: RaftCore) -> None:
        """Makes sure a tick comes by the next deadline (and at least once a second)."""
        loop = asyncio.get_running_loop()
        now = self.host.now()
        due = loop.time() + min(max(0.0, (self._deadline(core, now) - now) / 1000), 1.0)
        if self._timer is not None and self._timer_due <= due:
            return  # an earlier tick is armed; it looks again when it fires
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = loop.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.running:
            return
        now = self.host.now()
        if self._deadline(self.core, now) <= now:
            self.step(lambda c, now: c.tick(now))
        else:
            self._arm_timer(self.core)  # woke early (the 1 s cap, or the clocks disagree by a little)

    # ---------------------------------------------------------------- the disk

    async def _flush(self) -> None:
        """Group commit: one fsync, in a worker thread, for every append made before it began."""
        try:
            while self.core.wants_flush and self.running:
                try:
                    await asyncio.to_thread(self.log.flush)
                except FATAL as e:
                    self.host.fail(e)
                    return
                self.step(lambda core, now: core.handle_flush(now))
        finally:
            self._flushing = False

    async def _snapshot(self, job: SnapshotJob) -> None:
        started = time.monotonic()
        try:
            await asyncio.to_thread(job.run)
        except FATAL as e:  # the snapshot's file could not be written: the disk is failing
            self.machine.finish_snapshot(job, e)
            self.host.fail(e)
            return
        except Exception as e:  # any other failure is logged and the snapshot retried later
            self.machine.finish_snapshot(job, e)
            return
        self.machine.finish_snapshot(job)
        log.info(
            "node %d wrote snapshot %d-%d of %s in %.0f ms (%s)",
            self.host.node_id, job.writer.snapshot_id.end_offset, job.writer.snapshot_id.epoch, self.partition,
            (time.monotonic() - started) * 1000, job.reason,
        )
        self.step(lambda core, now: core.tick(now))

    async def stop(self) -> None:
        """After the node stopped stepping: no timer, no fsync under way, the log closed
        (flushed unless the node failed)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._flush_task is not None:
            await asyncio.gather(self._flush_task, return_exceptions=True)  # never close under a running fsync
        for future in self._replies.values():
            future.cancel()
        self.log.close(flush=self.host.failure is None)
