"""The metadata image at an offset, from a partition directory, as Spark tables.

`metadata_image(dir, ending_offset)` builds the image the way Kafka's tools do (KIP-630): the
latest snapshot ending at or before the offset, then every batch of the log from the
snapshot's end up to the offset, through `MetadataCache` (control batches only take their
offsets), by Kafka's replay rules: the records of an aborted transaction leave no trace, a
snapshot replays as a log (a transaction inside it applies at its end), and a record that
does not apply to the image (a removal of an ACL that is not there) is left out, as Kafka's
loader leaves it, and counted in a warning of the `kraft.spark.metadata_view` logger. The offset is exclusive and must be a
batch boundary: an image exists only between batches. The result is the image as of
`ending_offset - 1` (its `offset`), or of the log's end by default. `dir` is a
`metadata.log.dir` or the `__cluster_metadata-0` directory in it.

The image becomes one table per part, named as Kafka's metadata shell names them:

    brokers           brokerId, epoch, incarnationId, fenced, rack, listeners,
                      supportedFeatures, inControlledShutdown, isMigratingZkBroker, logDirs
    controllers       controllerId, incarnationId, zkMigrationReady, listeners, supportedFeatures
    topics            name, topicId, partitions (their count)
    partitions        topic, topicId, partition, leader, leaderEpoch, partitionEpoch, replicas,
                      isr, removingReplicas, addingReplicas, leaderRecoveryState, directories,
                      eligibleLeaderReplicas, lastKnownElr (null: none, Kafka's default)
    configs           resourceType (TOPIC, BROKER, ...), resourceName, name, value
    features          name, level (metadata.version among them)
    acls              id, resourceType, resourceName, patternType, principal, host,
                      operation, permissionType (Kafka's enum names)
    clientQuotas      entity (entityType, entityName: null for the default entity), key, value
    scramCredentials  user, mechanism (SCRAM-SHA-256, ...), iterations: never the salt or
                      the keys, which are as good as the password to an offline attack
    delegationTokens  tokenId, owner, requester, renewers, issueTimestamp, maxTimestamp,
                      expirationTimestamp
    producerIds       nextProducerId (no row before the first block is allocated)
    provenance        offset, epoch: what the image is as of; zkMigrationState (null if no
                      ZkMigrationStateRecord was written; Kafka keeps it with the features)

Ids are in Kafka's text form (`uuid_str`). Tables are built column by column (a million
partitions are a few `zip(*...)` and Arrow conversions, no Python code per partition). Two
ways in: `metadata_frames(spark, dir)` builds the image once, on the driver, and returns
every table; the "kraft-metadata" source reads one table (`option("table", ...)`) in a Spark
task, for SQL and for readers that want only one table.
"""

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import attrgetter

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from kraft.metadata import MetadataCache, MetadataError, MetadataImage
from kraft.metadata.image import ConfigResourceType
from kraft.spark.json_columns import uuid_lists, uuid_strings
from kraft.spark.logdir import LogDirectory, LogDirError, named, open_snapshot, read_slice
from kraft.spark.options import Options
from kraft.spark.rows import arrow_schema, struct_of

log = logging.getLogger("kraft.spark.metadata_view")

_IDS = ArrayType(IntegerType(), False)
_UUIDS = ArrayType(StringType(), False)
_LISTENERS = ArrayType(struct_of(
    ("name", StringType()), ("host", StringType()), ("port", IntegerType()), ("securityProtocol", IntegerType())
), False)
_FEATURES = ArrayType(struct_of(("name", StringType()), ("minVersion", IntegerType()), ("maxVersion", IntegerType())),
                      False)
_ENTITY = ArrayType(struct_of(("entityType", StringType()), ("entityName", StringType(), True)), False)

TABLES: dict[str, StructType] = {
    "brokers": struct_of(
        ("brokerId", IntegerType()),
        ("epoch", LongType()),
        ("incarnationId", StringType()),
        ("fenced", BooleanType()),
        ("rack", StringType(), True),
        ("listeners", _LISTENERS),
        ("supportedFeatures", _FEATURES),
        ("inControlledShutdown", BooleanType()),
        ("isMigratingZkBroker", BooleanType()),
        ("logDirs", _UUIDS),
    ),
    "controllers": struct_of(
        ("controllerId", IntegerType()),
        ("incarnationId", StringType()),
        ("zkMigrationReady", BooleanType()),
        ("listeners", _LISTENERS),
        ("supportedFeatures", _FEATURES),
    ),
    "topics": struct_of(("name", StringType()), ("topicId", StringType()), ("partitions", IntegerType())),
    "partitions": struct_of(
        ("topic", StringType()),
        ("topicId", StringType()),
        ("partition", IntegerType()),
        ("leader", IntegerType()),
        ("leaderEpoch", IntegerType()),
        ("partitionEpoch", IntegerType()),
        ("replicas", _IDS),
        ("isr", _IDS),
        ("removingReplicas", _IDS),
        ("addingReplicas", _IDS),
        ("leaderRecoveryState", IntegerType()),
        ("directories", _UUIDS),
        ("eligibleLeaderReplicas", _IDS, True),
        ("lastKnownElr", _IDS, True),
    ),
    "configs": struct_of(
        ("resourceType", StringType()), ("resourceName", StringType()), ("name", StringType()), ("value", StringType())
    ),
    "features": struct_of(("name", StringType()), ("level", IntegerType())),
    "acls": struct_of(
        ("id", StringType()),
        ("resourceType", StringType()),
        ("resourceName", StringType()),
        ("patternType", StringType()),
        ("principal", StringType()),
        ("host", StringType()),
        ("operation", StringType()),
        ("permissionType", StringType()),
    ),
    "clientQuotas": struct_of(("entity", _ENTITY), ("key", StringType()), ("value", DoubleType())),
    "scramCredentials": struct_of(("user", StringType()), ("mechanism", StringType()), ("iterations", IntegerType())),
    "delegationTokens": struct_of(
        ("tokenId", StringType()),
        ("owner", StringType()),
        ("requester", StringType()),
        ("renewers", ArrayType(StringType(), False)),
        ("issueTimestamp", TimestampType()),
        ("maxTimestamp", TimestampType()),
        ("expirationTimestamp", TimestampType()),
    ),
    "producerIds": struct_of(("nextProducerId", LongType())),
    "provenance": struct_of(("offset", LongType()), ("epoch", IntegerType()), ("zkMigrationState", IntegerType(), True)),
}

# Kafka's enums as AccessControlEntryRecord and UserScramCredentialRecord carry them (by id).
_RESOURCE_TYPES = ("UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")
_PATTERN_TYPES = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
_OPERATIONS = ("UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
               "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
               "TWO_PHASE_COMMIT")
_PERMISSION_TYPES = ("UNKNOWN", "ANY", "DENY", "ALLOW")
_SCRAM_MECHANISMS = ("UNKNOWN", "SCRAM-SHA-256", "SCRAM-SHA-512")


# ------------------------------------------------------------------------------ the image


def metadata_image(path: str, ending_offset: int | None = None) -> MetadataImage:
    """The image as of `ending_offset - 1` (the log's end by default): the latest snapshot
    ending at or before it, then the log after that snapshot. Damage raises with the file's
    name; a batch that breaks the transactions' structure raises LogDirError naming the file
    and its offsets; records that do not apply are left out and counted in one warning."""
    view = LogDirectory(path).plan_view(from_snapshot=True, high=ending_offset)
    unapplied: Counter[str] = Counter()
    cache = MetadataCache(on_unapplied=lambda offset, record, error: unapplied.update([type(record).__name__]))
    if view.snapshot is not None:
        sid = view.snapshot.snapshot_id
        try:
            cache.load_snapshot(open_snapshot(view.snapshot).records(), end_offset=sid.end_offset, epoch=sid.epoch)
        except MetadataError as e:
            raise LogDirError(f"{view.snapshot.path}: the snapshot does not load as metadata: {e}") from None
    for piece in view.slices:
        for batch in read_slice(piece, view.low, view.high):
            h = batch.header
            where = {"base_offset": h.base_offset, "last_offset": h.last_offset, "epoch": h.partition_leader_epoch}
            try:
                if h.is_control:
                    cache.advance(**where)
                else:
                    with named(piece.path):
                        cache.apply_batch(batch.records(), **where)
            except MetadataError as e:
                raise LogDirError(
                    f"{piece.path}: the batch at offsets {h.base_offset}..{h.last_offset} (position {h.position}) "
                    f"does not apply to the metadata image: {e}"
                ) from None
    if unapplied:
        log.warning("%s: %d record(s) do not apply to the image and were left out, as Kafka's loader leaves them "
                    "out: %s", path, sum(unapplied.values()),
                    ", ".join(f"{n} {kind}" for kind, n in sorted(unapplied.items())))
    return cache.image


# ------------------------------------------------------------------------------ image -> tables

Columns = list  # a table's columns in schema order: Python lists or Arrow arrays


def _named(names: tuple[str, ...], ids: tuple[int, ...] | list[int]) -> list[str]:
    """Kafka's names of enum ids; an id this build does not know shows as its number."""
    return [names[i] if 0 <= i < len(names) else str(i) for i in ids]


def _sorted_values(table: Mapping) -> list:
    """The values of an immutables.Map, ordered by key."""
    return [table[k] for k in sorted(table.keys())]


def _columns(rows: list, width: int) -> list:
    return list(zip(*rows)) if rows else [()] * width


def _listeners(endpoints: tuple) -> list[tuple]:
    return [(e.name, e.host, e.port, e.security_protocol) for e in endpoints]


def _features(features: tuple) -> list[tuple]:
    return [(f.name, f.min_supported_version, f.max_supported_version) for f in features]


def _brokers(image: MetadataImage) -> Columns:
    brokers = _sorted_values(image.brokers)
    (ids, epochs, incarnations, endpoints, features, racks, fenced, shutdown, migrating,
     log_dirs) = _columns(brokers, 10)
    return [ids, epochs, uuid_strings(list(incarnations)), fenced, racks, list(map(_listeners, endpoints)),
            list(map(_features, features)), shutdown, migrating, uuid_lists(list(log_dirs))]


def _controllers(image: MetadataImage) -> Columns:
    ids, incarnations, ready, endpoints, features = _columns(_sorted_values(image.controllers), 5)
    return [ids, uuid_strings(list(incarnations)), ready, list(map(_listeners, endpoints)),
            list(map(_features, features))]


def _topics(image: MetadataImage) -> Columns:
    topics = _sorted_values(image.topics_by_name)
    names, ids, partitions = _columns(topics, 3)
    return [names, uuid_strings(list(ids)), list(map(len, partitions))]


def _partitions(image: MetadataImage) -> Columns:
    """Every partition of every topic by name, a column at a time: the registrations are
    NamedTuples, transposed by one zip; a topic's name and id are repeated per partition."""
    topics = _sorted_values(image.topics_by_name)
    counts = [len(t.partitions) for t in topics]
    names = list(chain.from_iterable(map(repeat, (t.name for t in topics), counts)))
    which = pa.array(chain.from_iterable(map(repeat, range(len(topics)), counts)), pa.int32())
    ids = pc.take(uuid_strings([t.id for t in topics]), which)
    pids = list(chain.from_iterable(map(range, counts)))
    registrations = list(chain.from_iterable(t.partitions for t in topics))
    (replicas, isr, removing, adding, leader, recovery, leader_epoch, partition_epoch, directories, elr,
     last_known_elr) = _columns(registrations, 11)
    return [names, ids, pids, leader, leader_epoch, partition_epoch, replicas, isr, removing, adding, recovery,
            uuid_lists(list(directories)), elr, last_known_elr]


def _configs(image: MetadataImage) -> Iterator[tuple]:
    for resource in sorted(image.configs.keys()):
        entries = image.configs[resource]
        for key in sorted(entries.keys()):
            yield ConfigResourceType(resource.type).name, resource.name, key, entries[key]


def _features_table(image: MetadataImage) -> Columns:
    return [list(image.features.keys()), list(image.features.values())] if image.features else [[], []]


def _attributes(records: list, *names: str) -> list[list]:
    """Columns of records that are not tuples (the image keeps ACLs and tokens as records)."""
    return [list(map(attrgetter(name), records)) for name in names]


def _acls(image: MetadataImage) -> Columns:
    (ids, resource_types, resource_names, pattern_types, principals, hosts, operations, permissions) = _attributes(
        _sorted_values(image.acls), "id", "resource_type", "resource_name", "pattern_type", "principal", "host",
        "operation", "permission_type")
    return [uuid_strings(list(ids)), _named(_RESOURCE_TYPES, resource_types), resource_names,
            _named(_PATTERN_TYPES, pattern_types), principals, hosts, _named(_OPERATIONS, operations),
            _named(_PERMISSION_TYPES, permissions)]


def _client_quotas(image: MetadataImage) -> Iterator[tuple]:
    for entity in sorted(image.client_quotas.keys(), key=lambda e: tuple((t, n or "") for t, n in e)):
        quotas = image.client_quotas[entity]
        for key in sorted(quotas.keys()):
            yield list(entity), key, quotas[key]


def _scram_credentials(image: MetadataImage) -> Columns:
    keys = sorted(image.scram_credentials.keys())
    users, mechanisms = _columns(keys, 2)
    return [users, _named(_SCRAM_MECHANISMS, mechanisms), [image.scram_credentials[k].iterations for k in keys]]


def _millis(values: Sequence[int]) -> pa.Array:
    """Kafka's epoch milliseconds as a timestamp column (microseconds, UTC)."""
    return pc.multiply(pa.array(values, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC"))


def _delegation_tokens(image: MetadataImage) -> Columns:
    (owners, requesters, renewers, issued, max_times, expires, token_ids) = _attributes(
        _sorted_values(image.delegation_tokens), "owner", "requester", "renewers", "issue_timestamp",
        "max_timestamp", "expiration_timestamp", "token_id")
    return [token_ids, owners, requesters, renewers, _millis(issued), _millis(max_times), _millis(expires)]


def _producer_ids(image: MetadataImage) -> Columns:
    return [[image.next_producer_id] if image.next_producer_id >= 0 else []]


def _provenance(image: MetadataImage) -> Columns:
    state = image.zk_migration_state
    return [[image.offset], [image.epoch], [state if state >= 0 else None]]


def _rows(build: Callable[[MetadataImage], Iterator[tuple]], width: int) -> Callable[[MetadataImage], Columns]:
    """A table whose rows are few (one per config entry, per quota) built row by row."""
    return lambda image: _columns(list(build(image)), width)


_BUILDERS: dict[str, Callable[[MetadataImage], Columns]] = {
    "brokers": _brokers,
    "controllers": _controllers,
    "topics": _topics,
    "partitions": _partitions,
    "configs": _rows(_configs, 4),
    "features": _features_table,
    "acls": _acls,
    "clientQuotas": _rows(_client_quotas, 3),
    "scramCredentials": _scram_credentials,
    "delegationTokens": _delegation_tokens,
    "producerIds": _producer_ids,
    "provenance": _provenance,
}


def image_table(image: MetadataImage, table: str) -> pa.Table:
    """One table of the image, column-wise in Arrow, with the schema `TABLES[table]`."""
    schema = arrow_schema(TABLES[table])
    columns = [c.cast(f.type) if isinstance(c, pa.Array) else pa.array(c, f.type)
               for c, f in zip(_BUILDERS[table](image), schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def metadata_frames(spark: SparkSession, path: str, ending_offset: int | None = None) -> dict[str, DataFrame]:
    """Every table of the image at `ending_offset` (see `metadata_image`), built once."""
    image = metadata_image(path, ending_offset)
    return {name: spark.createDataFrame(image_table(image, name), schema=TABLES[name]) for name in TABLES}


# ------------------------------------------------------------------------------ the data source


class KraftMetadataReader(DataSourceReader):
    def __init__(self, options: Options, table: str) -> None:
        self.path = options.path()
        self.ending_offset = options.ending_offset()
        self.table = table

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from image_table(metadata_image(self.path, self.ending_offset), self.table).to_batches()


class KraftMetadataDataSource(DataSource):
    """`spark.read.format("kraft-metadata").option("table", "partitions").load(dir)`;
    options `table` (required: one of TABLES) and `endingOffsets` ("latest" or an offset)."""

    @classmethod
    def name(cls) -> str:
        return "kraft-metadata"

    def _options(self) -> tuple[Options, str]:
        options = Options(self.name(), self.options, ("table", "endingOffsets"))
        table = options.get("table", "")
        if table not in TABLES:
            raise ValueError(f"{self.name()}: option table is {table!r}; expected one of {list(TABLES)}")
        return options, table

    def schema(self) -> StructType:
        return TABLES[self._options()[1]]

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftMetadataReader(*self._options())
