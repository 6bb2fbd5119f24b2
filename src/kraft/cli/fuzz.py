"""`kraft fuzz` (behind `make fuzz`): hostile bytes against a real node, checked for crashes,
lost service, memory growth and log volume.

A single-voter node runs as its own process, as `kraft cluster up` runs nodes. Several
connections on each of its two listeners (controller and client) send, one input at a
time: valid requests; valid requests with mutated bodies (bits flipped, edge bytes,
counts and lengths of 2^32-2 written over or into them, cuts, repeated spans, trailing
bytes); valid headers with random bodies; unknown API keys and versions; truncated
frames; huge size prefixes; random bytes; for every API key and version the listener
says it serves (ApiVersions). After an input that forms a whole frame the sender waits
for an answer or the close (a bad request closes its connection, as Kafka closes it);
after one that leaves the node waiting for more bytes it closes the connection itself.
Every input comes from a seed (`--seed`), per connection, so a run's inputs can be made
again; the last inputs of each connection are written out if the node dies.

Meanwhile a well-behaved client checks, once a second, that the node serves: ApiVersions,
Metadata and DescribeQuorum on the client listener, and a CreateTopics that must commit.
The node's resident memory (VmRSS) is sampled throughout.

The run fails (exit 1) if the node dies, if a service check fails, if the node's memory
grows by more than RSS_GROWTH_BOUND, or if its log grows by more than LOG_GROWTH_BOUND.
Both bounds are far above what a correct node needs and far below what a per-input leak
would cost: a node may hold at most a few KiB per connection of the fuzzer's requests (it
never sends a whole large frame), so what it holds after a million inputs is what it
held before, plus the topics the checks created; a leak of 100 bytes per input would
show as 100 MB. Log lines about bad clients are throttled to a line plus a summary every
10 s per kind per listener, a few kB a minute; unthrottled, a run wrote one line each.

`--codec` runs the decoders alone, in this process: random messages of every request
and response class kio has, mutated, through decode_request and decode_response. A
decoder that aborts kills the process, so tests run it in a child (tests/protocol).
"""

import asyncio
import random
import shutil
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.static.primitive import i32
from kio.static.protocol import RequestPayload, ResponsePayload

from kraft.cli.cluster_client import UNREACHABLE, create_topic, request
from kraft.cli.demo import wait
from kraft.cli.fuzz_inputs import Hints, Input, InputMaker, mutate, random_entity
from kraft.cli.local_cluster import LocalCluster
from kraft.protocol import ErrorCode, ProtocolError
from kraft.protocol.build import build_request
from kraft.protocol.codec import decode, decode_request, decode_response, encode, encode_request
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from kraft.protocol.shape import checked_end
from kraft.raft import messages as m

RSS_GROWTH_BOUND = 64 * 1024 * 1024
LOG_GROWTH_BOUND = 2 * 1024 * 1024
REACTION_TIMEOUT_S = (
    0.25  # a whole frame neither answered nor closed by then: counted, connection closed
)
CHECK_EVERY_S = 1.0
CHECK_TIMEOUT_S = 10.0
RECENT = 64  # inputs kept per connection, written out if the node dies
# BrokerRegistration with the right cluster id registers a broker, legitimately (as Kafka
# would for any client): rarely, so that the node's state, and so its memory, stays near
# what the checks measure, while the handler is still reached.
HINT_RATES = {62: 0.05}
_SIZE = struct.Struct(">i")


@dataclass
class Tally:
    sent: Counter = field(default_factory=Counter)  # by kind
    listeners: Counter = field(default_factory=Counter)
    answered: int = 0
    closed: int = 0
    unanswered: int = 0


@dataclass
class Service:
    """The well-behaved client's checks and what failed."""

    checks: int = 0
    failures: list[str] = field(default_factory=list)


def rss(pid: int) -> int:
    """The process's resident memory in bytes (VmRSS), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _api_versions_request() -> Any:
    return build_request(
        18, 3, {"client_software_name": "kraft-fuzz", "client_software_version": "1"}
    )


def check_service(port: int, n: int) -> str | None:
    """One round of the well-behaved client; None if the node served it, else what failed."""
    try:
        versions = asyncio.run(request(port, _api_versions_request(), CHECK_TIMEOUT_S))
        if versions.error_code != ErrorCode.none:
            return f"ApiVersions answered {versions.error_code.name}"
        metadata = asyncio.run(
            request(
                port,
                build_request(
                    3,
                    12,
                    {
                        "topics": None,
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                ),
                CHECK_TIMEOUT_S,
            )
        )
        if not metadata.brokers:
            return "Metadata lists no broker"
        quorum = asyncio.run(request(port, m.describe_quorum_request(), CHECK_TIMEOUT_S))
        partition = quorum.topics[0].partitions[0]
        if partition.error_code != ErrorCode.none or partition.leader_id != 1:
            return (
                f"DescribeQuorum answered {partition.error_code.name}, leader {partition.leader_id}"
            )
        created = create_topic(
            port, f"fuzz-check-{n}", timeout_ms=int(CHECK_TIMEOUT_S * 1000), retry_s=CHECK_TIMEOUT_S
        )
        if created.error_code != ErrorCode.none:
            return f"CreateTopics fuzz-check-{n} answered {created.error_code.name}"
    except (*UNREACHABLE, TimeoutError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def served_apis(port: int) -> list[tuple[int, int, int]]:
    response = asyncio.run(request(port, _api_versions_request(), CHECK_TIMEOUT_S))
    return [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]


def hints_for(cluster: LocalCluster) -> Hints:
    """Values the node takes seriously, so that mutated requests get past the first check."""
    ids = [-1, 0, 1, 2]
    epochs = [0, 1, 2, 3, 2**31 - 1]
    names = [m.METADATA_TOPIC, "fuzz-check-1", "fuzz-made"]
    return {
        "cluster_id": [cluster.cluster_id],
        "topic_id": [m.METADATA_TOPIC_ID],
        "topic_name": names,
        "name": names,
        "topic": names,
        "partition": [0],
        "partition_index": [0],
        "replica_id": ids,
        "leader_id": ids,
        "voter_id": ids,
        "candidate_id": ids,
        "broker_id": ids,
        "node_id": ids,
        "leader_epoch": epochs,
        "candidate_epoch": epochs,
        "last_fetched_epoch": epochs,
        "current_leader_epoch": epochs,
        "last_offset_epoch": epochs,
        "fetch_offset": [0, 1, 10],
        "max_wait": [timedelta(0), timedelta(milliseconds=100)],
    }


class Fuzzer:
    def __init__(self, cluster: LocalCluster, inputs: int, seed: int, connections: int) -> None:
        self.cluster = cluster
        self.node = cluster.nodes[1]
        self.inputs = inputs
        self.seed = seed
        self.connections = connections
        self.tally = Tally()
        self.service = Service()
        self.rss_max = 0
        self.died = False
        self.recent: list[deque[tuple[str, Input]]] = []
        self._left = inputs
        self._stop = threading.Event()

    def run(self) -> None:
        hints = hints_for(self.cluster)
        listeners = {"client": self.node.client_port, "controller": self.node.controller_port}
        apis = {name: served_apis(port) for name, port in listeners.items()}
        watchers = [
            threading.Thread(target=self._watch_memory, daemon=True),
            threading.Thread(target=self._check_service, daemon=True),
        ]
        for w in watchers:
            w.start()
        try:
            asyncio.run(self._fuzz(listeners, apis, hints))
        finally:
            self._stop.set()
            for w in watchers:
                w.join()

    async def _fuzz(self, listeners: dict[str, int], apis: dict[str, list], hints: Hints) -> None:
        workers = []
        for i in range(self.connections):
            name = ("client", "controller")[i % 2]
            rng = random.Random(f"{self.seed}/{i}")
            maker = InputMaker(rng, apis[name], hints, DEFAULT_MAX_FRAME_BYTES, HINT_RATES)
            recent: deque[tuple[str, Input]] = deque(maxlen=RECENT)
            self.recent.append(recent)
            workers.append(self._worker(name, listeners[name], maker, recent))
        await asyncio.gather(*workers)

    async def _worker(self, listener: str, port: int, maker: InputMaker, recent: deque) -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while self._left > 0 and not self._stop.is_set():
            if writer is None:
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    if not self.node.running:
                        self._died()
                    await asyncio.sleep(0.05)
                    continue
                if self._left <= 0:  # others took the rest while this one connected
                    break
            assert reader is not None
            self._left -= 1
            sent = maker.next()
            recent.append((listener, sent))
            self.tally.sent[sent.kind] += 1
            self.tally.listeners[listener] += 1
            keep = False
            try:
                writer.write(sent.data)
                await writer.drain()
                keep = sent.complete and await self._reaction(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.tally.closed += 1
            if not keep:
                if maker.rng.random() < 0.5:
                    writer.transport.abort()  # a reset
                else:
                    writer.close()  # a FIN
                writer = None
            if self._left % 1000 == 0 and not self.node.running:
                self._died()
        if writer is not None:
            writer.close()

    async def _reaction(self, reader: asyncio.StreamReader) -> bool:
        """Whether the node answered the frame (True) or closed the connection."""
        try:
            (size,) = _SIZE.unpack(
                await asyncio.wait_for(reader.readexactly(4), REACTION_TIMEOUT_S)
            )
            await asyncio.wait_for(reader.readexactly(size), REACTION_TIMEOUT_S)
        except TimeoutError:
            self.tally.unanswered += 1
            return False
        self.tally.answered += 1
        return True

    def _died(self) -> None:
        self.died = True
        self._stop.set()

    def _watch_memory(self) -> None:
        pid = self.node.started().pid
        while not self._stop.wait(0.2):
            self.rss_max = max(self.rss_max, rss(pid))
            if not self.node.running:
                self._died()

    def _check_service(self) -> None:
        while not self._stop.wait(CHECK_EVERY_S):
            self.service.checks += 1
            failure = check_service(self.node.client_port, self.service.checks)
            if failure is not None and not self._stop.is_set():
                self.service.failures.append(f"check {self.service.checks}: {failure}")

    def save_recent(self, path: Path) -> None:
        """The last inputs of every connection, oldest first, as listener, kind and hex."""
        with path.open("w") as out:
            for i, recent in enumerate(self.recent):
                for listener, sent in recent:
                    out.write(f"connection {i} {listener} {sent.kind} {sent.data.hex()}\n")


def report(fuzzer: Fuzzer, took: float, alive: bool, status: int | None) -> None:
    """What was sent, how the node took it, whether it lived and served throughout."""
    tally = fuzzer.tally
    sent = sum(tally.sent.values())
    print(f"inputs sent: {sent} in {took:.0f} s ({sent / took:,.0f}/s); "
          f"by kind: {dict(tally.sent)}; by listener: {dict(tally.listeners)}")
    print(f"the node answered {tally.answered}, closed the connection after {tally.closed}, "
          f"left {tally.unanswered} unanswered for {REACTION_TIMEOUT_S} s")
    print(f"crashes: {0 if alive else 1}" + ("" if alive else f" (exit status {status})"))
    print(f"service checks: {fuzzer.service.checks}, failed: {len(fuzzer.service.failures)}")
    for failure in fuzzer.service.failures[:10]:
        print(f"  {failure}")


def run(directory: Path, inputs: int, seed: int, connections: int) -> int:
    shutil.rmtree(directory, ignore_errors=True)
    cluster = LocalCluster(directory, voters=1, observers=0)
    print(
        f"fuzz: {inputs} inputs, seed {seed}, {connections} connections, node in {directory}",
        flush=True,
    )
    cluster.start()
    node = cluster.nodes[1]
    started = time.monotonic()
    try:
        wait("the node to serve", lambda: check_service(node.client_port, 0) is None, timeout=60)
        fuzzer = Fuzzer(cluster, inputs, seed, connections)
        rss_start, log_start = rss(node.started().pid), node.log_path.stat().st_size
        fuzzer.rss_max = rss_start
        began = time.monotonic()
        fuzzer.run()
        took = time.monotonic() - began
        final = None if fuzzer.died else check_service(node.client_port, fuzzer.service.checks + 1)
        rss_end, log_end = rss(node.started().pid), node.log_path.stat().st_size
        alive = node.running
    finally:
        cluster.stop()
    if final is not None:
        fuzzer.service.failures.append(f"after the run: {final}")
    report(fuzzer, took, alive, node.started().returncode)
    mib = 1024 * 1024
    print(f"node RSS: start {rss_start / mib:.1f} MiB, end {rss_end / mib:.1f} MiB, "
          f"max {fuzzer.rss_max / mib:.1f} MiB (bound: start + {RSS_GROWTH_BOUND / mib:.0f} MiB)")
    print(f"node log: {log_end / 1024:.0f} KiB, {(log_end - log_start) / 1024:.0f} KiB written "
          f"during the run (bound {LOG_GROWTH_BOUND / 1024:.0f} KiB), {node.log_path}")
    problems = []
    if not alive:
        crash_inputs = directory / "crash-inputs.txt"
        fuzzer.save_recent(crash_inputs)
        problems.append(f"the node died; the last inputs of each connection are in {crash_inputs}")
    if fuzzer.service.failures:
        problems.append("service failed")
    if fuzzer.rss_max - rss_start > RSS_GROWTH_BOUND:
        problems.append("memory grew beyond the bound")
    if log_end - log_start > LOG_GROWTH_BOUND:
        problems.append("the log grew beyond the bound")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print(f"passed in {time.monotonic() - started:.0f} s")
    return 0


# ---------------------------------------------------------------- the decoders alone


# A message class with its kind, so that checking the kind tells mypy which it is.
MessageClass = tuple[Literal["request"], type[RequestPayload]] | tuple[Literal["response"], type[ResponsePayload]]
_Schema = TypeVar("_Schema")


def message_classes() -> list[MessageClass]:
    """("request" or "response", class) for every message kio has."""
    found: list[MessageClass] = []
    for key in sorted(api_key_map):
        for version in range(64):
            if (request := _schema(load_request_schema, key, version)) is not None:
                found.append(("request", request))
            if (response := _schema(load_response_schema, key, version)) is not None:
                found.append(("response", response))
    return found


def _schema(load: Callable[[int, int], _Schema], key: int, version: int) -> _Schema | None:
    try:
        return load(key, version)
    except KioIndexError:
        return None


def run_codec(inputs: int, seed: int) -> int:
    """Mutated frames of every message class through the decoders, eight mutations of each
    random message. Anything but a ProtocolError is a bug, and so is a frame the shape
    check passes that the reader then reads to another end."""
    rng = random.Random(seed)
    classes = message_classes()
    outcomes: Counter = Counter()
    bugs: list[str] = []
    done = 0
    while done < inputs:
        message = rng.choice(classes)
        cls = message[1]
        entity = random_entity(cls, rng)
        correlation_id = rng.randint(0, 2**31 - 1)
        if message[0] == "request":
            frame = encode_request(entity, correlation_id, "fuzz")[_SIZE.size :]
        else:
            frame = encode(message[1].__header_schema__(correlation_id=cast(i32, correlation_id))) + encode(entity)
        keep = 4 if message[0] == "request" else 0  # a request keeps its API key and version
        for _ in range(min(8, inputs - done)):
            done += 1
            data = mutate(frame, rng, keep)
            try:
                outcomes[_decode_one(message, data, rng)] += 1
            except Exception as e:  # noqa: BLE001 - what this looks for: not a ProtocolError
                name = f"{cls.__module__}.{cls.__name__}"
                bugs.append(f"{name}: {type(e).__name__}: {e} on {data.hex()}")
    print(f"codec fuzz: {inputs} inputs, seed {seed}: {dict(outcomes)}; bugs: {len(bugs)}")
    for bug in bugs[:20]:
        print(f"  {bug}")
    return 1 if bugs else 0


def _decode_one(message: MessageClass, data: bytes, rng: random.Random) -> str:
    """What the decoders made of one frame, through decode_request or decode_response as the
    node runs them, then header and body apart to compare their ends with the shape check's."""
    cls = message[1]
    zero_copy = message[0] == "response" and rng.random() < 0.5
    try:
        if message[0] == "request":
            decode_request(data)
        else:
            decode_response(data, message[1], zero_copy)
    except ProtocolError:
        outcome = "refused"
    else:
        outcome = "decoded"
    try:
        end = checked_end(cls, data, checked_end(cls.__header_schema__, data))
    except ProtocolError:
        return f"{outcome} (shape check refused)"
    try:
        _, pos = decode(cls, data, decode(cls.__header_schema__, data)[1], zero_copy)
    except ProtocolError:
        return f"{outcome} (reader refused)"
    if pos != end:
        raise AssertionError(f"read to byte {pos}, but the shape check said {end}")
    return outcome
