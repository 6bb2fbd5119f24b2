"""The cluster-metadata state machine: records, image, deltas, controller, cache, snapshots.

* `records` / `serde`: Kafka's metadata records and their framing in log values.
* `MetadataImage`: the immutable, structurally shared state at one offset.
* `MetadataDelta` / `apply_records`: one committed batch on top of an image.
* `controller`: validation of admin operations and the records they produce.
* `MetadataCache`: what every replica holds, fed committed batches and snapshots.
* `snapshot`: an image as snapshot records and back.

Imports only `kraft.records`, the standard library and `immutables`.

Its place among the layers: docs/architecture.md.
"""

from kraft.metadata.cache import MetadataCache
from kraft.metadata.delta import MetadataDelta, apply_records
from kraft.metadata.image import (
    BrokerRegistration,
    ConfigResource,
    ConfigResourceType,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    image_to_records,
)
from kraft.metadata.image_snapshot import decode_records, image_from_records, load_snapshot, snapshot_records
from kraft.metadata.metadata_errors import (
    ControllerError,
    Errors,
    InvalidRecordError,
    MetadataError,
    MetadataRecordError,
    NotCaughtUpError,
    OffsetOrderError,
    OperationTooLargeError,
    RecordEncodeError,
    ReplayError,
)
from kraft.metadata.records import MetadataRecord, uuid_str
from kraft.metadata.serde import decode_record, encode_record

__all__ = [
    "BrokerRegistration",
    "ConfigResource",
    "ConfigResourceType",
    "ControllerError",
    "Errors",
    "InvalidRecordError",
    "MetadataCache",
    "MetadataDelta",
    "MetadataError",
    "MetadataImage",
    "MetadataRecord",
    "MetadataRecordError",
    "NotCaughtUpError",
    "OffsetOrderError",
    "OperationTooLargeError",
    "PartitionRegistration",
    "RecordEncodeError",
    "ReplayError",
    "TopicImage",
    "apply_records",
    "decode_record",
    "decode_records",
    "encode_record",
    "image_from_records",
    "image_to_records",
    "load_snapshot",
    "snapshot_records",
    "uuid_str",
]
