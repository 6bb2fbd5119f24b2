"""`kraft configs`, Kafka's kafka-configs: its flags and checks, and what ConfigCommand prints.

    (--bootstrap-server | --bootstrap-controller) HOST:PORT [--command-config FILE]
      --describe [--all] | --alter (--add-config k=v,k2=[a,b] | --add-config-file F | --delete-config k,k2)
      --entity-type topics|brokers|users|clients|ips|... [--entity-name N | --entity-default]
      | --topic T | --broker B | --broker-defaults | --user U | --user-defaults | --client C |
        --client-defaults | --ip I | --ip-defaults | --group G | --client-metrics M | --broker-logger B

Topics and brokers are described as `Dynamic configs for topic t are:` (`All configs` with
--all, `Default configs for brokers in the cluster are:` for the brokers' default), then
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` per config, sorted by
name; a broker is asked of that broker. Users and clients are their quotas and, for users,
their SCRAM credentials (configs_quotas.py). A topic's configs are altered incrementally, a
broker's by AlterConfigs with all its dynamic configs, as Kafka's tool does.

Errors: Kafka's checks and refusals on stderr; an error the cluster answers as Kafka's tool
prints it, `Error while executing config command with args '...'` and the exception's line
(Kafka's stack frames left out); both exit 1.
"""

import argparse
import re
import sys
from typing import Any

from kraft.cli import configs_quotas
from kraft.cli import kafka_options as opts
from kraft.cli.admin_client import Admin, bootstrap_of, run_tool
from kraft.cli.admin_connection import ToolError, UsageError, read_command_config, read_properties
from kraft.cli.config_entries import BROKER, BROKER_LOGGER, SOURCES, TOPIC, describe_resources
from kraft.cli.groups_client import list_groups
from kraft.cli.kafka_errors import KafkaError, check
from kraft.cli.output import quiet_on_broken_pipe

ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 44
SET, DELETE = 0, 1
GROUP, CLIENT_METRICS = 32, 16  # ConfigResource.Type codes
TYPES = ("topics", "clients", "users", "brokers", "ips", "broker-loggers", "client-metrics", "groups")
ENTITY_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"), ("broker", "brokers"),
                ("broker-logger", "broker-loggers"), ("ip", "ips"), ("client-metrics", "client-metrics"),
                ("group", "groups"))
DEFAULT_FLAGS = (("client-defaults", "clients"), ("user-defaults", "users"), ("broker-defaults", "brokers"),
                 ("ip-defaults", "ips"))
RESOURCES = {"topics": (TOPIC, 1), "brokers": (BROKER, None), "broker-loggers": (BROKER_LOGGER, None),
             "groups": (GROUP, 8), "client-metrics": (CLIENT_METRICS, 7)}  # type, its dynamic source


class EntityArg(argparse.Action):
    """Keeps --entity-name and --entity-default in command-line order, as Kafka pairs them
    with the --entity-type values."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        # A new list each time: the default one is shared by every parse.
        namespace.entity_order = [*namespace.entity_order, values if isinstance(values, str) else ""]
        setattr(namespace, self.dest, True)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe or alter the configs of topics, brokers, users, clients "
                                       "(like kafka-configs)")
    opts.add_connection(p)
    p.set_defaults(entity_order=[], func=main)
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--all", action="store_true", help="List all configs for the given entity.")
    p.add_argument("--entity-type", action="append", help=f"Type of entity ({'/'.join(TYPES)})")
    p.add_argument("--entity-name", action=EntityArg, help="Name of entity")
    p.add_argument("--entity-default", action=EntityArg, nargs=0, help="Default entity name for "
                                                                      "clients/users/brokers/ips")
    p.add_argument("--add-config", help="Key Value pairs of configs to add: 'k1=v1,k2=[v1,v2,v2],k3=v3'")
    p.add_argument("--add-config-file", help="Path to a properties file with configs to add.")
    p.add_argument("--delete-config", action="append", help="config keys to remove 'k1,k2'")
    p.add_argument("--force", action="store_true", help="Suppress console prompts")
    for flag, entity_type in ENTITY_FLAGS:
        p.add_argument(f"--{flag}", help=f"The {entity_type[:-1]}'s name or id.")
    for flag, entity_type in DEFAULT_FLAGS:
        p.add_argument(f"--{flag}", action="store_true", help=f"The config defaults for all {entity_type}.")


def entity_types(args: argparse.Namespace) -> list[str]:
    return [*(args.entity_type or []), *(t for f, t in (*ENTITY_FLAGS, *DEFAULT_FLAGS) if opts.given(args, f))]


def entity_names(args: argparse.Namespace) -> list[str]:
    return [*args.entity_order, *(getattr(args, f.replace("-", "_")) for f, _ in ENTITY_FLAGS if opts.given(args, f)),
            *("" for f, _ in DEFAULT_FLAGS if opts.given(args, f))]


def check_args(args: argparse.Namespace) -> None:
    """ConfigCommandOptions.checkArgs, in Kafka's order."""
    opts.exactly_one(args, ("alter", "describe"), "Command must include exactly one action: --describe, --alter")
    opts.invalid_with(args, "describe", ("alter", "add-config", "delete-config"))
    types = entity_types(args)
    repeated = [t for i, t in enumerate(types) if t in types[:i]]
    if repeated:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(repeated)}")
    for t in types:
        if t not in TYPES:
            raise UsageError(f"Invalid entity type {t}, the entity type must be one of {', '.join(TYPES)} with a "
                             "--bootstrap-server or --bootstrap-controller argument")
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise UsageError("Only 'users' and 'clients' entity types may be specified together")
    if (args.entity_order or args.entity_type) and any(opts.given(args, f) for f, _ in (*ENTITY_FLAGS,
                                                                                         *DEFAULT_FLAGS)):
        raise UsageError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    names = entity_names(args)
    has_name, has_default = any(names), "" in names
    connections = sum(1 for c in (args.bootstrap_server, args.bootstrap_controller) if c)
    if connections == 0:
        raise UsageError("One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments "
                         "must be specified")
    if connections > 1:
        raise UsageError("Only one of --bootstrap-server, --boostrap-controller, and --zookeeper can be specified")
    if has_name and ("brokers" in types or "broker-loggers" in types):
        for broker_id in (n for n in names if n):
            if not re.fullmatch(r"[+-]?\d+", broker_id):
                raise UsageError(f"The entity name for {types[0]} must be a valid integer broker id, but it is: "
                                 f"{broker_id}")
    if args.describe:
        if not set(types) & {"users", "clients", "brokers", "ips"} and args.entity_default:
            raise UsageError(f"--entity-default must not be specified with --describe of {','.join(types)}")
        if "broker-loggers" in types and not has_name:
            raise UsageError(f"An entity name must be specified with --describe of {','.join(types)}")
    if args.alter:
        if set(types) & {"users", "clients", "brokers", "ips"}:
            if not has_name and not has_default:
                raise UsageError("An entity-name or default entity must be specified with --alter of users, clients, "
                                 "brokers or ips")
        elif not has_name:
            raise UsageError(f"An entity name must be specified with --alter of {','.join(types)}")
        if args.add_config and args.add_config_file:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if not args.add_config and not args.add_config_file and not args.delete_config:
            raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be specified "
                             "with --alter")


def configs_to_add(args: argparse.Namespace) -> dict[str, str]:
    """parseConfigsToBeAdded: a properties file, or k=v pairs split at commas outside [...],
    brackets dropped from values."""
    added: dict[str, str] = {}
    if args.add_config_file:
        added.update(read_properties(args.add_config_file, "--add-config-file"))
    if args.add_config:
        outside = r"(?=[^\]]*(?:\[|$))"
        for pair in re.split("," + outside, args.add_config):
            parts = re.split(r"\s*=\s*" + outside, pair)
            if len(parts) != 2:
                raise UsageError('Invalid entity config: all configs to be added must be in the format "key=val".')
            added[parts[0].strip()] = re.sub(r"\[?\]?", "", parts[1]).strip()
    for key in added:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise UsageError(f"Invalid character found for config key: {key}")
    return added


def configs_to_delete(args: argparse.Namespace) -> list[str]:
    return [k.strip() for entry in args.delete_config or [] for k in entry.split(",")]


# ---------------------------------------------------------------- topics, brokers and the like


async def resource_configs(admin: Admin, entity_type: str, name: str, synonyms: bool, every: bool) -> list[Any]:
    """getResourceConfig: the entries of one resource, only its dynamic ones unless `every`,
    sorted by name; a broker asked of itself."""
    resource_type, source = RESOURCES[entity_type]
    node = None
    if entity_type in ("brokers", "broker-loggers") and name:
        if not re.fullmatch(r"[+-]?\d+", name):
            raise UsageError(f"The entity name for {entity_type} must be a valid integer broker id, found: {name}")
        node = await admin.node(int(name))
    if entity_type == "brokers":
        source = 2 if name else 3  # DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
    entries = (await describe_resources(admin, resource_type, [name], synonyms, node))[name]
    return sorted((e for e in entries if every or source is None or e.config_source == source), key=lambda e: e.name)


def entry_line(e: Any) -> str:
    synonyms = ", ".join(f"{SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={s.value}" for s in e.synonyms or ())
    return f"  {e.name}={e.value} sensitive={'true' if e.is_sensitive else 'false'} synonyms={{{synonyms}}}"


async def describe_resource(admin: Admin, entity_type: str, name: str | None, every: bool) -> None:
    if name is not None:
        names = [name]
    elif entity_type == "topics":
        names = [t.name for t in (await admin.metadata()).topics]
    elif entity_type in ("brokers", "broker-loggers"):
        names = [str(n.node_id) for n in await admin.nodes()] + [""]
    elif entity_type == "groups":
        names = [g.group_id for g in await list_groups(admin)]
    else:
        raise UsageError(f"Invalid entity type: {entity_type}")
    for entity in names:
        if entity == "":
            print(f"Default configs for {entity_type} in the cluster are:")
        else:
            print(f"{'All' if every else 'Dynamic'} configs for {entity_type[:-1]} {entity} are:")
        for e in await resource_configs(admin, entity_type, entity, True, every):
            print(entry_line(e))


async def alter_resource(admin: Admin, entity_type: str, name: str, added: dict[str, str],
                         deleted: list[str]) -> None:
    old = {e.name: e for e in await resource_configs(admin, entity_type, name, False, False)}
    invalid = [k for k in deleted if k not in old]
    if invalid:
        raise UsageError(f"Invalid config(s): {','.join(invalid)}")
    resource_type = RESOURCES[entity_type][0]
    if entity_type != "brokers":
        ops = [{"name": k, "config_operation": SET, "value": v} for k, v in added.items()]
        ops += [{"name": k, "config_operation": DELETE, "value": ""} for k in deleted]
        answer = await admin.call(INCREMENTAL_ALTER_CONFIGS, range(0, 2), {"validate_only": False, "resources": [
            {"resource_type": resource_type, "resource_name": name, "configs": ops}]})
    else:
        new = {k: e.value for k, e in old.items() if k not in deleted} | added
        sensitive = [k for k, v in new.items() if v is None]
        if sensitive:
            raise UsageError("All sensitive broker config entries must be specified for --alter, missing entries: "
                             f"Set({', '.join(sensitive)})")
        answer = await admin.call(ALTER_CONFIGS, range(0, 3), {"validate_only": False, "resources": [
            {"resource_type": resource_type, "resource_name": name,
             "configs": [{"name": k, "value": v} for k, v in new.items()]}]})
    for response in answer.responses:
        check(response.error_code, response.error_message)


async def _run(args: argparse.Namespace, types: list[str], names: list[str]) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, args.bootstrap_controller)
    settings = read_command_config(args.command_config)
    if args.alter and len(types) != len(names):
        raise UsageError("An entity name must be specified for every entity type")
    head = types[0]
    async with Admin(bootstrap, settings, endpoint_type) as admin:
        if args.describe:
            if head in ("users", "clients", "ips"):
                await configs_quotas.describe(admin, types, names)
            else:
                await describe_resource(admin, head, names[0] if names else None, args.all)
            return
        added, deleted = configs_to_add(args), configs_to_delete(args)
        if head in ("users", "clients", "ips"):
            await configs_quotas.alter(admin, types, names, added, deleted)
        else:
            await alter_resource(admin, head, names[0], added, deleted)
    if names[0]:
        print(f"Completed updating config for {head[:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {head} in the cluster.")


async def _run_paired(args: argparse.Namespace) -> None:
    """ConfigCommand pairs users before clients, their names with them."""
    types, names = entity_types(args), entity_names(args)
    if set(types) == {"users", "clients"} and types[0] == "clients":
        types, names = types[::-1], names[::-1] if len(names) == 2 else names
    await _run(args, types, names)


@quiet_on_broken_pipe
def main(args: argparse.Namespace) -> int:
    def failed(e: KafkaError | ToolError) -> None:
        line = f"java.util.concurrent.ExecutionException: {e.java()}" if isinstance(e, KafkaError) else str(e)
        print(f"Error while executing config command with args '{' '.join(args.argv[1:])}'\n{line}", file=sys.stderr)

    return run_tool(args, check_args, _run_paired, failed)
