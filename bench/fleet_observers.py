"""Light observers for the fleet benchmark: many Kafka-protocol fetchers in one process.

    python bench/fleet_observers.py

Each observer is a TCP connection of its own to the leader's controller listener and a
replica id of its own, and does what a broker's metadata fetcher does on the wire: it
long-polls Fetch v17 (ReplicaState with its id and no broker epoch, 500 ms max wait and 8 MiB,
as Kafka's KafkaRaftClient sends it) from its log end, moves its fetch position past the
batches it is sent, to the end offset a DivergingEpoch names, or past the snapshot a
SnapshotId names (it takes the snapshot as read: a light observer keeps no state, so a
fleet of them can sit at the end of a million-partition log), and notes when its high
watermark moves. It writes and decodes nothing else, so a thousand of them cost a few
processes little next to the leader they poll.

The request is Kafka's bytes as kio encodes them from Fetch v17's schema, made once per
observer with sentinel values whose positions are then patched in place. The answer is read
by hand (the fields a fetcher needs, Fetch v17's layout: flexible versions, tagged
DivergingEpoch, CurrentLeader and SnapshotId); every CHECK_EVERY-th answer is also decoded by
kio, and a disagreement stops the run, so the hand reader is checked against Kafka's schema
as it runs.

Commands on stdin, one JSON object a line, each answered on stdout (cluster_load.serve):

    {"cmd": "connect", "port": P, "ids": [...], "epoch": E, "cluster_id": C} -> {"connected": n}
    {"cmd": "reached", "offset": X, "timeout": S} -> {"behind": k}  (observers whose HW < X)
    {"cmd": "learned", "offsets": [...]}          -> {"times": [[t per observer], ...]}
    {"cmd": "stats"}                               -> answers, bytes, failures, cpu seconds
    {"cmd": "close"}                               -> {"closed": n}

Times are time.monotonic() (CLOCK_MONOTONIC, the same clock in every process of the machine).
"""

import asyncio
import bisect
import os
import struct
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from cluster_load import serve

from kraft.protocol.codec import decode_response, encode_request, request_class, response_class

FETCH, VERSION = 1, 17
MAX_WAIT_MS = 500  # KafkaRaftClient.MAX_FETCH_WAIT_MS
MAX_BYTES = 8 * 1024 * 1024  # KafkaRaftClient.MAX_FETCH_SIZE_BYTES
CHECK_EVERY = 97  # every so many answers of this process are decoded by kio too
METADATA_TOPIC_ID = uuid.UUID(int=1)

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_BATCH_HEAD = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_LAST_OFFSET_DELTA_AT = 23  # in a batch: base(8) length(4) epoch(4) magic(1) crc(4) attributes(2)
_OFFSET_SENTINEL, _EPOCH_SENTINEL, _CORRELATION_SENTINEL = 0x0123456789ABCDEF, 0x1234ABCD, 0x5EC0FFEE


class FetchAnswer:
    """What a fetcher reads from a Fetch v17 response of one partition."""

    __slots__ = ("correlation_id", "top_error", "error", "high_watermark", "records", "diverging", "leader",
                 "snapshot")

    def __init__(self) -> None:
        self.correlation_id = self.top_error = self.error = 0
        self.high_watermark = -1
        self.records: memoryview | None = None
        self.diverging: tuple[int, int] | None = None  # (end offset, epoch)
        self.leader: tuple[int, int] | None = None  # (leader id, epoch)
        self.snapshot: tuple[int, int] | None = None  # (end offset, epoch)


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def read_answer(frame: memoryview) -> FetchAnswer:
    """A Fetch v17 response frame (after its size) naming one partition, read by hand."""
    answer = FetchAnswer()
    (answer.correlation_id,) = _I32.unpack_from(frame, 0)
    pos = _skip_tags(frame, 4)  # response header v1
    (answer.top_error,) = _I16.unpack_from(frame, pos + 4)
    pos += 10  # throttle, error, session id
    topics, pos = _uvarint(frame, pos)
    if topics != 2:  # a compact array of one
        if answer.top_error:
            return answer
        raise ValueError(f"a Fetch answer naming {topics - 1} topics")
    pos += 16  # topic id
    partitions, pos = _uvarint(frame, pos)
    if partitions != 2:
        raise ValueError(f"a Fetch answer naming {partitions - 1} partitions")
    (answer.error,) = _I16.unpack_from(frame, pos + 4)
    (answer.high_watermark,) = _I64.unpack_from(frame, pos + 6)
    pos += 30  # index, error, high watermark, last stable offset, log start offset
    aborted, pos = _uvarint(frame, pos)
    for _ in range(max(aborted - 1, 0)):
        pos = _skip_tags(frame, pos + 16)
    pos += 4  # preferred read replica
    size, pos = _uvarint(frame, pos)
    if size > 1:
        answer.records = frame[pos : pos + size - 1]
        pos += size - 1
    tags, pos = _uvarint(frame, pos)
    for _ in range(tags):
        tag, pos = _uvarint(frame, pos)
        length, pos = _uvarint(frame, pos)
        if tag == 0:
            epoch, end = _I32.unpack_from(frame, pos)[0], _I64.unpack_from(frame, pos + 4)[0]
            answer.diverging = (end, epoch)
        elif tag == 1:
            answer.leader = (_I32.unpack_from(frame, pos)[0], _I32.unpack_from(frame, pos + 4)[0])
        elif tag == 2:
            answer.snapshot = (_I64.unpack_from(frame, pos)[0], _I32.unpack_from(frame, pos + 8)[0])
        pos += length
    return answer


def _skip_tags(buf: memoryview, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        length, pos = _uvarint(buf, pos)
        pos += length
    return pos


def check_with_kio(frame: memoryview, answer: FetchAnswer) -> None:
    """Decodes `frame` with kio (Kafka's schema) and stops the run if the hand reader disagrees."""
    correlation_id, response = decode_response(frame, response_class(FETCH, VERSION), zero_copy=True)
    p = response.responses[0].partitions[0] if response.responses else None
    expected = (correlation_id, response.error_code, p and p.error_code, p and p.high_watermark,
                p and p.records is not None and len(p.records) and bytes(p.records))
    records = answer.records
    found = (answer.correlation_id, answer.top_error, p and answer.error, p and answer.high_watermark,
             p and records is not None and len(records) and bytes(records))
    if p is not None:
        tagged = {"diverging": (p.diverging_epoch.end_offset, p.diverging_epoch.epoch),
                  "leader": (p.current_leader.leader_id, p.current_leader.leader_epoch),
                  "snapshot": (p.snapshot_id.end_offset, p.snapshot_id.epoch)}
        defaults = {"diverging": (-1, -1), "leader": (-1, -1), "snapshot": (-1, -1)}
        for name, value in tagged.items():
            mine = getattr(answer, name)
            if (mine or defaults[name]) != value:
                raise AssertionError(f"the hand reader read {name} {mine}, kio {value}")
    if expected != found:
        raise AssertionError(f"the hand reader read {found[:4]}, kio {expected[:4]}")


class RequestTemplate:
    """One observer's Fetch v17 request as kio encodes it, with the fields that change
    (correlation id, fetch offset, last fetched epoch) patched in place per request."""

    def __init__(self, replica_id: int, epoch: int, cluster_id: str | None) -> None:
        cls = request_class(FETCH, VERSION)
        module = __import__(cls.__module__, fromlist=["FetchPartition"])
        request = cls(
            cluster_id=cluster_id,
            replica_state=module.ReplicaState(replica_id=replica_id, replica_epoch=-1),
            max_wait=timedelta(milliseconds=MAX_WAIT_MS), min_bytes=1, max_bytes=MAX_BYTES, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=(module.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(module.FetchPartition(
                partition=0, current_leader_epoch=epoch, fetch_offset=_OFFSET_SENTINEL,
                last_fetched_epoch=_EPOCH_SENTINEL, log_start_offset=-1, partition_max_bytes=MAX_BYTES,
            ),)),),
            forgotten_topics_data=(), rack_id="",
        )
        self.frame = bytearray(encode_request(request, _CORRELATION_SENTINEL, f"fleet-observer-{replica_id}"))
        self._correlation = self._position(_I32.pack(_CORRELATION_SENTINEL))
        self._offset = self._position(_I64.pack(_OFFSET_SENTINEL))
        self._epoch = self._position(_I32.pack(_EPOCH_SENTINEL))

    def _position(self, sentinel: bytes) -> int:
        at = self.frame.find(sentinel)
        assert at > 0 and self.frame.find(sentinel, at + 1) < 0, "a sentinel must appear exactly once"
        return at

    def request(self, correlation_id: int, fetch_offset: int, last_fetched_epoch: int) -> bytes:
        frame = self.frame
        _I32.pack_into(frame, self._correlation, correlation_id)
        _I64.pack_into(frame, self._offset, fetch_offset)
        _I32.pack_into(frame, self._epoch, last_fetched_epoch)
        return bytes(frame)


class Fleet:
    """The observers of this process and what they have seen."""

    def __init__(self) -> None:
        self.observers: list[Observer] = []
        self.answers = 0
        self.bytes = 0
        self.failures: list[str] = []
        self.first_answers = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    def failed(self, observer: "Observer", why: str) -> None:
        if len(self.failures) < 20:
            self.failures.append(f"observer {observer.replica_id}: {why}")


class Observer(asyncio.Protocol):
    def __init__(self, fleet: Fleet, replica_id: int, epoch: int, cluster_id: str | None) -> None:
        self.fleet = fleet
        self.replica_id = replica_id
        self.template = RequestTemplate(replica_id, epoch, cluster_id)
        self.offset, self.last_epoch = 0, 0
        self.high_watermark = -1
        self.changes: list[tuple[int, float]] = []  # (high watermark, when it was learned), in order
        self.correlation = 0
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.answered = asyncio.get_running_loop().create_future()  # its first answer

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.fetch()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.answered.done():
            self.answered.set_result(False)

    def fetch(self) -> None:
        if self.transport is not None:
            self.correlation += 1
            self.transport.write(self.template.request(self.correlation, self.offset, self.last_epoch))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while len(buffer) >= 4:
            (size,) = _I32.unpack_from(buffer, 0)
            if len(buffer) < 4 + size:
                return
            frame = memoryview(bytes(buffer[4 : 4 + size]))
            del buffer[: 4 + size]
            self.answer(frame)

    def answer(self, frame: memoryview) -> None:
        fleet = self.fleet
        now = time.monotonic()
        fleet.answers += 1
        fleet.bytes += len(frame) + 4
        try:
            answer = read_answer(frame)
            if fleet.answers % CHECK_EVERY == 0:
                check_with_kio(frame, answer)
        except Exception as e:  # a bug in the hand reader, or a broken answer: either stops this observer
            fleet.failed(self, f"unreadable answer: {e!r}")
            self.close()
            return
        if not self.answered.done():
            self.answered.set_result(True)
        if answer.top_error or answer.error:
            fleet.failed(self, f"error {answer.top_error or answer.error} (leader {answer.leader})")
            self.close()
            return
        if answer.diverging is not None and answer.diverging[0] >= 0:
            self.offset, self.last_epoch = answer.diverging
        elif answer.snapshot is not None and answer.snapshot[0] >= 0:
            self.offset, self.last_epoch = answer.snapshot
        elif answer.records is not None:
            self._past(answer.records)
        if answer.high_watermark > self.high_watermark:
            self.high_watermark = answer.high_watermark
            self.changes.append((answer.high_watermark, now))
        self.fetch()

    def _past(self, records: memoryview) -> None:
        """Moves the fetch position past the whole batches in `records`."""
        pos, end = 0, len(records)
        while end - pos >= _LAST_OFFSET_DELTA_AT + 4:
            base, length, epoch = _BATCH_HEAD.unpack_from(records, pos)
            if pos + 12 + length > end:
                break  # a partial batch at the end of a size-capped answer
            (delta,) = _I32.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)
            self.offset, self.last_epoch = base + delta + 1, epoch
            pos += 12 + length

    def learned(self, offset: int) -> float | None:
        """When this observer learned that `offset` is committed (its high watermark passed it)."""
        at = bisect.bisect_right(self.changes, (offset, float("inf")))
        return self.changes[at][1] if at < len(self.changes) else None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(fleet: Fleet, port: int, ids: list[int], epoch: int, cluster_id: str | None,
                  wait: bool = True) -> int:
    """Connects an observer per id; with `wait`, the number answered, else the number connected."""
    loop = asyncio.get_running_loop()
    for replica_id in ids:
        observer = Observer(fleet, replica_id, epoch, cluster_id)
        await loop.create_connection(lambda o=observer: o, "127.0.0.1", port)
        fleet.observers.append(observer)
    if not wait:
        return len(ids)
    answered = await asyncio.gather(*(o.answered for o in fleet.observers[-len(ids):]))
    return sum(answered)


async def reached(fleet: Fleet, offset: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        behind = sum(1 for o in fleet.observers if o.high_watermark < offset)
        if not behind or time.monotonic() > deadline:
            return behind
        await asyncio.sleep(0.05)


def main() -> None:
    fleet = Fleet()
    loop = asyncio.new_event_loop()
    fleet.loop = loop
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def on_loop(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    async def call(fn: Any) -> Any:
        return fn()

    def do_connect(c: dict) -> dict:
        return {"connected": on_loop(connect(fleet, c["port"], c["ids"], c["epoch"], c.get("cluster_id"),
                                              c.get("wait", True)))}

    def do_reached(c: dict) -> dict:
        return {"behind": on_loop(reached(fleet, c["offset"], c["timeout"]))}

    def do_learned(c: dict) -> dict:
        return {"times": on_loop(call(lambda: [[o.learned(x) for o in fleet.observers] for x in c["offsets"]]))}

    def do_stats(_: dict) -> dict:
        cpu = os.times()
        return on_loop(call(lambda: {
            "answers": fleet.answers, "bytes": fleet.bytes, "failures": fleet.failures,
            "open": sum(1 for o in fleet.observers if o.transport is not None),
            "cpu_s": cpu.user + cpu.system,
        }))

    def do_close(_: dict) -> dict:
        def close_all() -> int:
            for o in fleet.observers:
                o.close()
            return len(fleet.observers)
        return {"closed": on_loop(call(close_all))}

    serve({"connect": do_connect, "reached": do_reached, "learned": do_learned, "stats": do_stats,
           "close": do_close})


if __name__ == "__main__":
    main()
