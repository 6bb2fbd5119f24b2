"""Stopping asyncio tasks for good.

On Python 3.11, `asyncio.wait_for` can swallow a cancellation that arrives just as the
awaitable it wraps completes (CPython gh-86296, fixed in 3.12): the task goes on as if it
had never been cancelled. A stop that cancels a task once and then awaits it can so wait
for ever. A node hit this while stopping mid-request: its broker loop, inside a request's
wait_for, went on heartbeating until the node was SIGKILLed 15 s later, and the graceful
handover never happened.
"""

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task], retry_s: float = 0.05) -> None:
    """Cancels the tasks and returns once every one has ended, cancelling again, every
    `retry_s`, any that swallowed its cancellation. What the tasks raised is retrieved and
    dropped, as `gather(..., return_exceptions=True)` would: they are being stopped."""
    tasks = list(tasks)
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=retry_s)
    for task in tasks:
        if not task.cancelled():
            task.exception()
