"""`spark.read.format("kraft")` and `spark.readStream.format("kraft")`: a live cluster's log.

Rows have `rows.RECORD_SCHEMA` (Spark's Kafka-source columns plus leaderEpoch and
isControl), read over Kafka's wire protocol by `kraft.client.Consumer`, only committed
records (a kraft node serves clients up to its high watermark). Options, with the names of
Spark's Kafka source where it has one:

    bootstrap.servers      required: host:port[,host:port...] of any nodes
    topic                  the topic to read (default __cluster_metadata)
    startingOffsets        "earliest", "latest" or JSON, per partition an offset (-2
                           earliest, -1 latest) or {"offset": o, "leaderEpoch": e}, e the
                           epoch of the record before o (as next_offsets() and the stream's
                           checkpointed offsets give it): {"__cluster_metadata": {"0":
                           {"offset": 120, "leaderEpoch": 3}}}. Default: earliest for a
                           batch read, latest for a stream.
    endingOffsets          batch only: "latest" (the high watermark, the default) or JSON
                           as above; an epoch there is checked the same way.
    failOnDataLoss         "true" (default): a position whose history the log no longer
                           holds (KIP-320: OffsetForLeaderEpoch says the epoch ended before
                           it) fails the read, naming the first diverging offset. "false":
                           the read resumes from that offset and says so in the log.
    maxOffsetsPerTrigger   stream only: at most this many offsets per micro-batch.
    minPartitions          at least this many Spark tasks (default 1 per topic partition)
    maxRecordsPerPartition a task reads at most this many offsets (default 250000): ranges
                           are split so several tasks read one partition in parallel.
    decode                 "none" (default): Kafka's rows. "metadata": decoded metadata
                           records (`kraft.spark.history`), batch and stream. Topic names
                           come from the TopicRecords between the log start and the read's
                           end, which the planner reads first (a stream: each micro-batch's
                           new offsets). A topic whose TopicRecord is only in a snapshot
                           (created before the log start) has its id and no name: the
                           snapshot is not served to consumers; "kraft-files" reads it.

Fencing inside a task: every record in a planned range existed when the range was planned,
so its epoch is at most the leader epoch seen then; a record of a newer epoch inside the
range can only be one that replaced the planned history, and the task stops there (data
loss, as above) instead of returning it. The rows before the log start offset live only in
snapshots: read them with "kraft-files" or "kraft-metadata".
"""

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kraft.client import (
    Consumer,
    ConsumerError,
    LogTruncationError,
    OffsetAndEpoch,
    OffsetOutOfRangeError,
    TopicPartition,
)
from kraft.client.consumer import FetchedBatches
from kraft.spark.history import HISTORY_SCHEMA, TopicNames, decode_all
from kraft.spark.options import DECODE, Options
from kraft.spark.rows import RECORD_SCHEMA, to_arrow

log = logging.getLogger("kraft.spark")

EARLIEST, LATEST = -2, -1
DEFAULT_TOPIC = "__cluster_metadata"
DEFAULT_MAX_RECORDS_PER_TASK = 250_000
STALL_S = 60.0  # a task that gets no data for this long while its range is not read fails
KNOWN = ("bootstrap.servers", "topic", "startingOffsets", "endingOffsets", "failOnDataLoss",
         "maxOffsetsPerTrigger", "minPartitions", "maxRecordsPerPartition", DECODE)


class DataLossError(RuntimeError):
    """Records a read had planned on, or had already returned, are no longer in the log."""


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task: offsets [start, end) of one partition. `start_epoch` is the epoch of the
    record before `start` when known (the task validates it before fetching); no record in
    the range may have an epoch above `bound_epoch`, that of the record before the planned
    end when the range was planned. `names`: with decode=metadata, the topic names."""

    bootstrap: str
    topic: str
    partition: int
    start: int
    start_epoch: int | None
    end: int
    bound_epoch: int
    fail_on_data_loss: bool
    names: TopicNames | None = None


class LiveOptions:
    def __init__(self, options: Options, streaming: bool) -> None:
        self.bootstrap = options.get("bootstrap.servers", "").strip()
        if not self.bootstrap:
            raise ValueError("kraft: option bootstrap.servers is required (host:port of any node)")
        self.topic = options.get("topic", DEFAULT_TOPIC)
        self.starting = _parse_offsets(options.get("startingOffsets", "latest" if streaming else "earliest"),
                                       "startingOffsets", self.topic)
        if streaming and options.get("endingOffsets", ""):
            raise ValueError("kraft: endingOffsets is for batch reads; a stream reads on")
        self.ending = _parse_offsets(options.get("endingOffsets", "latest"), "endingOffsets", self.topic)
        self.fail_on_data_loss = options.choice("failOnDataLoss", ("true", "false")) == "true"
        self.max_per_trigger = options.integer("maxOffsetsPerTrigger", 0, minimum=1) if options.get(
            "maxOffsetsPerTrigger", "") else None
        self.min_partitions = options.integer("minPartitions", 1, minimum=1)
        self.max_per_task = options.integer("maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_TASK, minimum=1)
        self.decode = options.decode()

    def consumer(self) -> Consumer:
        return Consumer(self.bootstrap, auto_offset_reset="none", client_id="kraft-spark", include_control=True)


Positions = dict[int, OffsetAndEpoch] | int  # per partition, or EARLIEST / LATEST for all


def _parse_offsets(raw: str, name: str, topic: str) -> Positions:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return EARLIEST if text.lower() == "earliest" else LATEST
    try:
        spec = json.loads(text)
        if not isinstance(spec, dict) or set(spec) != {topic}:
            raise ValueError(f"it must name exactly the topic {topic!r}")
        out = {}
        for partition, value in spec[topic].items():
            if isinstance(value, dict):
                unknown = set(value) - {"offset", "leaderEpoch"}
                if unknown or not isinstance(value.get("offset"), int):
                    raise ValueError(f"partition {partition}: expected {{\"offset\": int, \"leaderEpoch\": int}}")
                epoch = value.get("leaderEpoch", -1)
                out[int(partition)] = OffsetAndEpoch(value["offset"], epoch if epoch >= 0 else None)
            elif isinstance(value, int):
                out[int(partition)] = OffsetAndEpoch(value, None)
            else:
                raise ValueError(f"partition {partition}: {value!r} is not an offset")
        return out
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
        raise ValueError(f"kraft: option {name} is {raw!r}: {e}; expected \"earliest\", \"latest\" or JSON such as "
                         f'{{"{topic}": {{"0": {{"offset": 42, "leaderEpoch": 3}}}}}}') from None


class _Planner:
    """Turns options and positions into checked offsets and task ranges (driver side)."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self.consumer = options.consumer()
        partitions = self.consumer.partitions_for(options.topic)
        if not partitions:
            raise ValueError(f"kraft: topic {options.topic!r} is unknown to the cluster at {options.bootstrap}")
        self.tps = [TopicPartition(options.topic, p) for p in partitions]
        self.consumer.assign(self.tps)

    def close(self) -> None:
        self.consumer.close()

    def resolve(self, positions: Positions) -> dict[TopicPartition, OffsetAndEpoch]:
        """Concrete (offset, epoch) per partition, each checked against the leader's log."""
        earliest = self.consumer.beginning_offsets(self.tps)
        latest = self.consumer.end_offsets(self.tps)
        out = {}
        for tp in self.tps:
            wanted = positions if isinstance(positions, int) else positions.get(tp.partition, OffsetAndEpoch(LATEST, None))
            if wanted in (EARLIEST, LATEST) or wanted.offset in (EARLIEST, LATEST):
                kind = wanted if isinstance(wanted, int) else wanted.offset
                out[tp] = earliest[tp] if kind == EARLIEST else latest[tp]
            else:
                out[tp] = self.checked(tp, wanted, earliest[tp], latest[tp])
        return out

    def checked(self, tp: TopicPartition, at: OffsetAndEpoch, earliest: OffsetAndEpoch,
                latest: OffsetAndEpoch) -> OffsetAndEpoch:
        """`at` if the log still holds its history; else the divergence point, with the
        leader's epoch there so that the next check starts from it (or a failure)."""
        if at.leader_epoch is not None:
            try:
                self.consumer.validate_position(tp, at.offset, at.leader_epoch)
            except LogTruncationError as e:
                diverged = e.divergent_offsets[tp]
                where = diverged if diverged is not None and diverged.offset >= earliest.offset else earliest
                self.data_loss(f"{tp}: the log no longer holds offset {at.offset} of epoch {at.leader_epoch} "
                               f"(first diverging offset {_offset(diverged)})", f"resuming from offset {where.offset}")
                return where
        if not earliest.offset <= at.offset <= latest.offset:
            where = min(max(at.offset, earliest.offset), latest.offset)
            self.data_loss(f"{tp}: offset {at.offset} is outside the log [{earliest.offset}, {latest.offset}]",
                           f"resuming from offset {where}")
            return OffsetAndEpoch(where, None)
        return at

    def data_loss(self, what: str, instead: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"kraft: data loss: {what}. Set failOnDataLoss=false to go on from there.")
        log.warning("kraft: data loss: %s; %s (failOnDataLoss=false)", what, instead)

    def bounds(self, end: dict[TopicPartition, OffsetAndEpoch]) -> dict[TopicPartition, int]:
        """Per partition, the newest epoch a record below `end` can have: the epoch of the
        record before `end` (epochs only grow along a log), or, where `end` came without
        one, that of the record before the high watermark."""
        latest = self.consumer.end_offsets(self.tps)
        return {tp: at.leader_epoch if at.leader_epoch is not None else latest[tp].leader_epoch or 0
                for tp, at in end.items()}

    def scan_names(self, names: TopicNames, scanned: dict[TopicPartition, int],
                   end: dict[TopicPartition, OffsetAndEpoch]) -> None:
        """Adds to `names` the TopicRecords of each partition from `scanned` (where an earlier
        scan stopped; the log start at first) up to `end`, and moves `scanned` there."""
        earliest = self.consumer.beginning_offsets(self.tps)
        for tp in self.tps:
            start = max(scanned.get(tp, 0), earliest[tp].offset)
            stop = end[tp].offset
            if start < stop:
                consumer = Consumer(self.options.bootstrap, auto_offset_reset="earliest", client_id="kraft-spark")
                try:
                    consumer.assign([tp])
                    consumer.seek(tp, start)
                    for fetched in _polled(consumer, tp, stop):
                        names.scan(b for b in fetched.batches if b.header.base_offset < stop)
                finally:
                    consumer.close()
            scanned[tp] = max(start, stop)

    def ranges(self, start: dict[TopicPartition, OffsetAndEpoch], end: dict[TopicPartition, OffsetAndEpoch],
               bounds: dict[TopicPartition, int]) -> list[OffsetRange]:
        spans = {tp: end[tp].offset - start[tp].offset for tp in start if end[tp].offset > start[tp].offset}
        total = sum(spans.values())
        out = []
        for tp, span in spans.items():
            tasks = max(-(-span // self.options.max_per_task), -(-self.options.min_partitions * span // total))
            step = -(-span // tasks)
            for lo in range(start[tp].offset, end[tp].offset, step):
                epoch = start[tp].leader_epoch if lo == start[tp].offset else None
                out.append(OffsetRange(self.options.bootstrap, tp.topic, tp.partition, lo, epoch,
                                       min(lo + step, end[tp].offset), bounds[tp], self.options.fail_on_data_loss))
        return out


def _polled(consumer: Consumer, tp: TopicPartition, end: int) -> Iterator[FetchedBatches]:
    """What `consumer` fetches of `tp` from its position until the position reaches `end`;
    no data for STALL_S while the range is unread fails."""
    position, progress = consumer.position(tp), time.monotonic()
    while position < end:
        fetched = consumer.poll_batches(500)
        if not fetched:
            if time.monotonic() - progress > STALL_S:
                raise ConsumerError(f"{tp}: no data for offsets [{position}, {end}) in {STALL_S:.0f} s")
            continue
        progress = time.monotonic()
        yield from fetched
        position = consumer.position(tp)


def read_range(task: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The rows of offsets [task.start, task.end), as Arrow batches, fenced as the module says."""
    tp = TopicPartition(task.topic, task.partition)
    consumer = Consumer(task.bootstrap, auto_offset_reset="none", client_id="kraft-spark", include_control=True)
    try:
        consumer.assign([tp])
        consumer.seek(tp, task.start, task.start_epoch)
        for f in _polled(consumer, tp, task.end):
            batches = []
            for batch in f.batches:
                h = batch.header
                if h.base_offset >= task.end:
                    break
                if h.partition_leader_epoch > task.bound_epoch:
                    yield from _arrow(batches, task)
                    return _lost(task, f"offset {h.base_offset} now holds a record of epoch "
                                 f"{h.partition_leader_epoch}, newer than epoch {task.bound_epoch} the read was "
                                 f"planned in: the history it planned on was replaced (first diverging offset "
                                 f"at or below {h.base_offset})")
                batches.append(batch)
            yield from _arrow(batches, task)
    except LogTruncationError as e:
        return _lost(task, f"the log was truncated below offset {consumer.position(tp)} (first diverging offset "
                     f"{_offset(e.divergent_offsets[tp])})")
    except OffsetOutOfRangeError:
        return _lost(task, f"offset {consumer.position(tp)} is no longer in the log")
    finally:
        consumer.close()


def read_task(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """What a task of either reader yields: Kafka rows, or decoded ones if the range has names."""
    if not isinstance(partition, OffsetRange):
        return iter(())  # Spark's stand-in for a plan without partitions: nothing to read
    rows = read_range(partition)
    return rows if partition.names is None else decode_all(rows, partition.names)


def _arrow(batches: list, task: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the rows in [task.start, task.end): the first and last Kafka batch
    may reach outside the range; offsets ascend, so the rows to keep are one slice."""
    for arrow in to_arrow(batches, topic=task.topic, partition=task.partition):
        offsets = arrow.column("offset")
        skip = pc.sum(pc.less(offsets, task.start)).as_py() or 0
        keep = len(arrow) - skip - (pc.sum(pc.greater_equal(offsets, task.end)).as_py() or 0)
        if keep:
            yield arrow.slice(skip, keep)


def _offset(at: OffsetAndEpoch | None) -> str:
    """A diverging offset for a message ("unknown" when the leader could not say)."""
    return str(at.offset) if at is not None else "unknown"


def _lost(task: OffsetRange, what: str) -> None:
    message = f"kraft: data loss in {task.topic}-{task.partition} [{task.start}, {task.end}): {what}"
    if task.fail_on_data_loss:
        raise DataLossError(message + ". Set failOnDataLoss=false to go on without these records.")
    log.warning("%s; the task stops there (failOnDataLoss=false)", message)


class KraftBatchReader(DataSourceReader):
    def __init__(self, options: LiveOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        planner = _Planner(self.options)
        try:
            start = planner.resolve(self.options.starting)
            end = planner.resolve(self.options.ending)
            for tp in planner.tps:
                if end[tp].offset < start[tp].offset:
                    raise ValueError(f"kraft: {tp}: endingOffsets {end[tp].offset} is before startingOffsets "
                                     f"{start[tp].offset}")
            ranges = planner.ranges(start, end, planner.bounds(end))
            if not self.options.decode:
                return ranges
            names = TopicNames()
            planner.scan_names(names, {}, end)
            return [replace(r, names=names) for r in ranges]
        finally:
            planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(partition)


def _to_json(offsets: dict[TopicPartition, OffsetAndEpoch]) -> dict:
    """Offsets as the stream checkpoints them: {topic: {partition: {offset, leaderEpoch}}}."""
    out: dict = {}
    for tp, at in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = {
            "offset": at.offset, "leaderEpoch": at.leader_epoch if at.leader_epoch is not None else -1}
    return out


def _from_json(offsets: dict) -> dict[TopicPartition, OffsetAndEpoch]:
    return {TopicPartition(topic, int(p)): OffsetAndEpoch(v["offset"], v["leaderEpoch"] if v["leaderEpoch"] >= 0 else None)
            for topic, partitions in offsets.items() for p, v in partitions.items()}


class KraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the live log. Offsets carry the epoch of the record before them, so
    each micro-batch first checks that what the previous ones read is still the log."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self._planner: _Planner | None = None
        self.available_now: dict[TopicPartition, OffsetAndEpoch] | None = None
        self.names = TopicNames()  # with decode=metadata: the topics seen so far, and how far
        self.scanned: dict[TopicPartition, int] = {}

    @property
    def planner(self) -> _Planner:
        """Made on first use: Spark pickles the reader before it asks anything of it."""
        if self._planner is None:
            self._planner = _Planner(self.options)
        return self._planner

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_planner": None}

    def initialOffset(self) -> dict:
        return _to_json(self.planner.resolve(self.options.starting))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_per_trigger) if self.options.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = self.planner.consumer.end_offsets(self.planner.tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._checked(start)
        latest = self.available_now or self.planner.consumer.end_offsets(self.planner.tps)
        end = {tp: max(latest[tp], begin[tp], key=lambda o: o.offset) for tp in self.planner.tps}
        if isinstance(limit, ReadMaxRows):
            end = self._limited(begin, end, limit.max_rows)
        return _to_json(end)

    def reportLatestOffset(self) -> dict:
        return _to_json(self.planner.consumer.end_offsets(self.planner.tps))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Both ends are checked: the log may have lost records since latestOffset()."""
        begin, planned = self._checked(start), _from_json(end)
        stop = self._checked(end)
        ranges = self.planner.ranges(begin, stop, self.planner.bounds(planned))
        if not self.options.decode:
            return ranges
        self.planner.scan_names(self.names, self.scanned, stop)
        return [replace(r, names=self.names) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the stream's position lives in Spark's checkpoint, not in the cluster."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()

    def _checked(self, start: dict) -> dict[TopicPartition, OffsetAndEpoch]:
        """The micro-batch's start per partition, validated (KIP-320) against the log now."""
        offsets = _from_json(start)
        earliest = self.planner.consumer.beginning_offsets(self.planner.tps)
        latest = self.planner.consumer.end_offsets(self.planner.tps)
        return {tp: self.planner.checked(tp, offsets.get(tp, earliest[tp]), earliest[tp], latest[tp])
                for tp in self.planner.tps}

    def _limited(self, begin: dict[TopicPartition, OffsetAndEpoch], end: dict[TopicPartition, OffsetAndEpoch],
                 most: int) -> dict[TopicPartition, OffsetAndEpoch]:
        """At most `most` offsets in all, shared in proportion to each partition's backlog,
        as Spark's Kafka source does; a cut end gets the epoch of the record before it."""
        backlog = {tp: end[tp].offset - begin[tp].offset for tp in end}
        total = sum(backlog.values())
        if total <= most:
            return end
        out = {}
        for tp, lag in backlog.items():
            take = lag * most // total
            out[tp] = end[tp] if take >= lag else OffsetAndEpoch(
                begin[tp].offset + take, self.planner.consumer.epoch_at(tp, begin[tp].offset + take - 1)
                if take else begin[tp].leader_epoch)
        return out


class KraftDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kraft"

    def schema(self) -> StructType:
        return HISTORY_SCHEMA if Options(self.name(), self.options, KNOWN).decode() else RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftBatchReader(LiveOptions(Options(self.name(), self.options, KNOWN), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KraftStreamReader(LiveOptions(Options(self.name(), self.options, KNOWN), streaming=True))
