"""Which configs may be set, their types and ranges, and IncrementalAlterConfigs' four ops.

Names, types and bounds are Kafka's (TopicConfig and the dynamic broker configs). Values
are kept as the strings the client sent, as Kafka keeps them; only their validity is
checked here. An unknown name or a value of the wrong type is INVALID_CONFIG; appending to
or subtracting from a config that is not a list is INVALID_CONFIG too.
"""

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kraft.metadata.errors import ControllerError, Errors
from kraft.metadata.image import ConfigResourceType

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

TOPIC_CONFIGS: Mapping[str, ConfigDef] = {
    "cleanup.policy": ConfigDef("list", choices=frozenset({"compact", "delete"})),
    "compression.type": ConfigDef("string", choices=_COMPRESSION),
    "delete.retention.ms": ConfigDef("long", low=0),
    "file.delete.delay.ms": ConfigDef("long", low=0),
    "flush.messages": ConfigDef("long", low=1),
    "flush.ms": ConfigDef("long", low=0),
    "index.interval.bytes": ConfigDef("int", low=0),
    "max.compaction.lag.ms": ConfigDef("long", low=1),
    "max.message.bytes": ConfigDef("int", low=0),
    "message.timestamp.type": ConfigDef("string", choices=frozenset({"CreateTime", "LogAppendTime"})),
    "message.timestamp.before.max.ms": ConfigDef("long", low=0),
    "message.timestamp.after.max.ms": ConfigDef("long", low=0),
    "min.cleanable.dirty.ratio": ConfigDef("double", low=0, high=1),
    "min.compaction.lag.ms": ConfigDef("long", low=0),
    "min.insync.replicas": ConfigDef("int", low=1),
    "preallocate": ConfigDef("boolean"),
    "retention.bytes": ConfigDef("long"),
    "retention.ms": ConfigDef("long", low=-1),
    "segment.bytes": ConfigDef("int", low=14),
    "segment.index.bytes": ConfigDef("int", low=4),
    "segment.jitter.ms": ConfigDef("long", low=0),
    "segment.ms": ConfigDef("long", low=1),
    "unclean.leader.election.enable": ConfigDef("boolean"),
}

# The dynamic broker configs kraft accepts (per broker, or cluster-wide with an empty name).
BROKER_CONFIGS: Mapping[str, ConfigDef] = {
    "log.cleanup.policy": TOPIC_CONFIGS["cleanup.policy"],
    "log.retention.bytes": TOPIC_CONFIGS["retention.bytes"],
    "log.retention.ms": TOPIC_CONFIGS["retention.ms"],
    "log.segment.bytes": TOPIC_CONFIGS["segment.bytes"],
    "message.max.bytes": TOPIC_CONFIGS["max.message.bytes"],
    "min.insync.replicas": TOPIC_CONFIGS["min.insync.replicas"],
    "compression.type": TOPIC_CONFIGS["compression.type"],
    "unclean.leader.election.enable": TOPIC_CONFIGS["unclean.leader.election.enable"],
    "num.io.threads": ConfigDef("int", low=1),
    "num.network.threads": ConfigDef("int", low=1),
    "num.replica.fetchers": ConfigDef("int", low=1),
    "log.cleaner.threads": ConfigDef("int", low=0),
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
