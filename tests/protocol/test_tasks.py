"""cancel_and_wait stops tasks that one cancel does not stop.

Python 3.11's asyncio.wait_for returns its result instead of raising when a cancellation
arrives just after the awaited future completed (gh-86296); a loop of requests, like a
broker's heartbeats, then goes on. A naive cancel-then-gather waits for it for ever: each
test below bounds the stop at 2 s, so that implementation fails them.
"""

import asyncio

from kraft.protocol.tasks import cancel_and_wait


def test_a_loop_whose_wait_for_swallowed_the_cancel_is_stopped():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        answers: list[asyncio.Future] = []

        async def requests() -> None:
            while True:
                answers.append(loop.create_future())
                await asyncio.wait_for(answers[-1], timeout=5)

        task = asyncio.create_task(requests())
        await asyncio.sleep(0)
        answers[-1].set_result(None)  # the answer lands as the stop begins
        await asyncio.wait_for(cancel_and_wait([task]), 2)
        assert task.cancelled()

    asyncio.run(main())


def test_tasks_that_ignore_cancels_a_few_times_are_all_stopped_and_failures_are_retrieved():
    async def main() -> None:
        async def stubborn(times: int) -> None:
            for _ in range(times):
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    pass
            await asyncio.sleep(10)

        async def failing() -> None:
            raise ValueError("already failed")

        tasks = [asyncio.create_task(stubborn(n)) for n in (0, 1, 3)] + [asyncio.create_task(failing())]
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(tasks), 2)
        assert [t.cancelled() for t in tasks] == [True, True, True, False]
        assert isinstance(tasks[-1].exception(), ValueError)

    asyncio.run(main())
