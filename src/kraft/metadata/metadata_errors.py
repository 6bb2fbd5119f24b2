"""Errors of the metadata state machine, and the Kafka error codes the controller answers with.

Three kinds of trouble, kept apart because each has a different owner:

* `MetadataRecordError`: bytes that are not a metadata record we can read (unknown API key
  or version, truncated or trailing bytes). The log or snapshot is damaged or newer than
  this build. Its twin on the way out, `RecordEncodeError`: a record whose field cannot be
  written (a number out of range for its type, a string over Kafka's 32767 bytes).
* `InvalidRecordError`: a well-formed record that contradicts the image it is replayed on
  (a partition of an unknown topic, fencing a broker at the wrong epoch). Only a faulty
  controller writes one; every replica refuses it identically, and the batch it came in
  leaves the image untouched.
* `ControllerError`: an admin operation that is refused. It carries a Kafka error code, so
  a server can answer the client in Kafka's words, and it is raised before any record is
  produced. `OperationTooLargeError`, one kind of it, refuses a whole request however
  many topics it names (Kafka's cap on the records of one user operation).
"""

import enum


class Errors(enum.IntEnum):
    """The Kafka error codes the controller uses (names and numbers from Kafka's Errors.java)."""

    UNKNOWN_SERVER_ERROR = -1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    STALE_BROKER_EPOCH = 77
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INVALID_UPDATE_VERSION = 95
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102


class MetadataError(Exception):
    """Base class of the metadata layer's errors."""


class MetadataRecordError(MetadataError):
    """A record value that does not decode as a metadata record this build knows."""


class RecordEncodeError(MetadataError, ValueError):
    """A record that cannot be written; a ValueError too, as any bad value given to a codec."""


class InvalidRecordError(MetadataError):
    """A committed record that cannot be applied to the image it follows."""


class ReplayError(MetadataError):
    """A committed record that cannot be replayed: it does not decode (a type or version
    newer than this build, or damage) or it contradicts the image. The replica stops there,
    as Kafka's metadata loader does, with the offset in the message."""

    def __init__(self, offset: int, reason: object) -> None:
        super().__init__(f"cannot replay the metadata record at offset {offset}: {reason}")
        self.offset = offset


class OffsetOrderError(MetadataError):
    """A batch handed to the metadata cache out of offset order (a gap or a regression)."""


class NotCaughtUpError(MetadataError):
    """A read asked for an offset the metadata cache has not applied yet."""


class ControllerError(MetadataError):
    """An operation the controller refuses: a Kafka error code and a message for the client."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error
        self.message = message


class OperationTooLargeError(ControllerError):
    """An operation that would write more records than one user operation may (Kafka's
    POLICY_VIOLATION); it refuses the whole request, not one topic of it."""
