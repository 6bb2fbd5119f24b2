"""The step loop: what follows every event into a Raft core, on a node and in the simulator alike.

A core is stepped one event at a time (a request, a response, a finished fsync, a timer,
the state machine's own append). After each step, in this order:

1. what the core's outbox holds goes out: requests to peers, answers to handles;
2. if the log holds appends not on disk and no fsync is under way, one starts (group
   commit: appends go on while it runs; the core hears of it through `handle_flush`);
3. the state machine runs its own timeouts (`poll`: the controller's bootstrap records and
   idle NoOps, a group coordinator's sessions), which may append for the next drain;
4. the state machine's snapshot starts if its policy says one is due (it is written while
   commits go on, and the core is ticked once it is, to see it);
5. the step listeners (the node's handlers waiting on the metadata log);
6. the timer is armed for the earlier of the core's and the state machine's deadlines,
   only when that comes before the one armed (a step can be one request's worth of work,
   tens of thousands a second: the timer must cost nothing per step); when it fires early
   it arms again, when due it ticks the core.

This module holds that order once. A node (server/runtime/partition_driver.py) and the
simulator's node (sim/simulated_node.py) are adapters over it: each is a `DriverIO`, the
world the loop acts in (a transport, a clock, a disk that fsyncs and writes snapshots, and
what a failed step does), so the simulator's seeds run the order a node runs.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from kraft.raft.core import RaftCore
from kraft.raft.outbox import Reply, Send

T = TypeVar("T")
Job = TypeVar("Job")


class StateMachine(Protocol[Job]):
    """What the loop calls on a partition's state machine (the QuorumController, a
    GroupCoordinator, the simulator's machines) besides the Raft listener calls the core makes."""

    def poll(self, now: int) -> None:
        """Its own timeouts; called after every step."""
        ...

    def next_deadline(self, now: int) -> int | None:
        """When `poll` next has something to do (None: nothing planned)."""
        ...

    def start_snapshot(self, now: int) -> Job | None:
        """A snapshot job if one is due: the IO writes it, then `finish_snapshot` is called."""
        ...

    def finish_snapshot(self, job: Job, error: BaseException | None = None) -> None: ...


class DriverIO(Protocol):
    """The world a loop acts in; every callback it is handed it calls at most once, later,
    never inside the call that handed it over (the loop is not re-entered)."""

    @property
    def running(self) -> bool:
        """False once the node stopped or failed: nothing more is stepped."""
        ...

    def now(self) -> int:
        """The time in ms, as the core is handed it."""
        ...

    def stepping(self) -> AbstractContextManager[Any]:
        """Around each step: what a failing step does (a node fails, the simulator reports)."""
        ...

    def send(self, send: Send) -> None:
        """A request to a peer; its answer or failure is a later step of this loop."""
        ...

    def reply(self, reply: Reply) -> None:
        """The answer to a request the core was handed."""
        ...

    def flush(self, done: Callable[[], None]) -> None:
        """Makes every append so far durable, then calls `done` (not at all if that failed)."""
        ...

    def write_snapshot(self, job: Any, done: Callable[[BaseException | None], None]) -> None:
        """Writes a state machine's snapshot job, then calls `done` with its error or None."""
        ...

    def call_at(self, deadline: int, callback: Callable[[], None]) -> int:
        """Arms the one timer (replacing the armed one) to call back by `deadline`; returns
        when it will come, on `now`'s clock (sooner is allowed: the loop arms again)."""
        ...


class Driver(Generic[Job]):
    """One Raft core, its state machine and its IO, stepped in one order (see the module)."""

    def __init__(self, core: RaftCore, machine: StateMachine[Job], io: DriverIO) -> None:
        self.core = core
        self.machine = machine
        self.io = io
        self.step_listeners: list[Callable[[RaftCore], None]] = []
        self._flushing = False
        self._armed: int | None = None  # when the armed timer comes

    def step(self, action: Callable[[RaftCore, int], T]) -> T | None:
        """One event into the core, then what it asks for; returns the action's result, or
        None if nothing was stepped (the IO stopped, or `stepping` swallowed a failure)."""
        io = self.io
        if not io.running:
            return None
        result = None
        with io.stepping():
            result = action(self.core, io.now())
            self._after_step()
        return result

    def start(self) -> None:
        self.step(lambda core, now: core.tick(now))

    @property
    def flushing(self) -> bool:
        """An fsync asked of the IO is under way (the core hears of it when it is done)."""
        return self._flushing

    def _after_step(self) -> None:
        core, io, machine = self.core, self.io, self.machine
        for message in core.poll_outbox():
            if isinstance(message, Send):
                io.send(message)
            else:
                io.reply(message)
        if core.wants_flush and not self._flushing:
            self._flushing = True
            io.flush(self._flushed)
        now = io.now()
        machine.poll(now)
        job = machine.start_snapshot(now)
        if job is not None:
            io.write_snapshot(job, lambda error: self._snapshot_written(job, error))
        for listener in self.step_listeners:
            listener(core)
        self._arm(now)

    # ---------------------------------------------------------------- the disk

    def _flushed(self) -> None:
        self._flushing = False
        self.step(lambda core, now: core.handle_flush(now))  # and another fsync if appends came meanwhile

    def _snapshot_written(self, job: Job, error: BaseException | None) -> None:
        self.machine.finish_snapshot(job, error)
        if error is None:
            self.step(lambda core, now: core.tick(now))  # the core sees the snapshot: the log may start later

    # ---------------------------------------------------------------- time

    def deadline(self, now: int) -> int:
        """When the core or the state machine next has something to do."""
        machine = self.machine.next_deadline(now)
        core = self.core.next_deadline()
        return core if machine is None else min(core, machine)

    def _arm(self, now: int) -> None:
        due = self.deadline(now)
        if self._armed is not None and self._armed <= due:
            return  # an earlier timer is armed; it looks again when it comes
        self._armed = self.io.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._armed = None
        io = self.io
        if not io.running:
            return
        now = io.now()
        if self.deadline(now) <= now:
            self.step(lambda core, now: core.tick(now))
        else:
            self._arm(now)  # came early (a capped timer, or clocks that disagree by a little)
