"""Which version of each Raft RPC to send a peer: the core's, or the nearest one the peer serves.

A connection to a peer starts with ApiVersions, as Kafka's NetworkClient starts every one, and
each request then goes in the version nearest the core's that the peer serves, converted as the
serving side converts (raft_versions.py: Kafka's value for a field a version lacks). Without
it a node whose core moved to a newer version (Fetch v18, KIP-1166) had every request refused
by a peer of an older build, which closes the connection on a version it does not serve: in a
rolling upgrade the upgraded followers could not fetch. A request that no version the peer
serves can carry without losing what it asks (a pre-vote to a peer without Vote v2, whose
dropped PreVote would make it a vote) is not sent: the send fails at once, as one to an
unreachable peer does, and the core goes on as it does then.
"""

from typing import Any

from kraft.protocol.build import build_request, convert, field_names
from kraft.protocol.codec import api_name, request_class, response_class
from kraft.server.apis.raft_versions import ABSENT, NOT_DROPPABLE

API_VERSIONS, API_VERSIONS_VERSION = 18, 3


class NoCommonVersion(ConnectionError):
    """The peer serves no version of the request's API that can carry it."""


def api_versions_request() -> Any:
    """What opens a connection to a peer (its answer: `PeerVersions.of`)."""
    return build_request(API_VERSIONS, API_VERSIONS_VERSION,
                         {"client_software_name": "kraft", "client_software_version": "1"})


class PeerVersions:
    """The versions one connection's peer serves, from its ApiVersions answer."""

    def __init__(self, ranges: dict[int, tuple[int, int]]) -> None:
        self.ranges = ranges

    @classmethod
    def of(cls, answer: Any) -> "PeerVersions":
        if answer.error_code != 0:
            raise ConnectionError(f"ApiVersions refused: {answer.error_code.name}")
        return cls({k.api_key: (k.min_version, k.max_version) for k in answer.api_keys})

    def outgoing(self, request: Any) -> Any:
        """`request` (the core's version) in the version to send: the core's if the peer
        serves it, else the nearest it serves, converted."""
        key, core = type(request).__api_key__, type(request).__version__
        served = self.ranges.get(key)
        if served is None:
            raise NoCommonVersion(f"it does not serve {api_name(key)}")
        version = min(max(core, served[0]), served[1])
        if version == core:
            return request
        target = request_class(key, version)
        core_class: Any = type(request)
        for name in NOT_DROPPABLE & (field_names(core_class) - field_names(target)):
            if any(value != ABSENT[key][name] for value in _values(request, name)):
                raise NoCommonVersion(f"its {api_name(key)} v{served[0]}-v{served[1]} cannot carry {name} "
                                      f"(v{core} can): a node of an older build?")
        return convert(request, target, ABSENT[key])

    @staticmethod
    def incoming(answer: Any, request: Any) -> Any:
        """The peer's `answer` to the core's `request`, in the core's version."""
        cls = response_class(type(request).__api_key__, type(request).__version__)
        return answer if type(answer) is cls else convert(answer, cls, ABSENT[cls.__api_key__])


def _values(entity: Any, name: str) -> list[Any]:
    """Every value of field `name` in `entity` and the entities nested in it."""
    found = [getattr(entity, name)] if hasattr(entity, name) else []
    for field in getattr(entity, "__dataclass_fields__", {}):
        value = getattr(entity, field)
        for item in value if isinstance(value, tuple) else (value,):
            if hasattr(item, "__dataclass_fields__"):
                found += _values(item, name)
    return found
