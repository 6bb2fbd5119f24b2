"""Client quotas as admin clients manage them (KIP-546): AlterClientQuotas, an admin write
the active controller serves (forwarded from any node, as Kafka's brokers forward it), and
DescribeClientQuotas, answered by any node from its image. kafka-configs uses them for the
`users`, `clients` and `ips` entities.

Kafka's ClientQuotaControlManager rules and messages: an entity of user and/or client-id,
or of ip alone; the keys of Kafka's QuotaConfig for it (producer_byte_rate and
consumer_byte_rate whole numbers, request_percentage and controller_mutation_rate any
number, connection_creation_rate a whole number), every value above 0; a record only for a
value that changes, and a removal only of a quota that is set. kraft enforces no quota: they
are stored and described, as the metadata of a cluster whose brokers would.
"""

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from kraft.metadata import ControllerError, Errors, MetadataImage
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import ClientQuotaRecord, EntityData, MetadataRecord
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_response

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
VERSIONS = (0, 1)
USER, CLIENT_ID, IP = "user", "client-id", "ip"
USER_AND_CLIENT_KEYS = {"producer_byte_rate": "long", "consumer_byte_rate": "long", "request_percentage": "double",
                        "controller_mutation_rate": "double"}
IP_KEYS = {"connection_creation_rate": "int"}
LIMITS = {"int": 2**31 - 1, "long": 2**63 - 1}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match types

Entity = tuple[tuple[str, str | None], ...]  # (type, name) sorted by type; a None name is the default
Op = tuple[str, float | None]  # (key, value); None removes


def _text(entity: Entity) -> str:
    """ClientQuotaEntity.toString."""
    return "ClientQuotaEntity(entries=" + "{" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


def _keys(entity: Entity) -> dict[str, str]:
    types = {t for t, _ in entity}
    if not types:
        raise ControllerError(Errors.INVALID_REQUEST, "Invalid empty client quota entity")
    unknown = types - {USER, CLIENT_ID, IP}
    if unknown:
        raise ControllerError(Errors.INVALID_REQUEST, f"Unhandled client quota entity type: {sorted(unknown)[0]}")
    if IP in types:
        if types != {IP}:
            raise ControllerError(Errors.INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be "
                                                          "combined with User or ClientId")
        return IP_KEYS
    return USER_AND_CLIENT_KEYS


def _check_value(keys: dict[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise ControllerError(Errors.INVALID_REQUEST, f"Invalid configuration key {key}")
    if value <= 0.0:
        raise ControllerError(Errors.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind in LIMITS:
        if value > LIMITS[kind]:
            article = "an" if kind == "int" else "a"
            raise ControllerError(Errors.INVALID_REQUEST,
                                  f"Proposed value for {key} is too large for {article} {kind.upper()}.")
        if abs(math.fmod(value, 1.0)) > 1e-6:
            raise ControllerError(Errors.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def alter_quotas(image: MetadataImage, alterations: Sequence[tuple[Entity, Sequence[Op]]]
                 ) -> ControllerResult[list[ControllerError | None]]:
    """The records of every alteration, and per entity None or why it was refused."""
    records: list[MetadataRecord] = []
    outcomes: list[ControllerError | None] = []
    seen: set[Entity] = set()
    for entity, ops in alterations:
        try:
            if entity in seen:
                raise ControllerError(Errors.INVALID_REQUEST, f"Ignoring duplicate entity {_text(entity)}")
            seen.add(entity)
            if len({t for t, _ in entity}) < len(entity):
                raise ControllerError(Errors.INVALID_REQUEST, "Invalid client quota entity, duplicate entity entry "
                                      + next(t for t, _ in entity if sum(1 for u, _ in entity if u == t) > 1))
            wanted: dict[str, float | None] = {}
            for key, value in ops:
                if key in wanted:
                    raise ControllerError(Errors.INVALID_REQUEST, f"Duplicate quota key {key} not updating quota "
                                                                  f"for this entity {_text(entity)}")
                wanted[key] = value
            keys = _keys(entity)
            current = image.client_quotas.get(entity, {})
            data = tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity)
            mine: list[MetadataRecord] = []
            for key, value in wanted.items():
                if value is None:
                    if key in current:
                        mine.append(ClientQuotaRecord(entity=data, key=key, value=0.0, remove=True))
                    continue
                _check_value(keys, key, value)
                if current.get(key) != value:
                    mine.append(ClientQuotaRecord(entity=data, key=key, value=value, remove=False))
        except ControllerError as e:
            outcomes.append(e)
            continue
        records += mine
        outcomes.append(None)
    return ControllerResult(tuple(records), outcomes)


def entity_of(entries: Any) -> Entity:
    return tuple(sorted((e.entity_type, e.entity_name) for e in entries))


def alter_request(request: Any) -> list[tuple[Entity, list[Op]]]:
    return [(entity_of(e.entity), [(op.key, None if op.remove else op.value) for op in e.ops])
            for e in request.entries]


def alter_response(header: Any, request: Any, outcomes: Sequence[ControllerError | None | tuple[ErrorCode, str]]
                   ) -> Any:
    entries = []
    for e, outcome in zip(request.entries, outcomes, strict=True):
        if isinstance(outcome, ControllerError):
            error, message = ErrorCode(int(outcome.error)), outcome.message
        elif isinstance(outcome, tuple):
            error, message = outcome
        else:
            error, message = ErrorCode.none, None
        entries.append({"error_code": error, "error_message": message, "entity": [
            {"entity_type": d.entity_type, "entity_name": d.entity_name} for d in e.entity]})
    return build_response(ALTER_CLIENT_QUOTAS, header.request_api_version,
                          {"throttle_time": timedelta(0), "entries": entries})


def alter_refusal(header: Any, request: Any, error: ErrorCode, message: str) -> Any:
    return alter_response(header, request, [(error, message)] * len(request.entries))


def _matches(entity: Entity, components: Sequence[Any], strict: bool) -> bool:
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        if (c.match_type == EXACT and name != c.match) or (c.match_type == DEFAULT and name is not None) or (
                c.match_type == SPECIFIED and name is None):
            return False
    return not strict or len(names) == len(components)


def _filter_error(components: Sequence[Any]) -> str | None:
    types = [c.entity_type for c in components]
    for c in components:
        if types.count(c.entity_type) > 1:
            return f"Entity type {c.entity_type} cannot appear more than once in the filter."
        if c.match_type not in (EXACT, DEFAULT, SPECIFIED):
            return f"Unknown match type {c.match_type}"
        if c.match_type == EXACT and c.match is None:
            return f"Entity match for {c.entity_type} must be specified with exact match type"
    if IP in types and (USER in types or CLIENT_ID in types):
        return ("Invalid entity filter component combination, IP filter component should not be used with user or "
                "clientId filter component.")
    return None


def describe(image: MetadataImage, header: Any, request: Any) -> Any:
    """Kafka's ClientQuotasImage.describe: the entities every component matches (an exact
    name, the default entity, or any named one), only those with no other type when strict."""
    problem = _filter_error(request.components)
    if problem is not None:
        return describe_refusal(header, ErrorCode.invalid_request, problem)
    entries = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(quotas.items())]}
               for entity, quotas in image.client_quotas.items() if _matches(entity, request.components, request.strict)]
    return build_response(DESCRIBE_CLIENT_QUOTAS, header.request_api_version, {
        "throttle_time": timedelta(0), "error_code": ErrorCode.none, "error_message": None, "entries": entries})


def describe_refusal(header: Any, error: ErrorCode, message: str) -> Any:
    return build_response(DESCRIBE_CLIENT_QUOTAS, header.request_api_version, {
        "throttle_time": timedelta(0), "error_code": error, "error_message": message, "entries": None})
