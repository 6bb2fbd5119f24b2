"""A PySyncObj node for the cluster benchmark: the baseline for cluster_node.py.

    python bench/syncobj_node.py SELF_ADDRESS PARTNER_ADDRESS...

A SyncObj with PySyncObj's defaults (SyncObjConf(): no journal, so nothing is fsynced)
holding one register, and the same commands on stdin as cluster_node.py. An operation is
one call of the replicated `set` with a 100-byte argument and a callback, made in the
leader's process; it completes when PySyncObj calls back (the entry is committed and
applied).
"""

import sys
import threading
import time

from cluster_load import RECORD_BYTES, VALUE_POOL, Window, serve
from pysyncobj import FAIL_REASON, SyncObj, replicated

VALUES = [b"%0*d" % (RECORD_BYTES, i) for i in range(VALUE_POOL)]


class Register(SyncObj):
    def __init__(self, address: str, partners: list[str]) -> None:
        super().__init__(address, partners)
        self.value = b""

    @replicated
    def set(self, value: bytes) -> None:
        self.value = value


class Load:
    """Keeps a window's calls in flight: each callback starts the next call.

    Callbacks run on PySyncObj's tick thread; the first `in_flight` calls are made from the
    command thread, as a client thread would.
    """

    def __init__(self, register: Register) -> None:
        self.register = register
        self.window: Window | None = None
        self.sequence = 0
        self._lock = threading.Lock()

    def run(self, window: Window) -> dict:
        self.window = window
        for _ in range(window.in_flight):
            self._call()
        return window.wait()

    def _call(self) -> None:
        window = self.window
        assert window is not None
        with self._lock:
            self.sequence += 1
            value = VALUES[self.sequence % VALUE_POOL]
        window.begin()
        started = time.perf_counter()
        self.register.set(value, callback=lambda _, error: self._done(window, started, error))

    def _done(self, window: Window, started: float, error: int) -> None:
        now = time.perf_counter()
        if error != FAIL_REASON.SUCCESS:
            window.fail(f"PySyncObj failed a call: reason {error}")
        elif window.complete(started, now):
            self._call()


def main() -> None:
    register = Register(sys.argv[1], sys.argv[2:])
    load = Load(register)
    serve({
        "role": lambda _: {"leader": register._isLeader() and register.isReady()},
        "load": lambda command: load.run(Window(command["in_flight"], command["seconds"])),
    })
    register.destroy()


if __name__ == "__main__":
    main()
