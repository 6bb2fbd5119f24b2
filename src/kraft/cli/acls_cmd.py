"""`kraft acls`, Kafka's kafka-acls: its flags and checks, and what AclCommand prints.

    (--bootstrap-server | --bootstrap-controller) HOST:PORT [--command-config FILE]
      --add | --remove [--force] | --list [--principal P ...]
      [--topic T ...] [--group G ...] [--cluster] [--transactional-id T ...] [--delegation-token T ...]
      [--user-principal U ...] [--resource-pattern-type literal|prefixed|any|match]
      [--allow-principal P ...] [--deny-principal P ...] [--allow-host H ...] [--deny-host H ...]
      [--operation OP ...] [--producer [--idempotent]] [--consumer]

Resources and entries print as Kafka's Java classes print them
(`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`,
`(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`), in the order
they were asked for or the cluster lists them (Kafka's Scala sets keep that order for up
to four items). `--remove` asks before deleting unless `--force`, as Kafka's does.
Errors: usage on stderr, anything else as `Error while executing ACL command: ...` on
stdout; both exit 1.
"""

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraft.cli import kafka_options as opts
from kraft.cli.admin_client import Admin, bootstrap_of, run_tool
from kraft.cli.admin_connection import ToolError, UsageError, read_command_config
from kraft.cli.kafka_errors import KafkaError, check
from kraft.cli.output import quiet_on_broken_pipe
from kraft.security.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
SUPPORTED = {  # Kafka's AclEntry.supportedOperations, ALL besides
    ResourceType.TOPIC: ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
                         "ALTER_CONFIGS"),
    ResourceType.GROUP: ("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    ResourceType.CLUSTER: ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
                           "ALTER", "DESCRIBE"),
    ResourceType.TRANSACTIONAL_ID: ("DESCRIBE", "WRITE"),
    ResourceType.DELEGATION_TOKEN: ("DESCRIBE",),
    ResourceType.USER: ("CREATE_TOKENS", "DESCRIBE_TOKENS"),
}
RESOURCE_FLAGS = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
                  ("transactional-id", ResourceType.TRANSACTIONAL_ID),
                  ("delegation-token", ResourceType.DELEGATION_TOKEN), ("user-principal", ResourceType.USER))


@dataclass(frozen=True)
class Pattern:
    """A resource pattern or pattern filter (ResourcePattern / ResourcePatternFilter)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={'<any>' if self.name is None else self.name}, patternType={self.pattern_type.name})")


@dataclass(frozen=True)
class Entry:
    """An access control entry (AccessControlEntry)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name})")


def pascal(name: str) -> str:
    """Kafka's SecurityUtils names: READ -> Read, IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(part.capitalize() for part in name.split("_"))


def operation(name: str) -> AclOperation:
    """SecurityUtils.operation: Pascal case or its upper case; UNKNOWN otherwise."""
    for op in AclOperation:
        if name in (pascal(op.name), pascal(op.name).upper()):
            return op
    return AclOperation.UNKNOWN


def principal(text: str) -> str:
    """SecurityUtils.parseKafkaPrincipal, as text."""
    if ":" not in text:
        raise ToolError(f"expected a string in format principalType:principalName but got {text}")
    return text


def add_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, remove or list ACLs (like kafka-acls)")
    opts.add_connection(p, config_help="A property file containing configs to be passed to Admin Client.")
    for action, text in (("add", "Indicates you are trying to add ACLs."),
                         ("remove", "Indicates you are trying to remove ACLs."),
                         ("list", "List ACLs for the specified resource.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    for flag, _ in RESOURCE_FLAGS:
        p.add_argument(f"--{flag}", action="append", help=f"the {flag.replace('-', ' ')} (repeatable; '*': all)")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal or prefixed; for --list and --remove also any or match (default literal)")
    p.add_argument("--operation", action="append", help="Operation that is being allowed or denied (default All).")
    for flag, text in (("allow-principal", "principalType:name allowed"), ("deny-principal", "principalType:name "
                                                                                             "denied"),
                       ("allow-host", "Host the allowed principals may come from (default *)."),
                       ("deny-host", "Host the denied principals are denied from (default *)."),
                       ("principal", "List ACLs for the specified principal (with --list).")):
        p.add_argument(f"--{flag}", action="append", help=text)
    for flag, text in (("producer", "ACLs for a producer: WRITE, DESCRIBE and CREATE on topics."),
                       ("consumer", "ACLs for a consumer: READ, DESCRIBE on topics and READ on groups."),
                       ("idempotent", "With --producer: IDEMPOTENT_WRITE on the cluster."),
                       ("force", "Assume Yes to all queries and do not prompt.")):
        p.add_argument(f"--{flag}", action="store_true", help=text)
    p.set_defaults(func=main)


def check_args(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, in Kafka's order."""
    if args.bootstrap_server and args.bootstrap_controller:
        raise UsageError("Only one of --bootstrap-server or --bootstrap-controller must be specified")
    if not args.bootstrap_server and not args.bootstrap_controller:
        raise UsageError("One of --bootstrap-server or --bootstrap-controller must be specified")
    opts.exactly_one(args, ("add", "remove", "list"), "Command must include exactly one action: --list, --add, "
                                                      "--remove. ")
    opts.invalid_with(args, "list", ("producer", "consumer", "allow-host", "allow-principal", "deny-host",
                                     "deny-principal"))
    for role in ("producer", "consumer"):
        opts.invalid_with(args, role, ("operation", "deny-principal", "deny-host"))
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")


def pattern_type(text: str) -> PatternType:
    try:
        chosen = PatternType[text.upper()]
    except KeyError:
        chosen = PatternType.UNKNOWN
    if chosen == PatternType.UNKNOWN:
        raise UsageError(f"Unknown resource-pattern-type: {text}")
    return chosen


def resources(args: argparse.Namespace, required: bool = True) -> list[Pattern]:
    """getResourceFilter: the resources named, in Kafka's order."""
    kind = pattern_type(args.resource_pattern_type)
    found: list[Pattern] = []
    for topic in args.topic or []:
        found.append(Pattern(ResourceType.TOPIC, topic.strip(), kind))
    if kind == PatternType.LITERAL and (args.cluster or args.idempotent):
        found.append(Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    for flag, resource_type in RESOURCE_FLAGS[1:]:
        for name in getattr(args, flag.replace("-", "_")) or []:
            found.append(Pattern(resource_type, name if resource_type == ResourceType.TRANSACTIONAL_ID
                                 else name.strip(), kind))
    if not found and required:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(found))


def entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[Entry]:
    """getAcl: every allowed principal, operation and host, then every denied one."""
    ops = list(dict.fromkeys(operations))
    made: list[Entry] = []
    for who, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                   (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        principals = [principal(p.strip()) for p in who or []]
        hosts = [h.strip() for h in hosts] if hosts else (["*"] if principals else [])
        made += [Entry(p, h, op, permission) for p in dict.fromkeys(principals) for op in ops for h in hosts]
    return list(dict.fromkeys(made))


def resource_entries(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    """getResourceFilterToAcls: the entries of each resource, from the flags or from the
    --producer / --consumer conveniences; every operation checked against the resource."""
    named = resources(args)
    wanted: dict[Pattern, list[Entry]] = {}
    if not args.producer and not args.consumer:
        chosen = [operation(o.strip()) for o in args.operation or ["All"]]
        wanted = {r: entries(args, chosen) for r in named}
    if args.producer:
        for r in named:
            if r.resource_type == ResourceType.TOPIC:
                wanted[r] = entries(args, (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE))
            elif r.resource_type == ResourceType.TRANSACTIONAL_ID:
                wanted[r] = entries(args, (AclOperation.WRITE, AclOperation.DESCRIBE))
        if args.idempotent:
            wanted[Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] = entries(
                args, (AclOperation.IDEMPOTENT_WRITE,))
    if args.consumer:
        for r in named:
            if r.resource_type == ResourceType.TOPIC:
                wanted[r] = list(dict.fromkeys([*entries(args, (AclOperation.READ, AclOperation.DESCRIBE)),
                                                *wanted.get(r, [])]))
            elif r.resource_type == ResourceType.GROUP:
                wanted[r] = list(dict.fromkeys([*entries(args, (AclOperation.READ,)), *wanted.get(r, [])]))
    for r, acls in wanted.items():
        valid = {AclOperation[o] for o in SUPPORTED[r.resource_type]} | {AclOperation.ALL}
        if any(e.operation not in valid for e in acls):
            names = ", ".join(pascal(o.name) for o in AclOperation if o in valid)
            raise UsageError(f"ResourceType {r.resource_type.name} only supports operations {names}")
    return wanted


def block(title: str, acls: list[Entry]) -> str:
    """Kafka's `<title>: <newline> <tab>acl<newline><tab>acl <newline>` and println."""
    return f"{title}: \n " + "\n".join(f"\t{a}" for a in acls) + " \n"


# ---------------------------------------------------------------- the three actions


def to_add(args: argparse.Namespace) -> dict[Pattern, list[Entry]]:
    """getResourceToAcls: a specific pattern type, and principals for every resource."""
    if pattern_type(args.resource_pattern_type) not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' is not "
                         "valid when adding acls.")
    wanted = resource_entries(args)
    if any(not acls for acls in wanted.values()):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return wanted


async def add(admin: Admin, wanted: dict[Pattern, list[Entry]]) -> None:
    for r, acls in wanted.items():
        print(block(f"Adding ACLs for resource `{r}`", acls))
        answer = await admin.call(CREATE_ACLS, range(1, 4), {"creations": [
            {"resource_type": r.resource_type, "resource_name": r.name, "resource_pattern_type": r.pattern_type,
             "principal": a.principal, "host": a.host, "operation": a.operation, "permission_type": a.permission}
            for a in acls]})
        for result in answer.results:
            check(result.error_code, result.error_message)


def _filter(r: Pattern, acl: Entry | None) -> dict[str, Any]:
    return {"resource_type_filter": r.resource_type, "resource_name_filter": r.name,
            "pattern_type_filter": r.pattern_type, "principal_filter": acl.principal if acl else None,
            "host_filter": acl.host if acl else None, "operation": acl.operation if acl else AclOperation.ANY,
            "permission_type": acl.permission if acl else AclPermissionType.ANY}


def confirmed(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(question, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


async def remove(admin: Admin, args: argparse.Namespace, wanted: dict[Pattern, list[Entry]]) -> None:
    for r, acls in wanted.items():
        if acls:
            question = ("Are you sure you want to remove ACLs: \n " + "\n".join(f"\t{a}" for a in acls)
                        + f" \n from resource filter `{r}`? (y/n)")
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{r}`? (y/n)"
        if not confirmed(args, question):
            continue
        filters = [_filter(r, a) for a in acls] or [_filter(r, None)]
        answer = await admin.call(DELETE_ACLS, range(1, 4), {"filters": filters})
        for result in answer.filter_results:
            check(result.error_code, result.error_message)


async def described(admin: Admin, filters: list[Pattern]) -> dict[Pattern, list[Entry]]:
    """getAcls: every ACL matching any filter, grouped by resource pattern."""
    found: dict[Pattern, list[Entry]] = {}
    for f in filters or [Pattern(ResourceType.ANY, None, PatternType.ANY)]:
        answer = await admin.call(DESCRIBE_ACLS, range(1, 4), {
            "resource_type_filter": f.resource_type, "resource_name_filter": f.name,
            "pattern_type_filter": f.pattern_type, "principal_filter": None, "host_filter": None,
            "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY})
        check(answer.error_code, answer.error_message)
        for resource in answer.resources:
            pattern = Pattern(ResourceType(resource.resource_type), resource.resource_name,
                              PatternType(resource.pattern_type))
            for a in resource.acls:
                entry = Entry(a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type))
                if entry not in found.setdefault(pattern, []):
                    found[pattern].append(entry)
    return found


async def list_acls(admin: Admin, args: argparse.Namespace) -> None:
    found = await described(admin, resources(args, required=False))
    if not args.principal:
        for r, acls in found.items():
            print(block(f"Current ACLs for resource `{r}`", acls))
        return
    for who in (principal(p.strip()) for p in args.principal):
        print(f"ACLs for principal `{who}`")
        for r, acls in found.items():
            mine = [a for a in acls if a.principal == who]
            if mine:
                print(block(f"Current ACLs for resource `{r}`", mine))


async def _run(args: argparse.Namespace) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, args.bootstrap_controller)
    settings = read_command_config(args.command_config)
    # What to add or remove, and so its usage errors, before connecting.
    wanted = to_add(args) if args.add else resource_entries(args) if args.remove else {}
    async with Admin(bootstrap, settings, endpoint_type) as admin:
        if args.add:
            await add(admin, wanted)
        elif args.remove:
            await remove(admin, args, wanted)
        else:
            await list_acls(admin, args)


def _failed(e: KafkaError | ToolError) -> None:
    print(f"Error while executing ACL command: {e.java() if isinstance(e, KafkaError) else e}")


@quiet_on_broken_pipe
def main(args: argparse.Namespace) -> int:
    return run_tool(args, check_args, _run, _failed)
