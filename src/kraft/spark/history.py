"""The metadata log as decoded records: what `option("decode", "metadata")` gives.

One row per record of the log (and of a snapshot the read starts from), in `HISTORY_SCHEMA`:

    offset         long       as in the Kafka rows (a snapshot's rows: its last offset)
    leaderEpoch    int
    timestamp      timestamp  UTC
    snapshot       struct<endOffset: long, epoch: int>: the snapshot a row comes from
                   (Kafka's snapshot id, as its file is named); null for the log's rows
    isControl      boolean
    type           string     Kafka's MetadataRecordType name (TOPIC_RECORD, ...), a control
                              record's ControlRecordType name (LEADER_CHANGE, ...), or UNKNOWN
                              for a record kraft cannot decode (a newer type or version)
    version        int        the record's version (null if not even its frame reads)
    fields         string     the record as Kafka's JSON converters write it (camelCase
                              names, see json_columns); null for UNKNOWN
    value          binary     the record's value as stored, for UNKNOWN rows above all
    topic          string     the topic a record is about, by name (below)
    topicId        string     in Kafka's text form: TopicRecord, PartitionRecord,
                              PartitionChangeRecord, RemoveTopicRecord
    partition      int        PartitionRecord, PartitionChangeRecord
    leader         int        PartitionRecord; PartitionChangeRecord when it names one (-1:
                              no leader), null when the leader did not change
    isr, replicas  array<int> PartitionRecord; PartitionChangeRecord when they changed
    broker         int        the broker of broker records (register, unregister, fence,
                              unfence, registration change)

Topic names. A TopicRecord carries the name and id; later records carry only the id. Ids
are never reused and a topic is never renamed, so the id -> name map of a read holds for
every offset in it, and resolving is a join against that map, not a walk in offset order:
each Arrow batch looks its ids up at once (`pc.index_in`), whichever task reads it. The
reader's planner builds the map (`TopicNames.scan`) from the read's own TopicRecords, reading
only batches whose bytes hold a TopicRecord's frame header, and ships it to the tasks. A
ConfigRecord for a topic and a ClearElrRecord name their topic themselves.

Decoding is column-wise like `rows.to_arrow`: the rows of an Arrow batch are grouped by
(type, version) through the dictionary of their values' three frame-header bytes, each group
is decoded by the C reader in one `map` and turned into JSON and typed columns a field at a
time (`json_columns`), and the groups' columns are put back in offset order with one `take`.
"""

import json
from collections.abc import Iterable, Iterator
from operator import attrgetter, methodcaller

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from kraft.metadata import ConfigResourceType, MetadataRecordError, decode_record
from kraft.metadata.collector import collector_paused
from kraft.metadata.kafka_form import control_data, type_name
from kraft.metadata.records import (
    NO_LEADER_CHANGE,
    RECORD_TYPES,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from kraft.metadata.schema import schema_of
from kraft.metadata.serde import FRAME_VERSION
from kraft.records import (
    Compression,
    ControlRecordError,
    RecordBatch,
    SimpleRecord,
    UnparsedControl,
    decode_control_record,
)
from kraft.spark.json_columns import object_texts, uuid_strings
from kraft.spark.rows import SNAPSHOT_TYPE, arrow_schema, struct_of

UNKNOWN = "UNKNOWN"
_IDS = ArrayType(IntegerType(), False)

HISTORY_SCHEMA = struct_of(
    ("offset", LongType()),
    ("leaderEpoch", IntegerType()),
    ("timestamp", TimestampType()),
    ("snapshot", SNAPSHOT_TYPE, True),
    ("isControl", BooleanType()),
    ("type", StringType()),
    ("version", IntegerType(), True),
    ("fields", StringType(), True),
    ("value", BinaryType(), True),
    ("topic", StringType(), True),
    ("topicId", StringType(), True),
    ("partition", IntegerType(), True),
    ("leader", IntegerType(), True),
    ("isr", _IDS, True),
    ("replicas", _IDS, True),
    ("broker", IntegerType(), True),
)
HISTORY_ARROW_SCHEMA = arrow_schema(HISTORY_SCHEMA)
_DECODED = ("type", "version", "fields", "topic", "topicId", "partition", "leader", "isr", "replicas", "broker")
_TYPES = {name: HISTORY_ARROW_SCHEMA.field(name).type for name in _DECODED}


def api_key(cls: type) -> int:
    """The API key of a metadata record type (its schema's: only struct types have none)."""
    key = schema_of(cls).api_key
    if key is None:
        raise TypeError(f"{cls.__name__} is not a metadata record type")
    return key


# Groups: 0 control records, 1 UNKNOWN, then one per (record type, version) kraft reads.
_CONTROL, _UNKNOWN = 0, 1
_GROUPS: list[tuple[type, int]] = [
    (cls, v) for cls in RECORD_TYPES for v in range(schema_of(cls).versions[0], schema_of(cls).versions[1] + 1)
]
_GROUP_OF = {(api_key(cls), v): 2 + i for i, (cls, v) in enumerate(_GROUPS)}
_TYPE_NAMES = {cls: type_name(cls) for cls in RECORD_TYPES}


def _frame(head: bytes | None) -> tuple[int, int | None]:
    """(group, version) of a value from its first three bytes: frame version, API key and
    version, each a one-byte varint in every record Kafka defines. A value whose header
    says otherwise is UNKNOWN; its version is given when the header reads."""
    if head is None or len(head) < 3 or head[0] != FRAME_VERSION or head[1] >= 0x80 or head[2] >= 0x80:
        return _UNKNOWN, None
    return _GROUP_OF.get((head[1], head[2]), _UNKNOWN), head[2]


# ------------------------------------------------------------------------------ typed columns

_BROKER_FIELD = {RegisterBrokerRecord: "broker_id", UnregisterBrokerRecord: "broker_id", FenceBrokerRecord: "id",
                 UnfenceBrokerRecord: "id", BrokerRegistrationChangeRecord: "broker_id"}
_PARTITION_FIELDS = {"topicId": "topic_id", "partition": "partition_id", "leader": "leader", "isr": "isr",
                     "replicas": "replicas"}


def _typed(cls: type, typed: dict) -> dict[str, pa.Array]:
    """The typed history columns a record type fills, from its fields' typed columns (a
    tagged field left at its default throughout a group has none: its column stays null)."""
    if cls is TopicRecord:
        return {"topic": typed["name"], "topicId": typed["topic_id"]}
    if cls is PartitionRecord or cls is PartitionChangeRecord:
        out = {column: typed[name] for column, name in _PARTITION_FIELDS.items() if name in typed}
        if "leader" in out and cls is PartitionChangeRecord:
            leader = out["leader"]
            out["leader"] = pc.if_else(pc.equal(leader, NO_LEADER_CHANGE), pa.scalar(None, leader.type), leader)
        return out
    if cls is RemoveTopicRecord:
        return {"topicId": typed["topic_id"]}
    if cls is ConfigRecord:
        is_topic = pc.equal(typed["resource_type"], int(ConfigResourceType.TOPIC))
        return {"topic": pc.if_else(is_topic, typed["resource_name"], pa.scalar(None, pa.string()))}
    if cls is ClearElrRecord:  # an empty name clears every topic's ELR
        name = typed["topic_name"]
        return {"topic": pc.if_else(pc.equal(name, ""), pa.scalar(None, pa.string()), name)}
    if cls in _BROKER_FIELD:
        return {"broker": typed[_BROKER_FIELD[cls]]}
    return {}


# ------------------------------------------------------------------------------ control records


def _control_rows(keys: list, values: list) -> dict[str, pa.Array]:
    """Control records, one at a time: a log has one per election or snapshot, not per change."""
    types: list[str] = []
    versions: list[int | None] = []
    texts: list[str | None] = []
    for key, value in zip(keys, values):
        try:
            message = decode_control_record(SimpleRecord(key, value))
        except ControlRecordError:  # a key or value that does not parse
            message = None
        if message is None or isinstance(message, UnparsedControl):  # or a type this build does not read
            types.append(UNKNOWN)
            versions.append(None)
            texts.append(None)
            continue
        kind, data = control_data(message)
        types.append(kind)
        versions.append(message.version)
        texts.append(json.dumps(data, separators=(",", ":")))
    return {"type": pa.array(types, pa.string()), "version": pa.array(versions, pa.int32()),
            "fields": pa.array(texts, pa.string())}


# ------------------------------------------------------------------------------ topic names

_TOPIC_HEAD = bytes([FRAME_VERSION, api_key(TopicRecord), 0])
_is_topic_record = methodcaller("startswith", _TOPIC_HEAD)
_value = attrgetter("value")


class TopicNames:
    """Topic id (Kafka's text form) -> name, for the topics whose TopicRecord a read holds.
    Plain lists, so that it pickles small: it travels to every task of a read."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.names: list[str] = []

    def __len__(self) -> int:
        return len(self.ids)

    def scan(self, batches: Iterable[RecordBatch]) -> None:
        """Adds the TopicRecords of `batches`. Only a batch whose bytes hold a TopicRecord's
        frame header (or that is compressed) is decoded, and of it only those records."""
        found: list[TopicRecord] = []
        for batch in batches:
            h = batch.header
            if h.is_control or (h.compression == Compression.NONE and _TOPIC_HEAD not in bytes(batch.data)):
                continue
            for value in filter(_is_topic_record, filter(None, map(_value, batch.records()))):
                try:
                    record = decode_record(value)
                except MetadataRecordError:
                    continue  # its row says UNKNOWN; it names no topic
                if isinstance(record, TopicRecord):  # always, by its frame header
                    found.append(record)
        self.ids += uuid_strings([r.topic_id for r in found]).to_pylist()
        self.names += [r.name for r in found]

    def lookup(self, topic_ids: pa.Array) -> pa.Array:
        """The names of `topic_ids` (null where unknown), all at once."""
        if not self.ids:
            return pa.nulls(len(topic_ids), pa.string())
        at = pc.index_in(topic_ids, value_set=pa.array(self.ids, pa.string()))
        return pc.take(pa.array(self.names, pa.string()), at)


# ------------------------------------------------------------------------------ Kafka rows -> history rows


class _Pieces:
    """The decoded columns of an Arrow batch's rows, made group by group: each piece is some
    rows (their positions in the batch) and the columns made for them."""

    def __init__(self) -> None:
        self.positions: list[pa.Array] = []
        self.columns: list[dict[str, pa.Array]] = []

    def add(self, positions: pa.Array, columns: dict[str, pa.Array]) -> None:
        self.positions.append(positions)
        self.columns.append(columns)

    def unknown(self, positions: pa.Array, versions: pa.Array) -> None:
        n = len(positions)
        self.add(positions, {"type": pa.repeat(pa.scalar(UNKNOWN), n).cast(pa.string()), "version": versions})

    def assemble(self) -> dict[str, pa.Array]:
        """Every decoded column, in the batch's row order: pieces are concatenated and put
        back by the inverse of their concatenated positions."""
        back = pc.sort_indices(pa.concat_arrays(self.positions))
        out = {}
        for name, data_type in _TYPES.items():
            parts = [c[name].cast(data_type) if name in c else pa.nulls(len(p), data_type)
                     for p, c in zip(self.positions, self.columns)]
            out[name] = pc.take(pa.concat_arrays(parts), back)
        return out


def _decoded_or_none(value: bytes) -> MetadataRecord | None:
    try:
        return decode_record(value)
    except MetadataRecordError:
        return None


def _decode_group(pieces: _Pieces, cls: type, version: int, positions: pa.Array, values: list,
                  versions: pa.Array) -> None:
    """One (type, version) group's rows. A value that does not decode though its header is
    known (a malformed record) becomes an UNKNOWN row; then the group is decoded one by one."""
    try:
        records = list(map(decode_record, values))
    except MetadataRecordError:
        decoded = list(map(_decoded_or_none, values))
        good = pa.array([r is not None for r in decoded])
        bad = pc.invert(good)
        pieces.unknown(positions.filter(bad), versions.filter(bad))
        positions, versions = positions.filter(good), versions.filter(good)
        records = [r for r in decoded if r is not None]
        if not records:
            return
    texts, typed = object_texts(cls, version, records)
    name = pa.repeat(pa.scalar(_TYPE_NAMES[cls]), len(records)).cast(pa.string())
    pieces.add(positions, {"type": name, "version": versions, "fields": texts, **_typed(cls, typed)})


def decode(raw: pa.RecordBatch, names: TopicNames) -> pa.RecordBatch:
    """The history rows of one Arrow batch of Kafka rows (`rows.RECORD_SCHEMA`, with or
    without headers; a snapshot's rows keep their `snapshot` mark). The cyclic collector is paused
    meanwhile, as for a snapshot load (kraft.metadata.collector): a batch makes tens of
    thousands of records and values, none in a cycle, and the young collections they set
    off took 80% of the decoding time (0.9 s of the 1.1 s spent in the C reader for a
    million records, measured)."""
    with collector_paused():
        return _decode(raw, names)


def _decode(raw: pa.RecordBatch, names: TopicNames) -> pa.RecordBatch:
    values = raw.column("value")
    heads = pc.binary_slice(values, 0, 3).dictionary_encode()
    frames = [_frame(h) for h in heads.dictionary.to_pylist()]
    group = pc.fill_null(pc.take(pa.array([g for g, _ in frames], pa.int32()), heads.indices), _UNKNOWN)
    group = pc.if_else(raw.column("isControl"), _CONTROL, group)
    version = pc.take(pa.array([v for _, v in frames], pa.int32()), heads.indices)
    order = pc.sort_indices(group)
    runs = pc.run_end_encode(pc.take(group, order))
    pieces, start = _Pieces(), 0
    for g, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
        positions = order[start:end]
        start = end
        if g == _CONTROL:
            keys = pc.take(raw.column("key"), positions).to_pylist()
            pieces.add(positions, _control_rows(keys, pc.take(values, positions).to_pylist()))
        elif g == _UNKNOWN:
            pieces.unknown(positions, pc.take(version, positions))
        else:
            cls, v = _GROUPS[g - 2]
            group_values = pc.take(values, positions).to_pylist()
            _decode_group(pieces, cls, v, positions, group_values, pc.take(version, positions))
    decoded = pieces.assemble()
    decoded["topic"] = pc.coalesce(decoded["topic"], names.lookup(decoded["topicId"]))
    columns = {name: raw.column(name) for name in ("offset", "leaderEpoch", "timestamp", "snapshot", "isControl",
                                                  "value")}
    columns |= decoded
    return pa.RecordBatch.from_arrays([columns[f.name] for f in HISTORY_ARROW_SCHEMA], schema=HISTORY_ARROW_SCHEMA)


def decode_all(raw: Iterable[pa.RecordBatch], names: TopicNames) -> Iterator[pa.RecordBatch]:
    """`decode` of every batch of `raw`."""
    for batch in raw:
        yield decode(batch, names)

