"""The protocol's side of asyncio's write flow control, shared by the server's connections
and the client connection: a transport above its high-water mark pauses writing, and
`drain()` waits until it resumes (asyncio's streams do this for a StreamWriter; a bare
protocol has to do it itself)."""

import asyncio


class WriteFlow:
    def __init__(self) -> None:
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future] = []

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writers(None)

    def _wake_writers(self, error: BaseException | None) -> None:
        """Ends every drain() under way, with `error` if the connection is gone."""
        for waiter in self._drain_waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)
        self._drain_waiters.clear()

    async def drain(self) -> None:
        """Waits while the transport's write buffer is above its high-water mark."""
        if self._write_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
