"""The options of `format("kraft")`: Spark's Kafka-source options with their meaning, and kraft's.

Code written for `spark.read.format("kafka")` runs unchanged against a kraft cluster: the
same option names and values (see live.py's docstring for the list) choose the topic, the
offsets (by offset or by timestamp), the rate limits and the data-loss behaviour, and
`kafka.*` settings reach kraft's consumer where it has them. kraft's own names stay as
aliases: `bootstrap.servers` for `kafka.bootstrap.servers`, `topic` for `subscribe`.

A kraft cluster stores one log, `__cluster_metadata` (the other topics of its metadata
exist as metadata only), so every way of choosing topics must come to that one.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from kraft.client import Consumer, OffsetAndEpoch
from kraft.client.security import client_security
from kraft.spark.options import Options

LOG_TOPIC = "__cluster_metadata"
EARLIEST, LATEST = -2, -1
DEFAULT_MAX_RECORDS_PER_TASK = 250_000
DEFAULT_MAX_TRIGGER_DELAY = "15m"  # Spark's
TOPIC_OPTIONS = ("topic", "subscribe", "subscribePattern", "assign")
KNOWN = (
    # Spark's Kafka source
    "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestampStrategy", "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "includeHeaders",
    # kraft's
    "bootstrap.servers", "topic", "decode", "snapshotFallback",
)
KAFKA = "kafka."

# Kafka consumer settings (after "kafka.") that kraft's consumer has: its keyword argument.
CONSUMER_SETTINGS = {
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "default.api.timeout.ms": "default_api_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "fetch.max.bytes": "fetch_max_bytes",
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
    "fetch.max.wait.ms": "fetch_max_wait_ms",
}
SECURITY = re.compile(r"(ssl|sasl)\..*|security\.protocol|security\.providers")
_DURATION = re.compile(r"\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*")
_DURATION_MS = {"us": 0.001, "ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class ConsumerSettings:
    """How every consumer of a read is made, on the driver and in the tasks alike."""

    bootstrap: str
    settings: tuple[tuple[str, Any], ...] = ()  # Consumer keyword arguments from kafka.*
    snapshot_fallback: bool = False
    # kafka.security.protocol, kafka.ssl.*, kafka.sasl.* without "kafka.": text, not a TLS
    # context, so that the settings travel to the tasks, which build their own.
    security: tuple[tuple[str, str], ...] = ()

    def consumer(self, **extra: Any) -> Consumer:
        kwargs = {"client_id": "kraft-spark", "auto_offset_reset": "none", "include_control": True,
                  "snapshot_fallback": self.snapshot_fallback, **dict(self.settings), **extra}
        return Consumer(self.bootstrap, security=dict(self.security), **kwargs)


@dataclass(frozen=True)
class ByTimestamp:
    """Positions found by time: per partition (or for every partition) the first offset
    whose record's timestamp (ms) is at or after it. `strategy` says what a start does when
    no record is that recent: "error" or "latest" (Spark's startingOffsetsByTimestampStrategy);
    an end then is the latest offset."""

    timestamps: dict[int, int] | int
    strategy: str = "error"


Positions = dict[int, OffsetAndEpoch] | int | ByTimestamp  # per partition, EARLIEST / LATEST, or by time


class LiveOptions:
    def __init__(self, options: Options, streaming: bool) -> None:
        self.topic, self.partitions = _topic(options)
        settings, security = _kafka_settings(options)
        self.consumers = ConsumerSettings(_bootstrap(options), settings, options.boolean("snapshotFallback", False),
                                          security)
        self.bootstrap = self.consumers.bootstrap
        self.starting = _starting(options, self.topic, streaming)
        if streaming and any(options.get(n, "") for n in ("endingOffsets", "endingOffsetsByTimestamp",
                                                         "endingTimestamp")):
            raise ValueError("kraft: endingOffsets (and by timestamp) are for batch reads; a stream reads on")
        self.ending = _ending(options, self.topic)
        self.fail_on_data_loss = options.boolean("failOnDataLoss", True)
        self.max_per_trigger = _optional_int(options, "maxOffsetsPerTrigger")
        self.min_per_trigger = _optional_int(options, "minOffsetsPerTrigger")
        self.max_trigger_delay_ms = duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY)
        self.min_partitions = options.integer("minPartitions", 1, minimum=1)
        self.max_per_task = options.integer("maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_TASK, minimum=1)
        self.decode = options.decode()
        self.headers = options.include_headers()

    def consumer(self) -> Consumer:
        return self.consumers.consumer()


def _bootstrap(options: Options) -> str:
    kafka, kraft = options.get("kafka.bootstrap.servers", "").strip(), options.get("bootstrap.servers", "").strip()
    if kafka and kraft and kafka != kraft:
        raise ValueError(f"kraft: kafka.bootstrap.servers ({kafka}) and bootstrap.servers ({kraft}) differ; give one")
    if not (kafka or kraft):
        raise ValueError("kraft: option kafka.bootstrap.servers (or bootstrap.servers) is required: host:port of "
                         "any node")
    return kafka or kraft


def _kafka_settings(options: Options) -> tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, str], ...]]:
    """kafka.* options: (keyword arguments of kraft's consumer, its security settings).
    The security settings are checked here, on the driver, files read and all, so a bad one
    fails the query in one line naming it before any task starts; any other setting the
    consumer does not have is refused too: a read must not go on pretending to honour it."""
    out: list[tuple[str, Any]] = []
    security: dict[str, str] = {}
    for key, value in sorted(options.with_prefix(KAFKA).items()):
        if key == "bootstrap.servers":
            continue
        if SECURITY.fullmatch(key):
            security[key] = value
            continue
        name = CONSUMER_SETTINGS.get(key)
        if name is None:
            raise ValueError(f"kraft: option kafka.{key} is not a setting kraft's consumer has; it takes "
                             f"{', '.join('kafka.' + k for k in ('bootstrap.servers', *CONSUMER_SETTINGS))} and "
                             "the security settings (kafka.security.protocol, kafka.ssl.*, kafka.sasl.*)")
        if name == "client_id":
            out.append((name, value))
            continue
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"kraft: option kafka.{key} is {value!r}, not an integer") from None
        if number < (0 if key == "fetch.max.wait.ms" else 1):
            raise ValueError(f"kraft: option kafka.{key} is {number}; it must be positive")
        out.append((name, number))
    client_security(security, "kraft: the kafka.* security options", strict=True)
    return tuple(out), tuple(sorted(security.items()))


def _topic(options: Options) -> tuple[str, list[int] | None]:
    """The topic (always the log) and the partitions `assign` names (None: every one)."""
    given = [name for name in TOPIC_OPTIONS if options.get(name, "").strip()]
    if len(given) > 1:
        raise ValueError(f"kraft: options {', '.join(given)} each choose the topic to read; give one of them")
    kind = given[0] if given else "topic"
    raw = options.get(kind, LOG_TOPIC).strip()
    partitions = None
    if kind in ("topic", "subscribe"):
        topics = [t.strip() for t in raw.split(",") if t.strip()]
    elif kind == "subscribePattern":
        try:
            pattern = re.compile(raw)
        except re.error as e:
            raise ValueError(f"kraft: option subscribePattern {raw!r} is not a regular expression: {e}") from None
        if not pattern.fullmatch(LOG_TOPIC):
            raise ValueError(f"kraft: subscribePattern {raw!r} matches no topic with records: a kraft cluster "
                             f"stores one log, {LOG_TOPIC}")
        topics = [LOG_TOPIC]
    else:
        try:
            spec = json.loads(raw)
            if not isinstance(spec, dict) or not all(
                    isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps) for ps in spec.values()):
                raise ValueError("not a JSON object of topic -> list of partitions")
        except ValueError as e:
            raise ValueError(f"kraft: option assign is {raw!r}: {e}; expected JSON such as "
                             f'{{"{LOG_TOPIC}": [0]}}') from None
        topics = list(spec)
        partitions = sorted({p for ps in spec.values() for p in ps})
    others = [t for t in topics if t != LOG_TOPIC]
    if others or not topics:
        what = f"topic(s) {others} have" if others else "no topic is given, so nothing has"
        raise ValueError(f"kraft: option {kind}: {what} no records to read: a kraft cluster stores one log, "
                         f"{LOG_TOPIC} (its other topics exist as metadata only)")
    return LOG_TOPIC, partitions


def _starting(options: Options, topic: str, streaming: bool) -> Positions:
    """Spark's precedence: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets."""
    strategy = options.choice("startingOffsetsByTimestampStrategy", ("error", "latest"))
    by_time = _by_timestamp(options, "startingTimestamp", "startingOffsetsByTimestamp", topic, strategy)
    if by_time is not None:
        return by_time
    return parse_offsets(options.get("startingOffsets", "latest" if streaming else "earliest"), "startingOffsets",
                         topic)


def _ending(options: Options, topic: str) -> Positions:
    by_time = _by_timestamp(options, "endingTimestamp", "endingOffsetsByTimestamp", topic, "latest")
    return by_time if by_time is not None else parse_offsets(options.get("endingOffsets", "latest"), "endingOffsets",
                                                             topic)


def _by_timestamp(options: Options, one: str, each: str, topic: str, strategy: str) -> ByTimestamp | None:
    if options.get(one, "").strip():
        return ByTimestamp(_timestamp(options.get(one, ""), one), strategy)
    raw = options.get(each, "").strip()
    if not raw:
        return None
    try:
        spec = json.loads(raw)
        if not isinstance(spec, dict) or set(spec) != {topic} or not isinstance(spec[topic], dict):
            raise ValueError(f"it must name exactly the topic {topic!r}, with partitions")
        return ByTimestamp({int(p): _timestamp(t, each) for p, t in spec[topic].items()}, strategy)
    except (json.JSONDecodeError, TypeError, ValueError) as e:
        raise ValueError(f"kraft: option {each} is {raw!r}: {e}; expected JSON such as "
                         f'{{"{topic}": {{"0": 1700000000000}}}} (milliseconds since the epoch)') from None


def _timestamp(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"kraft: option {name}: {value!r} is not a timestamp in milliseconds since the epoch")
    return int(value)


def parse_offsets(raw: str, name: str, topic: str) -> Positions:
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


def _optional_int(options: Options, name: str) -> int | None:
    return options.integer(name, 1, minimum=1) if options.get(name, "").strip() else None


def duration_ms(options: Options, name: str, default: str) -> int:
    """A duration as Spark writes them ("15m", "30s", "500ms", "1h", "2d"; a bare number is ms)."""
    raw = options.get(name, default)
    match = _DURATION.fullmatch(raw.lower())
    if match is None:
        raise ValueError(f"kraft: option {name} is {raw!r}; expected a duration such as 15m, 30s or 500ms")
    return int(int(match.group(1)) * _DURATION_MS[match.group(2)])
