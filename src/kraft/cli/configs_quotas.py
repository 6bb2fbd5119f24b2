"""`kraft configs` for users, clients and ips, as Kafka's ConfigCommand handles them:
client quotas (DescribeClientQuotas, AlterClientQuotas) and users' SCRAM credentials
(DescribeUserScramCredentials, AlterUserScramCredentials).

A credential is given as Kafka's tool takes it, `SCRAM-SHA-256=[iterations=8192,password=pw]`
(iterations 4096 by default); the password is salted here, as Kafka's admin client salts it,
and only the salted password leaves this process.
"""

import re
from collections.abc import Sequence

from kraft.cli.admin_client import Admin
from kraft.cli.admin_connection import ToolError, UsageError
from kraft.cli.kafka_errors import KafkaError, check
from kraft.cli.kafka_json import java_double
from kraft.java_order import hash_map_order, string_hash
from kraft.security.scram import DEFAULT_ITERATIONS, ScramMechanism, new_salt, salted_password

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
QUOTA_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
TYPE_NAMES = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)
CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def is_scram(key: str) -> bool:
    return ScramMechanism.named(key) is not None


def _components(entity_types: Sequence[str], names: Sequence[str]) -> list[dict[str, object]]:
    """getAllClientQuotasConfigs's filter: an exact name, the default ('') or any named one."""
    if len(names) > len(entity_types):
        raise UsageError("More entity names specified than entity types")
    components = []
    for i, entity_type in enumerate(entity_types):
        name = names[i] if i < len(names) else None
        match_type = SPECIFIED if name is None else DEFAULT if name == "" else EXACT
        components.append({"entity_type": QUOTA_TYPES[entity_type], "match_type": match_type,
                           "match": name if match_type == EXACT else None})
    return components


async def quotas(admin: Admin, entity_types: Sequence[str], names: Sequence[str]
                 ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    answer = await admin.call(DESCRIBE_CLIENT_QUOTAS, range(0, 2), {
        "components": _components(entity_types, names), "strict": True})
    check(answer.error_code, answer.error_message)
    return [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
            for entry in answer.entries or ()]


async def describe(admin: Admin, entity_types: Sequence[str], names: Sequence[str]) -> None:
    """describeClientQuotaAndUserScramCredentialConfigs."""
    for entity, values in await quotas(admin, entity_types, names):
        parts = [f"{TYPE_NAMES[t]} '{entity[t]}'" if entity[t] is not None else f"the default {TYPE_NAMES[t]}"
                 for t in ("user", "client-id", "ip") if t in entity]
        shown = ", ".join(f"{k}={java_double(values[k])}" for k in hash_map_order(values, string_hash))
        print(f"Quota configs for {', '.join(parts)} are {shown}")
    if "clients" in entity_types or "" in names or "users" not in entity_types:
        return
    answer = await admin.call(DESCRIBE_USER_SCRAM_CREDENTIALS, range(0, 1), {
        "users": [{"name": n} for n in names] if names else None})
    check(answer.error_code, answer.error_message)
    for result in answer.results:
        if result.error_code:
            e = KafkaError(result.error_code, result.error_message)
            print(f"Error retrieving SCRAM credential configs for user-principal '{result.user}': "
                  f"{e.exception}: {e.message}")
            continue
        infos = ", ".join(f"{ScramMechanism(i.mechanism).mechanism_name}=iterations={i.iterations}"
                          for i in result.credential_infos)
        print(f"SCRAM credential configs for user-principal '{result.user}' are {infos}")


async def alter(admin: Admin, entity_types: Sequence[str], names: Sequence[str], added: dict[str, str],
                deleted: Sequence[str]) -> None:
    """The user/client/ip branches of ConfigCommand.alterConfig, with Kafka's checks."""
    head = entity_types[0]
    if head == "ips":
        unknown = [k for k in [*added, *deleted] if k not in IP_KEYS]
        if unknown:
            raise UsageError(f"Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                             f"Unexpected config names: {','.join(unknown)}")
        return await _alter_quotas(admin, entity_types, names, added, deleted)
    quota_add = [k for k in added if k in QUOTA_KEYS]
    scram_add = [k for k in added if is_scram(k)]
    unknown_add = [k for k in added if k not in QUOTA_KEYS and not is_scram(k)]
    quota_delete = [k for k in deleted if k in QUOTA_KEYS]
    scram_delete = [k for k in deleted if is_scram(k)]
    unknown_delete = [k for k in deleted if k not in QUOTA_KEYS and not is_scram(k)]
    if head == "clients" or len(entity_types) == 2:
        if unknown_add or scram_add:
            raise UsageError("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                             f"config names: {_scala_list(unknown_add + scram_add)}")
        if unknown_delete or scram_delete:
            raise UsageError("Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected "
                             f"config names: {_scala_list(unknown_delete + scram_delete)}")
    else:
        if unknown_add:
            raise UsageError("Only quota and SCRAM credential configs can be added for 'users' using "
                             f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_add)}")
        if unknown_delete:
            raise UsageError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                             f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_delete)}")
        if scram_add or scram_delete:
            if "" in names:
                raise UsageError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                                 "Credentials using --bootstrap-server.")
            if quota_add or quota_delete:
                raise UsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                                 "using --bootstrap-server.")
    if quota_add or quota_delete:
        return await _alter_quotas(admin, entity_types, names, added, deleted)
    await _alter_credentials(admin, names[0], {k: added[k] for k in scram_add}, scram_delete)


def _scala_list(items: Sequence[str]) -> str:
    return "List(" + ", ".join(items) + ")"


async def _alter_quotas(admin: Admin, entity_types: Sequence[str], names: Sequence[str], added: dict[str, str],
                        deleted: Sequence[str]) -> None:
    if len(entity_types) != len(names):
        raise UsageError("Exactly one entity name must be specified for every entity type")
    found = await quotas(admin, entity_types, names)
    current = found[0][1] if found else {}
    invalid = [k for k in deleted if k not in current]
    if invalid:
        raise UsageError(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for key, value in added.items():
        try:
            ops.append({"key": key, "value": float(value), "remove": False})
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
    ops += [{"key": key, "value": 0.0, "remove": True} for key in deleted]
    entity = [{"entity_type": QUOTA_TYPES[t], "entity_name": n or None} for t, n in zip(entity_types, names)]
    answer = await admin.call(ALTER_CLIENT_QUOTAS, range(0, 2), {
        "entries": [{"entity": entity, "ops": ops}], "validate_only": False})
    for entry in answer.entries:
        check(entry.error_code, entry.error_message)


def _credential(mechanism: ScramMechanism, text: str) -> tuple[int, str]:
    m = CREDENTIAL.fullmatch(text)
    if m is None:
        raise UsageError(f"Invalid credential property {mechanism.mechanism_name}={text}")
    iterations = int(m.group(1)) if m.group(1) not in (None, "", "-1") else DEFAULT_ITERATIONS
    if iterations < DEFAULT_ITERATIONS:
        raise UsageError(f"Iterations {iterations} is less than the minimum {DEFAULT_ITERATIONS} required for "
                         f"{mechanism.mechanism_name}")
    return iterations, m.group(2)


async def _alter_credentials(admin: Admin, user: str, added: dict[str, str], deleted: Sequence[str]) -> None:
    upsertions = []
    for name, text in added.items():
        mechanism = ScramMechanism.named(name)
        assert mechanism is not None
        iterations, password = _credential(mechanism, text)
        salt = new_salt()
        upsertions.append({"name": user, "mechanism": int(mechanism), "iterations": iterations, "salt": salt,
                           "salted_password": salted_password(mechanism, password, salt, iterations)})
    deletions = [{"name": user, "mechanism": int(ScramMechanism.named(n) or 0)} for n in deleted]
    answer = await admin.call(ALTER_USER_SCRAM_CREDENTIALS, range(0, 1), {"deletions": deletions,
                                                                         "upsertions": upsertions})
    for result in answer.results:
        if result.error_code:
            raise ToolError(f"java.util.concurrent.ExecutionException: "
                            f"{KafkaError(result.error_code, result.error_message).java()}")
