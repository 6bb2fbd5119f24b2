"""SCRAM credentials as admin clients manage them (KIP-554): AlterUserScramCredentials, an
admin write the active controller serves (forwarded from any node, as Kafka's brokers
forward it), and DescribeUserScramCredentials, answered by any node from its image.

The request carries the salted password, never the password: the admin client salts it.
The controller derives StoredKey and ServerKey from it (Kafka's ScramControlManager) and
writes UserScramCredentialRecord; so the log, its snapshots and every tool that shows them
(dump-log, metadata-shell, the Spark metadata view) hold salts and keys only. Kafka's rules
and messages: per user, one alteration a request (DUPLICATE_RESOURCE for every alteration of
a user named twice), a non-empty name, SCRAM-SHA-256 or -512, iterations from the
mechanism's minimum (4096) to 16384, and a deletion only of a credential that exists. Kafka
also refuses SCRAM below metadata.version 3.5-IV2; kraft's log starts at 3.3-IV3 and writes
the same record versions, so it does not.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kraft.metadata import ControllerError, Errors, MetadataImage
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_response
from kraft.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, credential_from_salted

ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS = 51, 50
_TWICE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def _checked_name_and_mechanism(name: str, mechanism: int) -> ScramMechanism:
    if not name:
        raise ControllerError(Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    try:
        return ScramMechanism(mechanism)
    except ValueError:
        raise ControllerError(Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism") from None


def alter_credentials(
    image: MetadataImage, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
) -> ControllerResult[list[tuple[str, ControllerError | None]]]:
    """The records and, per user, None or why its alteration was refused, in Kafka's order
    (deletions done, upsertions done, then the refusals)."""
    refused: dict[str, ControllerError] = {}
    deleting: dict[str, Deletion] = {}
    upserting: dict[str, tuple[Upsertion, ScramMechanism]] = {}
    for deletion in deletions:
        if deletion.name in refused:
            continue
        if deleting.pop(deletion.name, None) is not None:
            refused[deletion.name] = ControllerError(Errors.DUPLICATE_RESOURCE, _TWICE)
            continue
        try:
            _checked_name_and_mechanism(deletion.name, deletion.mechanism)
            if (deletion.name, deletion.mechanism) not in image.scram_credentials:
                raise ControllerError(Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        except ControllerError as e:
            refused[deletion.name] = e
            continue
        deleting[deletion.name] = deletion
    for upsertion in upsertions:
        if upsertion.name in refused:
            continue
        if deleting.pop(upsertion.name, None) is not None or upserting.pop(upsertion.name, None) is not None:
            refused[upsertion.name] = ControllerError(Errors.DUPLICATE_RESOURCE, _TWICE)
            continue
        try:
            mechanism = _checked_name_and_mechanism(upsertion.name, upsertion.mechanism)
            if upsertion.iterations < MIN_ITERATIONS:
                raise ControllerError(Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            if upsertion.iterations > MAX_ITERATIONS:
                raise ControllerError(Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        except ControllerError as e:
            refused[upsertion.name] = e
            continue
        upserting[upsertion.name] = (upsertion, mechanism)
    records: list[MetadataRecord] = [RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism)
                                     for d in deleting.values()]
    for upsertion, mechanism in upserting.values():
        credential = credential_from_salted(mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations)
        records.append(UserScramCredentialRecord(
            name=upsertion.name, mechanism=upsertion.mechanism, salt=credential.salt,
            stored_key=credential.stored_key, server_key=credential.server_key, iterations=credential.iterations))
    outcomes: list[tuple[str, ControllerError | None]] = [(name, None) for name in [*deleting, *upserting]]
    outcomes += list(refused.items())
    return ControllerResult(tuple(records), outcomes)


def alter_request(request: Any) -> tuple[list[Deletion], list[Upsertion]]:
    return ([Deletion(d.name, d.mechanism) for d in request.deletions],
            [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
             for u in request.upsertions])


def alter_response(header: Any, outcomes: Sequence[tuple[str, ControllerError | None]]) -> Any:
    results = [{"user": name, "error_code": ErrorCode(int(e.error)) if e else ErrorCode.none,
                "error_message": e.message if e else None} for name, e in outcomes]
    return build_response(ALTER_USER_SCRAM_CREDENTIALS, header.request_api_version,
                          {"throttle_time": timedelta(0), "results": results})


def alter_refusal(header: Any, request: Any, error: ErrorCode, message: str) -> Any:
    """Every user of the request refused with `error` (the controller could not be reached)."""
    deletions, upsertions = alter_request(request)
    names = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))
    results = [{"user": name, "error_code": error, "error_message": message} for name in names]
    return build_response(ALTER_USER_SCRAM_CREDENTIALS, header.request_api_version,
                          {"throttle_time": timedelta(0), "results": results})


def describe(image: MetadataImage, header: Any, request: Any) -> Any:
    """Kafka's ScramImage.describe: every user with credentials when none is named; a user
    named twice DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND. Mechanisms
    and iterations only: nothing of the salted keys leaves the node."""
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mechanism), credential in sorted(image.scram_credentials.items()):
        by_user.setdefault(user, []).append({"mechanism": mechanism, "iterations": credential.iterations})
    asked = [u.name for u in request.users] if request.users else list(by_user)
    results = []
    for user in dict.fromkeys(asked):
        entry: dict[str, Any] = {"user": user, "error_code": ErrorCode.none, "error_message": None,
                                 "credential_infos": []}
        if asked.count(user) > 1:
            entry |= {"error_code": ErrorCode.duplicate_resource,
                      "error_message": f"Cannot describe SCRAM credentials for the same user twice in a single "
                                       f"request: {user}"}
        elif user not in by_user:
            entry |= {"error_code": ErrorCode.resource_not_found,
                      "error_message": f"Attempt to describe a user credential that does not exist: {user}"}
        else:
            entry["credential_infos"] = by_user[user]
        results.append(entry)
    return build_response(DESCRIBE_USER_SCRAM_CREDENTIALS, header.request_api_version, {
        "throttle_time": timedelta(0), "error_code": ErrorCode.none, "error_message": None, "results": results})
