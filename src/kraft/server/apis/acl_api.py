"""CreateAcls, DescribeAcls and DeleteAcls (v1-3), stored as AccessControlEntryRecord (KIP-801).

CreateAcls and DeleteAcls are admin writes the active controller serves, forwarded from any
node as Kafka's brokers forward them; DescribeAcls is answered by any node from its image.
Kafka's AclControlManager rules: a new ACL needs a concrete resource type, a LITERAL or
PREFIXED pattern, a concrete operation, ALLOW or DENY and a resource name (else
INVALID_REQUEST naming the field); an ACL that exists already succeeds without a record; a
filter with an unknown field is INVALID_REQUEST; one delete removes every ACL its filters
match, each once, in one batch. A node without an authorizer (`authorizer.class.name` unset)
answers all three SECURITY_DISABLED, as Kafka's AclApis does: ACLs it would not enforce are
not stored.
"""

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from kraft.metadata import ControllerError, Errors, MetadataImage
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_response
from kraft.security.acl import Acl, AclFilter, invalid_new_acl
from kraft.server.settings.authorization import acl_of

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
VERSIONS = (1, 3)  # Kafka 4 serves v1-v3 (v0 removed by KIP-896)
NO_AUTHORIZER = "No Authorizer is configured."  # Kafka's words, for Create and Delete
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"


def creations(request: Any) -> list[Acl]:
    return [Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                c.permission_type) for c in request.creations]


def filter_of(f: Any) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def create_acls(image: MetadataImage, acls: Sequence[Acl]) -> ControllerResult[list[ControllerError | None]]:
    existing = {acl_of(r) for r in image.acls.values()}
    records: list[MetadataRecord] = []
    outcomes: list[ControllerError | None] = []
    for acl in acls:
        problem = invalid_new_acl(acl)
        if problem is not None:
            outcomes.append(ControllerError(Errors.INVALID_REQUEST, problem))
            continue
        if acl not in existing:
            existing.add(acl)
            records.append(AccessControlEntryRecord(
                id=uuid.uuid4().bytes, resource_type=acl.resource_type, resource_name=acl.resource_name,
                pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host, operation=acl.operation,
                permission_type=acl.permission_type))
        outcomes.append(None)
    return ControllerResult(tuple(records), outcomes)


def delete_acls(image: MetadataImage, filters: Sequence[AclFilter]
                ) -> ControllerResult[list[ControllerError | list[Acl]]]:
    removed: dict[bytes, None] = {}
    outcomes: list[ControllerError | list[Acl]] = []
    for acl_filter in filters:
        if acl_filter.unknown:
            outcomes.append(ControllerError(Errors.INVALID_REQUEST, f"{acl_filter.unknown} in the filter."))
            continue
        matched = []
        for acl_id, record in image.acls.items():
            acl = acl_of(record)
            if acl_filter.matches(acl):
                matched.append(acl)
                removed[acl_id] = None
        outcomes.append(matched)
    return ControllerResult(tuple(RemoveAccessControlEntryRecord(id=i) for i in removed), outcomes)


def create_response(header: Any, outcomes: Sequence[Any]) -> Any:
    return build_response(CREATE_ACLS, header.request_api_version, {"throttle_time": timedelta(0), "results": [
        {"error_code": _code(o), "error_message": _message(o)} for o in outcomes]})


def delete_response(header: Any, outcomes: Sequence[Any]) -> Any:
    results = []
    for outcome in outcomes:
        matching = [] if not isinstance(outcome, list) else [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": a.resource_type,
             "resource_name": a.resource_name, "pattern_type": a.pattern_type, "principal": a.principal,
             "host": a.host, "operation": a.operation, "permission_type": a.permission_type} for a in outcome]
        results.append({"error_code": _code(outcome), "error_message": _message(outcome), "matching_acls": matching})
    return build_response(DELETE_ACLS, header.request_api_version,
                          {"throttle_time": timedelta(0), "filter_results": results})


def create_refusal(header: Any, request: Any, error: ErrorCode, message: str) -> Any:
    return create_response(header, [_Refused(error, message)] * len(request.creations))


def delete_refusal(header: Any, request: Any, error: ErrorCode, message: str) -> Any:
    return delete_response(header, [_Refused(error, message)] * len(request.filters))


def describe(image: MetadataImage, header: Any, request: Any) -> Any:
    acl_filter = filter_of(request)
    version = header.request_api_version
    if acl_filter.unknown:
        return build_response(DESCRIBE_ACLS, version, {"throttle_time": timedelta(0),
                              "error_code": ErrorCode.invalid_request,
                              "error_message": f"{acl_filter.unknown} in the filter.", "resources": []})
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for record in image.acls.values():
        acl = acl_of(record)
        if acl_filter.matches(acl):
            resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
                 "permission_type": acl.permission_type})
    return build_response(DESCRIBE_ACLS, version, {
        "throttle_time": timedelta(0), "error_code": ErrorCode.none, "error_message": None,
        "resources": [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                      for (t, n, p), acls in sorted(resources.items())]})


def describe_refusal(header: Any, error: ErrorCode, message: str) -> Any:
    return build_response(DESCRIBE_ACLS, header.request_api_version, {
        "throttle_time": timedelta(0), "error_code": error, "error_message": message, "resources": []})


class _Refused:
    def __init__(self, error: ErrorCode, message: str) -> None:
        self.error, self.message = error, message


def _code(outcome: Any) -> ErrorCode:
    if isinstance(outcome, _Refused):
        return outcome.error
    if isinstance(outcome, ControllerError):
        return ErrorCode(int(outcome.error))
    return ErrorCode.none


def _message(outcome: Any) -> str | None:
    return outcome.message if isinstance(outcome, _Refused | ControllerError) else None
