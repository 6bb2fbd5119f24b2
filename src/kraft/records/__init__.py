"""Kafka RecordBatch v2 and control records.

Walk batches without decoding (`iter_batches`, `iter_file_batches`), decode them for a state
machine (`read_batches` then `RecordBatch.records()`), and build them (`build_batch`,
`build_control_batch`).

Its place among the layers: docs/architecture.md.
"""

from kraft.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    RecordBatch,
    SimpleRecord,
    TimestampType,
    assign_offsets,
    build_batch,
    crc_is_valid,
    iter_batches,
    iter_file_batches,
    parse_header,
    read_batches,
    with_values,
)
from kraft.records.compression import Compression
from kraft.records.control import (
    ControlMessage,
    ControlRecordError,
    ControlType,
    EndTxnMarker,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    UnparsedControl,
    Voter,
    VoterEndpoint,
    VotersRecord,
    build_control_batch,
    decode_control_record,
)
from kraft.records.record_errors import (
    CorruptRecordError,
    IncompleteBatchError,
    RecordError,
    UnsupportedCompressionError,
)

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "Compression",
    "ControlMessage",
    "ControlRecordError",
    "ControlType",
    "CorruptRecordError",
    "EndTxnMarker",
    "IncompleteBatchError",
    "KRaftVersionRecord",
    "LeaderChangeMessage",
    "Record",
    "RecordBatch",
    "RecordError",
    "SimpleRecord",
    "SnapshotFooterRecord",
    "SnapshotHeaderRecord",
    "TimestampType",
    "UnparsedControl",
    "UnsupportedCompressionError",
    "Voter",
    "VoterEndpoint",
    "VotersRecord",
    "assign_offsets",
    "build_batch",
    "with_values",
    "build_control_batch",
    "crc_is_valid",
    "decode_control_record",
    "iter_batches",
    "iter_file_batches",
    "parse_header",
    "read_batches",
]
