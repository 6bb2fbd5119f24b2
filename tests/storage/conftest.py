import pytest

from kraft.records import SimpleRecord, build_batch
from kraft.storage import FileLog, MemoryLog


class LogFactory:
    """Opens a log of one kind and reopens it as a restart would (after a clean flush)."""

    def __init__(self, kind: str, tmp_path) -> None:
        self.kind = kind
        self.path = tmp_path / "__cluster_metadata-0"
        self.memory: MemoryLog | None = None

    def open(self, **kw):
        if self.kind == "file":
            return FileLog(self.path, **kw)
        self.memory = self.memory or MemoryLog(**{k: v for k, v in kw.items() if k == "max_batch_bytes"})
        return self.memory

    def reopen(self, log):
        if self.kind == "file":
            log.close()
            return FileLog(self.path)
        log.simulate_crash()
        log.recover()
        return log


@pytest.fixture(params=["file", "memory"])
def logs(request, tmp_path):
    return LogFactory(request.param, tmp_path)


def batch(n: int = 3, value: bytes = b"v", epoch: int = 0, base_offset: int = 0) -> bytes:
    return build_batch([SimpleRecord(None, value + b"%d" % i) for i in range(n)],
                       base_offset=base_offset, partition_leader_epoch=epoch)
