import asyncio
import threading

import pytest

from kraft.protocol import KafkaServer


class ServerThread:
    """A KafkaServer on its own event loop thread, so blocking clients can talk to it."""

    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        self.host, self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(5)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def make_server():
    started = []

    def make(server: KafkaServer | None = None) -> ServerThread:
        t = ServerThread(server or KafkaServer(max_frame_bytes=1 << 20)).__enter__()
        started.append(t)
        return t

    yield make
    for t in started:
        t.__exit__(None, None, None)
