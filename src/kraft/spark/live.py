"""`spark.read.format("kraft")` and `spark.readStream.format("kraft")`: a live cluster's log.

Rows have `rows.record_schema` (Spark's Kafka-source columns plus leaderEpoch, isControl
and snapshot), read over Kafka's wire protocol by `kraft.client.Consumer`, only committed
records (a kraft node serves clients up to its high watermark). The options are those of
Spark's Kafka source, with its names, values and meaning, so code written for
`format("kafka")` runs unchanged (live_options.py checks them); kraft's own follow.

    kafka.bootstrap.servers   required: host:port[,host:port...] of any nodes. Alias:
                              bootstrap.servers (kraft's name).
    kafka.<setting>           passed to kraft's consumer where it has the setting:
                              client.id, request.timeout.ms, default.api.timeout.ms,
                              retry.backoff.ms, fetch.max.bytes, max.partition.fetch.bytes,
                              fetch.max.wait.ms; and the security settings as Spark's Kafka
                              source takes them (kafka.security.protocol, kafka.ssl.*,
                              kafka.sasl.*; kraft.client.security lists them: PEM files,
                              SASL PLAIN and SCRAM-SHA-256/512, sasl.jaas.config or
                              sasl.username/sasl.password). Any other kafka.* is refused.
    subscribe                 the topics to read, comma-separated. A kraft cluster stores
    subscribePattern          one log, __cluster_metadata (its other topics exist as
    assign                    metadata only), so each must come to that: subscribe to it,
                              a pattern (a regular expression matching whole names) that
                              matches it, or assign JSON {"__cluster_metadata": [0]}. At
                              most one of them. Alias: topic (kraft's name). Default: the log.
    startingOffsets           "earliest", "latest" or JSON, per partition an offset (-2
                              earliest, -1 latest) or {"offset": o, "leaderEpoch": e}, e the
                              epoch of the record before o (as next_offsets() and the
                              stream's checkpointed offsets give it): {"__cluster_metadata":
                              {"0": {"offset": 120, "leaderEpoch": 3}}}. Default: earliest for
                              a batch read, latest for a stream.
    startingOffsetsByTimestamp  JSON {"__cluster_metadata": {"0": <ms since the epoch>}}: per
    startingTimestamp         partition, the first record at or after that time (ListOffsets
                              by timestamp); startingTimestamp gives one time for every
                              partition. Spark's precedence: startingTimestamp, then
                              startingOffsetsByTimestamp, then startingOffsets.
    startingOffsetsByTimestampStrategy  "error" (default): no record that recent fails the
                              read; "latest": it starts at the latest offset.
    endingOffsets             batch only: "latest" (the high watermark, the default) or JSON
                              as above (exclusive); an epoch there is checked the same way.
    endingOffsetsByTimestamp  batch only, as the starting ones: the read ends before the first
    endingTimestamp           record at or after the time, or at the latest offset if none.
    failOnDataLoss            "true" (default): a position whose history the log no longer
                              holds (KIP-320: OffsetForLeaderEpoch says the epoch ended before
                              it), or whose records retention removed, fails the read, naming
                              the first diverging offset. "false": the read resumes from
                              there and says so in the log and, for a stream, in the query's
                              progress: the source's "latestOffset" JSON gets a "dataLoss"
                              list of what was lost (in the progress of the trigger that
                              found it, or the next).
    snapshotFallback          kraft's: "false" (default) or "true": a position below the log
                              start (retention removed its records) is not data loss: the
                              read goes on from the snapshot the log starts at, as a replica
                              does (KIP-630): its rows come first, marked with its id in the
                              snapshot column, at its last contained offset and epoch, then
                              the log from its end. With it, "earliest" is the beginning of
                              the history (the snapshot, then the log), as in "kraft-files".
    maxOffsetsPerTrigger      stream only: at most this many offsets per micro-batch.
    minOffsetsPerTrigger      stream only: a trigger with fewer new offsets than this runs no
    maxTriggerDelay           micro-batch, unless maxTriggerDelay (default 15m, Spark's
                              durations: 500ms, 30s, 15m, 1h) passed since the last one ran.
                              Trigger.AvailableNow reads to its end regardless.
    minPartitions             at least this many Spark tasks (default 1 per topic partition)
    maxRecordsPerPartition    a task reads at most this many offsets (default 250000): ranges
                              are split so several tasks read one partition in parallel.
    includeHeaders            "false" (default) or "true": Spark's headers column.
    decode                    kraft's: "none" (default): Kafka's rows. "metadata": decoded
                              metadata records (`kraft.spark.history`), batch and stream.
                              Topic names come from the TopicRecords between the log start
                              (with snapshotFallback, the snapshot it starts at) and the read's
                              end, which the planner reads first (a stream: each
                              micro-batch's new offsets). Without snapshotFallback, a topic
                              whose TopicRecord is only in a snapshot has its id and no name.

Fencing inside a task: every record in a planned range existed when the range was planned,
so its epoch is at most the leader epoch seen then; a record of a newer epoch inside the
range can only be one that replaced the planned history, and the task stops there (data
loss, as above) instead of returning it. With snapshotFallback, a task whose start
retention removed after planning reads the snapshot the log then starts at; when
retention moved on during the micro-batch, that snapshot can end past the task's range
(its rows then stand at a later offset) and a later read can give the same snapshot again:
every offset is in a log row or covered by a snapshot's rows, and rows of one snapshot id
are one state.
"""

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
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
from kraft.records import RecordBatch
from kraft.spark.history import TopicNames, decode_all
from kraft.spark.live_options import (
    EARLIEST,
    KAFKA,
    KNOWN,
    LATEST,
    ByTimestamp,
    ConsumerSettings,
    LiveOptions,
    Positions,
)
from kraft.spark.options import Options
from kraft.spark.rows import to_arrow

log = logging.getLogger("kraft.spark")

STALL_S = 60.0  # a task that gets no data for this long while its range is not read fails
DATA_LOSS = "dataLoss"  # the key of the data-loss list in a stream's reported latest offset


class DataLossError(RuntimeError):
    """Records a read had planned on, or had already returned, are no longer in the log."""


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task: offsets [start, end) of one partition. `start_epoch` is the epoch of the
    record before `start` when known (the task validates it before fetching); no record in
    the range may have an epoch above `bound_epoch`, that of the record before the planned
    end when the range was planned. `names`: with decode=metadata, the topic names."""

    consumers: ConsumerSettings
    topic: str
    partition: int
    start: int
    start_epoch: int | None
    end: int
    bound_epoch: int
    fail_on_data_loss: bool
    headers: bool = False
    names: TopicNames | None = None


class _Planner:
    """Turns options and positions into checked offsets and task ranges (driver side)."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self.consumer = options.consumer()
        self.losses: list[str] = []  # data loss found since the stream last reported it
        partitions = self.consumer.partitions_for(options.topic)
        if not partitions:
            raise ValueError(f"kraft: topic {options.topic!r} is unknown to the cluster at {options.bootstrap}")
        if options.partitions is not None:
            missing = sorted(set(options.partitions) - set(partitions))
            if missing:
                raise ValueError(f"kraft: assign names partition(s) {missing} of {options.topic}, which has "
                                 f"{sorted(partitions)}")
            partitions = options.partitions
        self.tps = [TopicPartition(options.topic, p) for p in partitions]
        self.consumer.assign(self.tps)

    def close(self) -> None:
        self.consumer.close()

    def resolve(self, positions: Positions, starting: bool = True) -> dict[TopicPartition, OffsetAndEpoch]:
        """Concrete (offset, epoch) per partition, each checked against the leader's log."""
        earliest = self.consumer.beginning_offsets(self.tps)
        latest = self.consumer.end_offsets(self.tps)
        if isinstance(positions, ByTimestamp):
            return self._by_time(positions, starting, latest)
        out = {}
        for tp in self.tps:
            wanted = OffsetAndEpoch(positions, None) if isinstance(positions, int) else positions.get(
                tp.partition, OffsetAndEpoch(LATEST, None))
            if wanted.offset == EARLIEST:
                out[tp] = self._history_start(earliest[tp]) if starting else earliest[tp]
            elif wanted.offset == LATEST:
                out[tp] = latest[tp]
            else:
                out[tp] = self.checked(tp, wanted, earliest[tp], latest[tp])
        return out

    def _history_start(self, earliest: OffsetAndEpoch) -> OffsetAndEpoch:
        """Where "earliest" starts: the log start, or with snapshotFallback the snapshot the
        log starts at (its last contained offset, which a task reads as that snapshot)."""
        if self.options.consumers.snapshot_fallback and earliest.offset > 0:
            return OffsetAndEpoch(earliest.offset - 1, None)
        return earliest

    def _by_time(self, positions: ByTimestamp, starting: bool,
                 latest: dict[TopicPartition, OffsetAndEpoch]) -> dict[TopicPartition, OffsetAndEpoch]:
        stamps = positions.timestamps
        if isinstance(stamps, dict) and set(stamps) != {tp.partition for tp in self.tps}:
            raise ValueError(f"kraft: offsets by timestamp name partitions {sorted(stamps)}; the read has "
                             f"{[tp.partition for tp in self.tps]}: give a timestamp for each")
        wanted = {tp: stamps if isinstance(stamps, int) else stamps[tp.partition] for tp in self.tps}
        found = self.consumer.offsets_for_times(wanted)
        out = {}
        for tp, at in found.items():
            if at is not None:
                out[tp] = OffsetAndEpoch(at.offset, None)  # the epoch found is the record's at, not before, it
            elif starting and positions.strategy == "error":
                raise ValueError(f"kraft: {tp} has no record at or after timestamp {wanted[tp]} (set "
                                 "startingOffsetsByTimestampStrategy=latest to start at the latest offset then)")
            else:
                out[tp] = latest[tp]
        return out

    def checked(self, tp: TopicPartition, at: OffsetAndEpoch, earliest: OffsetAndEpoch,
                latest: OffsetAndEpoch) -> OffsetAndEpoch:
        """`at` if the log still holds its history; else the divergence point, with the
        leader's epoch there so that the next check starts from it (or a failure). Below the
        log start with snapshotFallback: the snapshot the log starts at (see _history_start)."""
        if at.leader_epoch is not None:
            try:
                self.consumer.validate_position(tp, at.offset, at.leader_epoch)
            except LogTruncationError as e:
                diverged = e.divergent_offsets[tp]
                where = diverged if diverged is not None and diverged.offset >= earliest.offset else earliest
                self.data_loss(f"{tp}: the log no longer holds offset {at.offset} of epoch {at.leader_epoch} "
                               f"(first diverging offset {_offset(diverged)})", f"resuming from offset {where.offset}")
                return where
        if at.offset < earliest.offset and self.options.consumers.snapshot_fallback:
            log.info("kraft: %s: offset %d is below the log start %d; reading the snapshot it starts at",
                     tp, at.offset, earliest.offset)
            return self._history_start(earliest)
        if not earliest.offset <= at.offset <= latest.offset:
            nearest = min(max(at.offset, earliest.offset), latest.offset)
            self.data_loss(f"{tp}: offset {at.offset} is outside the log [{earliest.offset}, {latest.offset}]",
                           f"resuming from offset {nearest}")
            return OffsetAndEpoch(nearest, None)
        return at

    def data_loss(self, what: str, instead: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"kraft: data loss: {what}. Set failOnDataLoss=false to go on from there"
                                " (or snapshotFallback=true where retention removed the records).")
        log.warning("kraft: data loss: %s; %s (failOnDataLoss=false)", what, instead)
        self.losses.append(f"{what}; {instead}")

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
        scan stopped; the log start at first, or with snapshotFallback the snapshot it starts
        at) up to `end`, and moves `scanned` there."""
        earliest = self.consumer.beginning_offsets(self.tps)
        for tp in self.tps:
            start = max(scanned.get(tp, 0), self._history_start(earliest[tp]).offset)
            stop = end[tp].offset
            if start < stop:
                consumer = self.options.consumers.consumer(include_control=False)
                try:
                    consumer.assign([tp])
                    consumer.seek(tp, start)
                    for fetched in _polled(consumer, tp, stop):
                        names.scan(b for b in fetched.batches
                                   if fetched.snapshot is not None or b.header.base_offset < stop)
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
                out.append(OffsetRange(self.options.consumers, tp.topic, tp.partition, lo, epoch,
                                       min(lo + step, end[tp].offset), bounds[tp], self.options.fail_on_data_loss,
                                       self.options.headers))
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
    consumer = task.consumers.consumer()
    try:
        consumer.assign([tp])
        consumer.seek(tp, task.start, task.start_epoch)
        for f in _polled(consumer, tp, task.end):
            if f.snapshot is not None:  # the start was below the log start (snapshotFallback)
                yield from to_arrow(f.batches, topic=task.topic, partition=task.partition,
                                    snapshot=_snapshot_id(f.snapshot), headers=task.headers)
                continue
            batches: list[RecordBatch] = []
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


def _arrow(batches: list[RecordBatch], task: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the rows in [task.start, task.end): the first and last Kafka batch
    may reach outside the range; offsets ascend, so the rows to keep are one slice."""
    for arrow in to_arrow(batches, topic=task.topic, partition=task.partition, headers=task.headers):
        offsets = arrow.column("offset")
        skip = pc.sum(pc.less(offsets, task.start)).as_py() or 0
        keep = len(arrow) - skip - (pc.sum(pc.greater_equal(offsets, task.end)).as_py() or 0)
        if keep:
            yield arrow.slice(skip, keep)


def _snapshot_id(snapshot: OffsetAndEpoch) -> tuple[int, int]:
    """(end offset, epoch) of a snapshot the consumer fetched, as rows carry it. The
    consumer's id type leaves the epoch optional; a snapshot's id always has one."""
    if snapshot.leader_epoch is None:
        raise ConsumerError(f"snapshot ending at offset {snapshot.offset} came without its epoch")
    return snapshot.offset, snapshot.leader_epoch


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

    def partitions(self) -> Sequence[InputPartition]:
        planner = _Planner(self.options)
        try:
            start = planner.resolve(self.options.starting)
            end = planner.resolve(self.options.ending, starting=False)
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
            for topic, partitions in offsets.items() if topic != DATA_LOSS for p, v in partitions.items()}


class KraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the live log. Offsets carry the epoch of the record before them, so
    each micro-batch first checks that what the previous ones read is still the log."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self._planner: _Planner | None = None
        self.available_now: dict[TopicPartition, OffsetAndEpoch] | None = None
        self.names = TopicNames()  # with decode=metadata: the topics seen so far, and how far
        self.scanned: dict[TopicPartition, int] = {}
        self.last_trigger_ms = 0.0  # when a micro-batch last ran (minOffsetsPerTrigger)

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
        """Spark's Kafka source says both limits in one composite limit, which PySpark's API
        has not: maxOffsetsPerTrigger goes to Spark, and minOffsetsPerTrigger is applied
        here (latestOffset) whenever the limit Spark passes back is not ReadAllAvailable."""
        if self.options.max_per_trigger:
            return ReadMaxRows(self.options.max_per_trigger)
        if self.options.min_per_trigger:
            return ReadMinRows(self.options.min_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = self.planner.consumer.end_offsets(self.planner.tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._checked(start)
        latest = self.available_now or self.planner.consumer.end_offsets(self.planner.tps)
        end = {tp: max(latest[tp], begin[tp], key=lambda o: o.offset) for tp in self.planner.tps}
        if isinstance(limit, ReadAllAvailable):
            return _to_json(end)
        if self._delayed(begin, end):
            return _to_json(begin)
        if isinstance(limit, ReadMaxRows):
            end = self._limited(begin, end, limit.max_rows)
        return _to_json(end)

    def _delayed(self, begin: dict[TopicPartition, OffsetAndEpoch], end: dict[TopicPartition, OffsetAndEpoch]) -> bool:
        """Spark's rule for minOffsetsPerTrigger: no micro-batch while fewer new offsets than
        it are there, unless maxTriggerDelay passed since the last one ran (the first one
        runs at once). Trigger.AvailableNow is never held back: it must reach its end."""
        if not self.options.min_per_trigger or self.available_now is not None:
            return False
        now = time.time() * 1000
        if now - self.last_trigger_ms < self.options.max_trigger_delay_ms and \
                sum(end[tp].offset - begin[tp].offset for tp in end) < self.options.min_per_trigger:
            return True
        self.last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict:
        """The latest offsets for the query's progress ("latestOffset"), and under "dataLoss"
        what failOnDataLoss=false skipped since the last report."""
        report = _to_json(self.planner.consumer.end_offsets(self.planner.tps))
        if self.planner.losses:
            report[DATA_LOSS] = self.planner.losses
            self.planner.losses = []
        return report

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
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

    def _options(self) -> Options:
        return Options(self.name(), self.options, KNOWN, prefix=KAFKA)

    def schema(self) -> StructType:
        return self._options().row_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftBatchReader(LiveOptions(self._options(), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KraftStreamReader(LiveOptions(self._options(), streaming=True))
