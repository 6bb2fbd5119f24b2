"""Which configs may be set, their types, ranges and defaults, and IncrementalAlterConfigs' four ops.

Names, types, bounds and defaults are Kafka's (TopicConfig, the dynamic broker configs and
the broker configs topic configs fall back to: ServerTopicConfigSynonyms). Values
are kept as the strings the client sent, as Kafka keeps them; only their validity is
checked here. An unknown name or a value of the wrong type is INVALID_CONFIG; appending to
or subtracting from a config that is not a list is INVALID_CONFIG too.
"""

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kraft.metadata.image import ConfigResourceType
from kraft.metadata.metadata_errors import ControllerError, Errors

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# KIP-630: the metadata log is compacted by snapshots, never by the log cleaner.
CLUSTER_METADATA_CONFIGS: Mapping[str, str] = {"cleanup.policy": "snapshot"}

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class OpType(enum.IntEnum):
    """AlterConfigOp.OpType, with Kafka's ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    op: OpType
    value: str | None = None


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """A config's type and what values it accepts. Numbers are in [low, high]; strings and
    list items are in `choices` when it is given."""

    type: str  # "int", "long", "double", "boolean", "string", "list"
    low: float = -math.inf
    high: float = math.inf
    choices: frozenset[str] | None = None
    default: str | None = None  # Kafka's, as Kafka prints it; None: no default (the next synonym applies)
    doc: str = ""

    def check(self, name: str, value: str) -> None:
        if self.type == "boolean":
            if value.strip().lower() not in ("true", "false"):
                raise _invalid(name, value, "expected true or false")
        elif self.type in ("int", "long", "double"):
            self._check_number(name, value)
        elif self.choices is not None:
            for item in _items(value) if self.type == "list" else [value.strip()]:
                if item not in self.choices:
                    raise _invalid(name, value, f"{item!r} is not one of {sorted(self.choices)}")

    def _check_number(self, name: str, value: str) -> None:
        try:
            number: float = float(value) if self.type == "double" else int(value.strip())
        except ValueError:
            raise _invalid(name, value, f"expected {'an' if self.type == 'int' else 'a'} {self.type}") from None
        if self.type != "double":
            low, high = _INT32 if self.type == "int" else _INT64
            if not low <= number <= high:
                raise _invalid(name, value, f"out of range for {'an' if self.type == 'int' else 'a'} {self.type}")
        if not self.low <= number <= self.high:  # NaN fails here too
            bound = f"at least {_num(self.low)}" if not number >= self.low else f"at most {_num(self.high)}"
            raise _invalid(name, value, f"must be {bound}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _invalid(name: str, value: str, why: str) -> ControllerError:
    return ControllerError(Errors.INVALID_CONFIG, f"Invalid value {value!r} for configuration {name}: {why}")


_COMPRESSION = frozenset({"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"})
_LONG_MAX = str(2**63 - 1)


def _topic(type_: str, default: str, doc: str, low: float = -math.inf, high: float = math.inf,
           choices: frozenset[str] | None = None) -> ConfigDef:
    return ConfigDef(type_, low, high, choices, default, doc)


# Kafka's LogConfig: each topic config with its default (as Kafka prints it) and the first
# sentence of its documentation.
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {
    "cleanup.policy": _topic("list", "delete", "The retention policy of the log's segments: delete, compact, or both.",
                             choices=frozenset({"compact", "delete"})),
    "compression.type": _topic("string", "producer", "The final compression type for a given topic.",
                               choices=_COMPRESSION),
    "delete.retention.ms": _topic("long", "86400000", "The amount of time to retain delete tombstone markers for "
                                  "log compacted topics.", low=0),
    "file.delete.delay.ms": _topic("long", "60000", "The time to wait before deleting a file from the filesystem.",
                                   low=0),
    "flush.messages": _topic("long", _LONG_MAX, "The number of messages written to the log after which an fsync "
                             "is forced.", low=1),
    "flush.ms": _topic("long", _LONG_MAX, "The time interval after which an fsync of the data written to the log "
                       "is forced.", low=0),
    "index.interval.bytes": _topic("int", "4096", "How frequently Kafka adds an index entry to its offset index.",
                                   low=0),
    "max.compaction.lag.ms": _topic("long", _LONG_MAX, "The maximum time a message will remain ineligible for "
                                    "compaction in the log.", low=1),
    "max.message.bytes": _topic("int", "1048588", "The largest record batch size allowed by Kafka (after "
                                "compression if compression is enabled).", low=0),
    "message.timestamp.type": _topic("string", "CreateTime", "Whether the timestamp in the message is message "
                                     "create time or log append time.",
                                     choices=frozenset({"CreateTime", "LogAppendTime"})),
    "message.timestamp.before.max.ms": _topic("long", _LONG_MAX, "The allowable timestamp difference between the "
                                              "broker's timestamp and an earlier message timestamp.", low=0),
    "message.timestamp.after.max.ms": _topic("long", _LONG_MAX, "The allowable timestamp difference between a "
                                             "later message timestamp and the broker's timestamp.", low=0),
    "min.cleanable.dirty.ratio": _topic("double", "0.5", "How frequently the log compactor will attempt to clean "
                                        "the log.", low=0, high=1),
    "min.compaction.lag.ms": _topic("long", "0", "The minimum time a message will remain uncompacted in the log.",
                                    low=0),
    "min.insync.replicas": _topic("int", "1", "The minimum number of replicas that must acknowledge a write with "
                                  "acks=all for the write to be considered successful.", low=1),
    "preallocate": _topic("boolean", "false", "True if we should preallocate the file on disk when creating a new "
                          "log segment."),
    "retention.bytes": _topic("long", "-1", "The maximum size a partition can grow to before old log segments "
                              "are discarded under the delete retention policy."),
    "retention.ms": _topic("long", "604800000", "The maximum time a log is retained before old log segments are "
                           "discarded under the delete retention policy.", low=-1),
    "segment.bytes": _topic("int", "1073741824", "The segment file size for the log.", low=14),
    "segment.index.bytes": _topic("int", "10485760", "The size of the index that maps offsets to file positions.",
                                  low=4),
    "segment.jitter.ms": _topic("long", "0", "The maximum random jitter subtracted from the scheduled segment roll "
                                "time.", low=0),
    "segment.ms": _topic("long", "604800000", "The period of time after which Kafka forces the log to roll even "
                         "if the segment file isn't full.", low=1),
    "unclean.leader.election.enable": _topic("boolean", "false", "Whether replicas not in the ISR may be elected "
                                             "leader as a last resort, even though doing so may lose data."),
}


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config that sets a topic config's default; its value times `scale` is the
    topic config's (log.retention.hours: 3600000)."""

    name: str
    scale: int = 1


_HOURS, _MINUTES = 3_600_000, 60_000

# Kafka's ServerTopicConfigSynonyms, for the topic configs above: the broker configs a
# topic config falls back to, in precedence order (the first one set wins).
TOPIC_SYNONYMS: Mapping[str, tuple[Synonym, ...]] = {
    "segment.bytes": (Synonym("log.segment.bytes"),),
    "segment.ms": (Synonym("log.roll.ms"), Synonym("log.roll.hours", _HOURS)),
    "segment.jitter.ms": (Synonym("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", _HOURS)),
    "segment.index.bytes": (Synonym("log.index.size.max.bytes"),),
    "flush.messages": (Synonym("log.flush.interval.messages"),),
    "flush.ms": (Synonym("log.flush.interval.ms"), Synonym("log.flush.scheduler.interval.ms")),
    "retention.bytes": (Synonym("log.retention.bytes"),),
    "retention.ms": (Synonym("log.retention.ms"), Synonym("log.retention.minutes", _MINUTES),
                     Synonym("log.retention.hours", _HOURS)),
    "max.message.bytes": (Synonym("message.max.bytes"),),
    "index.interval.bytes": (Synonym("log.index.interval.bytes"),),
    "delete.retention.ms": (Synonym("log.cleaner.delete.retention.ms"),),
    "min.compaction.lag.ms": (Synonym("log.cleaner.min.compaction.lag.ms"),),
    "max.compaction.lag.ms": (Synonym("log.cleaner.max.compaction.lag.ms"),),
    "file.delete.delay.ms": (Synonym("log.segment.delete.delay.ms"),),
    "min.cleanable.dirty.ratio": (Synonym("log.cleaner.min.cleanable.ratio"),),
    "cleanup.policy": (Synonym("log.cleanup.policy"),),
    "unclean.leader.election.enable": (Synonym("unclean.leader.election.enable"),),
    "min.insync.replicas": (Synonym("min.insync.replicas"),),
    "compression.type": (Synonym("compression.type"),),
    "preallocate": (Synonym("log.preallocate"),),
    "message.timestamp.type": (Synonym("log.message.timestamp.type"),),
    "message.timestamp.before.max.ms": (Synonym("log.message.timestamp.before.max.ms"),),
    "message.timestamp.after.max.ms": (Synonym("log.message.timestamp.after.max.ms"),),
}

# Broker configs Kafka gives no default, so that the next synonym applies (log.roll.ms
# unset: log.roll.hours), and the defaults that differ from the topic config's.
_NO_DEFAULT = frozenset({"log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms", "log.retention.ms"})


def _broker_primary(topic: str) -> ConfigDef:
    definition = TOPIC_CONFIGS[topic]
    return replace(definition, default=None if TOPIC_SYNONYMS[topic][0].name in _NO_DEFAULT else definition.default,
                   doc=f"The default of the topic config {topic} for topics that do not set it: {definition.doc}")


# The dynamic broker configs kraft accepts (per broker, or cluster-wide with an empty name):
# Kafka's dynamic log configs (the first synonym of each topic config above) and thread pools.
BROKER_CONFIGS: Mapping[str, ConfigDef] = {
    **{synonyms[0].name: _broker_primary(topic) for topic, synonyms in TOPIC_SYNONYMS.items()},
    "num.io.threads": ConfigDef("int", low=1, default="8",
                                doc="The number of threads that the server uses for processing requests."),
    "num.network.threads": ConfigDef("int", low=1, default="3", doc="The number of threads that the server uses "
                                     "for receiving requests from the network and sending responses to it."),
    "num.replica.fetchers": ConfigDef("int", low=1, default="1",
                                      doc="Number of fetcher threads used to replicate records from each source broker."),
    "log.cleaner.threads": ConfigDef("int", low=0, default="1",
                                     doc="The number of background threads to use for log cleaning."),
}

# The other synonyms: broker configs set in server.properties only (Kafka cannot change
# them dynamically either), with Kafka's defaults.
STATIC_BROKER_CONFIGS: Mapping[str, ConfigDef] = {
    "log.roll.hours": ConfigDef("int", low=1, default="168", doc="The maximum time before a new log segment is "
                                "rolled out (in hours), secondary to log.roll.ms."),
    "log.roll.jitter.hours": ConfigDef("int", low=0, default="0", doc="The maximum jitter to subtract from "
                                       "logRollTimeMillis (in hours), secondary to log.roll.jitter.ms."),
    "log.flush.scheduler.interval.ms": ConfigDef("long", default=_LONG_MAX, doc="The frequency in ms that the log "
                                                 "flusher checks whether any log needs to be flushed to disk."),
    "log.retention.minutes": ConfigDef("int", doc="The number of minutes to keep a log file before deleting it, "
                                       "secondary to log.retention.ms."),
    "log.retention.hours": ConfigDef("int", default="168", doc="The number of hours to keep a log file before "
                                     "deleting it, tertiary to log.retention.ms."),
}

DEFINITIONS: Mapping[ConfigResourceType, Mapping[str, ConfigDef]] = {
    ConfigResourceType.TOPIC: TOPIC_CONFIGS,
    ConfigResourceType.BROKER: BROKER_CONFIGS,
}


def check_configs(kind: ConfigResourceType, configs: Mapping[str, str]) -> None:
    """Validates whole configs (CreateTopics' configs): known names, valid values."""
    for name, value in configs.items():
        _definition(kind, name).check(name, value)


def _definition(kind: ConfigResourceType, name: str) -> ConfigDef:
    definition = DEFINITIONS[kind].get(name)
    if definition is None:
        raise ControllerError(Errors.INVALID_CONFIG, f"Unknown {kind.name.lower()} config name: {name}")
    return definition


def incremental_alter(
    kind: ConfigResourceType, current: Mapping[str, str], ops: Sequence[AlterConfigOp]
) -> dict[str, str | None]:
    """The configs `ops` change, as name -> new value (None: deleted), after validating them
    all: one bad op refuses the whole request, as IncrementalAlterConfigs does per resource."""
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        raise ControllerError(Errors.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(duplicates)}")
    changes: dict[str, str | None] = {}
    for op in ops:
        definition = _definition(kind, op.name)
        if op.op == OpType.DELETE:
            new: str | None = None
        elif op.value is None:
            raise ControllerError(Errors.INVALID_REQUEST, f"Null value not supported for: {op.name}")
        elif op.op == OpType.SET:
            new = op.value
        elif definition.type != "list":
            action = "append" if op.op == OpType.APPEND else "subtract"
            raise ControllerError(
                Errors.INVALID_CONFIG, f"Config value {action} is not allowed for config key: {op.name}"
            )
        else:
            present = _items(current.get(op.name, ""))
            given = _items(op.value)
            if op.op == OpType.APPEND:
                merged = present + [v for v in given if v not in present]
            else:
                merged = [v for v in present if v not in given]
            new = ",".join(merged)
        if new is not None:
            definition.check(op.name, new)
        if current.get(op.name) != new:
            changes[op.name] = new
    return changes
