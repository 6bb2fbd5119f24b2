"""Clients of a kraft cluster: a consumer with KIP-320 truncation detection.

`consumer` holds the Consumer, whom it asks and when; `fetch_answers` what a Fetch or
FetchSnapshot answer does to a partition (records, a new leader, a reset, a truncation);
`positions` where it is and the KIP-320 rule; `partition_state` each assigned partition's
position and leader; `fetched` what a fetch hands out (records, batches, a snapshot downloaded
whole); `errors` what it raises; `group_offsets` positions committed to a group with their
epochs; `security` how it reaches a secured cluster (Kafka's security.protocol, ssl.* and
sasl.* settings).
"""

from kraft.client.client_errors import (
    AuthenticationError,
    AuthorizationError,
    ConsumerError,
    LogTruncationError,
    OffsetOutOfRangeError,
)
from kraft.client.consumer import Consumer
from kraft.client.fetched import ConsumerRecord, FetchedBatches
from kraft.client.positions import OffsetAndEpoch, TopicPartition

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "Consumer",
    "ConsumerError",
    "ConsumerRecord",
    "FetchedBatches",
    "LogTruncationError",
    "OffsetAndEpoch",
    "OffsetOutOfRangeError",
    "TopicPartition",
]
