"""Kafka's wire protocol on top of kio: framing, headers, dispatch, ApiVersions, errors.

Its place among the layers: docs/architecture.md; the listeners' limits:
docs/decisions/0025-listener-limits-and-fuzz.md.
"""

from kraft.protocol.codec import (
    api_name,
    decode,
    decode_request,
    decode_response,
    encode,
    encode_request,
    encode_response,
    request_class,
    response_class,
)
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, frame
from kraft.protocol.limits import ListenerLimits
from kraft.protocol.protocol_errors import (
    ErrorCode,
    FrameTooLargeError,
    InvalidRequestError,
    MalformedFrameError,
    ProtocolError,
    UnsupportedVersionError,
)
from kraft.protocol.server import Handler, KafkaServer

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "ErrorCode",
    "FrameTooLargeError",
    "Handler",
    "InvalidRequestError",
    "KafkaServer",
    "ListenerLimits",
    "MalformedFrameError",
    "ProtocolError",
    "UnsupportedVersionError",
    "api_name",
    "decode",
    "decode_request",
    "decode_response",
    "encode",
    "encode_request",
    "encode_response",
    "frame",
    "request_class",
    "response_class",
]
