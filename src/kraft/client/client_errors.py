"""What the consumer raises: one base class; the two answers a caller acts on by position;
and the two a caller cannot retry its way out of (Kafka's consumer raises them at once too):
its credentials or certificate refused, or its principal not allowed the topic. `error_for`
turns an answer's error code into the one to raise."""

from kraft.client.positions import OffsetAndEpoch, TopicPartition
from kraft.protocol import ErrorCode

NOT_AUTHORIZED = {ErrorCode.topic_authorization_failed, ErrorCode.cluster_authorization_failed}


class ConsumerError(Exception):
    pass


class LogTruncationError(ConsumerError):
    """The log lost records this consumer had read. `divergent_offsets[tp]` is the first
    offset known to diverge, with the leader's epoch there (what to seek() to in order to
    go on), or None if the leader could not say."""

    def __init__(self, divergent_offsets: dict[TopicPartition, OffsetAndEpoch | None]) -> None:
        detail = ", ".join(
            f"{tp}: first diverging offset {at.offset} (leader epoch {at.leader_epoch})" if at is not None
            else f"{tp}: the leader cannot say where its log diverges" for tp, at in divergent_offsets.items())
        super().__init__(f"log truncation detected ({detail})")
        self.divergent_offsets = divergent_offsets


class OffsetOutOfRangeError(ConsumerError):
    def __init__(self, partitions: dict[TopicPartition, int]) -> None:
        super().__init__(f"offsets out of range: {', '.join(f'{tp} at {o}' for tp, o in partitions.items())}")
        self.partitions = partitions


class AuthenticationError(ConsumerError):
    """A server refused the consumer's SASL login or TLS handshake (a wrong password, a
    mechanism it does not offer, a certificate it or the consumer does not trust)."""


class AuthorizationError(ConsumerError):
    """The cluster's ACLs do not allow the consumer's principal what it asked."""


def error_for(what: str, code: ErrorCode) -> ConsumerError:
    """The error to raise for `code` in the answer to `what`: AuthorizationError for an ACL's
    refusal, else ConsumerError naming the code."""
    if code in NOT_AUTHORIZED:
        return AuthorizationError(f"{what}: {code.name.upper()}: the cluster's ACLs do not allow this consumer's principal "
                                  "to read it")
    return ConsumerError(f"{what}: {code.name}")
