"""Kafka error codes and the protocol layer's own exceptions.

`ErrorCode` is kio's enum, generated from Kafka's Errors.java table: every code with its
number and whether it is retriable. Kafka's upper-case names are the lower-case members
(ErrorCode.fenced_leader_epoch is FENCED_LEADER_EPOCH, 74).
"""

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "FrameTooLargeError",
    "InvalidRequestError",
    "MalformedFrameError",
    "ProtocolError",
    "UnsupportedVersionError",
]


class ProtocolError(Exception):
    """Bytes on the wire that cannot be served; the connection they came on is closed."""


class FrameTooLargeError(ProtocolError):
    def __init__(self, size: int, limit: int, setting: str = "socket.request.max.bytes") -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes ({setting})")
        self.size = size
        self.limit = limit
        self.setting = setting


class MalformedFrameError(ProtocolError):
    """A frame whose header or body does not parse."""


class InvalidRequestError(ProtocolError):
    """A request that parses but that its API refuses as a whole, as Kafka's handlers throw
    InvalidRequestException (a Metadata v10 topic without a name): the connection closes."""


class UnsupportedVersionError(ProtocolError):
    def __init__(self, api_key: int, version: int, detail: str = "") -> None:
        super().__init__(f"API key {api_key} version {version} is not supported{detail}")
        self.api_key = api_key
        self.version = version
