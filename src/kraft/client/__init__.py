"""Clients of a kraft cluster: a consumer with KIP-320 truncation detection."""

from kraft.client.consumer import (
    Consumer,
    ConsumerError,
    ConsumerRecord,
    LogTruncationError,
    OffsetAndEpoch,
    OffsetOutOfRangeError,
    TopicPartition,
)

__all__ = [
    "Consumer",
    "ConsumerError",
    "ConsumerRecord",
    "LogTruncationError",
    "OffsetAndEpoch",
    "OffsetOutOfRangeError",
    "TopicPartition",
]
