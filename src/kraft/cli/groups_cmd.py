"""`kraft consumer-groups`, Kafka's kafka-consumer-groups: its flags and checks, and what
ConsumerGroupCommand prints, column for column.

    --bootstrap-server HOST:PORT [--command-config FILE] [--timeout MS]
      --list [--state [S,..]] [--type [T,..]]
      --describe (--group G ... | --all-groups) [--offsets | --members [--verbose] | --state]
      --delete (--group G ... | --all-groups)
      --delete-offsets --group G --topic T[:P,P] ...
      --reset-offsets ...                                    (groups_reset.py)

`--describe` prints Kafka's tables: the columns are as wide as their widest value (at
least Kafka's minimums), each line starts a new paragraph as Kafka's printf does, and the
rows of a member come in the order of Kafka's HashMap of them (java_order.py). LAG is the
log end offset (the partition's high watermark) less the committed offset.

Errors go where Kafka's tool writes them: a usage error on stderr; `Error: ...` on stdout
after a blank line (a missing group, a refused deletion). Kafka's tool exits 0 after
printing such an error; this one exits 1, so a script can tell (docs/architecture.md).
"""

import argparse
import sys
from dataclasses import dataclass, replace
from typing import Any

from kraft.cli import groups_reset
from kraft.cli import kafka_options as opts
from kraft.cli.admin_client import Admin, bootstrap_of, run_tool
from kraft.cli.admin_connection import Reported, ToolError, UsageError, read_command_config
from kraft.cli.groups_client import (
    LATEST,
    Group,
    TopicPartition,
    committed,
    delete_groups,
    delete_offsets,
    describe_group,
    list_groups,
    log_offsets,
)
from kraft.cli.kafka_errors import KafkaError
from kraft.cli.output import quiet_on_broken_pipe
from kraft.java_order import hash_map_order, topic_partition_hash

ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
TYPES = ("Consumer", "Classic", "Share")
MISSING = "-"


def error(message: str) -> None:
    """ConsumerGroupCommand.printError: a blank line, then the error, on stdout."""
    print(f"\nError: {message}")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, delete consumer groups or reset their offsets "
                                               "(like kafka-consumer-groups)")
    opts.add_connection(p, controller=False,
                        config_help="Property file containing configs to be passed to Admin Client and Consumer.")
    for action, text in (("list", "List all consumer groups."),
                         ("describe", "Describe consumer group and list offset lag related to given group."),
                         ("delete", "Pass in groups to delete topic partition offsets and ownership information."),
                         ("reset-offsets", "Reset offsets of consumer group (groups must be inactive)."),
                         ("delete-offsets", "Delete offsets of consumer group.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--group", action="append", help="The consumer group we wish to act on.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--topic", action="append", help="A topic, or topic:0,1,2 for --reset-offsets.")
    p.add_argument("--all-topics", action="store_true", help="All topics of the group, for --reset-offsets.")
    p.add_argument("--timeout", type=int, metavar="MS", help="The time to wait for the group (default 5000).")
    for flag in ("members", "verbose", "offsets"):
        p.add_argument(f"--{flag}", action="store_true", help=f"With --describe: {flag}.")
    p.add_argument("--state", nargs="?", const="", help="With --describe: the group's state; with --list: the "
                                                         "state of all groups, or only those in these states.")
    p.add_argument("--type", nargs="?", const="", help="With --list: the types of the groups (classic,consumer).")
    groups_reset.add_arguments(p)
    p.set_defaults(func=main)


def check_args(args: argparse.Namespace) -> None:
    """ConsumerGroupCommandOptions.checkArgs, in Kafka's order."""
    opts.exactly_one(args, ACTIONS, "Command must include exactly one action: --list, --describe, --delete, "
                                    "--reset-offsets, --delete-offsets")
    opts.require(args, "bootstrap-server")
    scopes = f"{opts.spec('group')}, {opts.spec('all-groups')}"
    for flag in ("members", "verbose", "offsets"):
        if given(args, flag) and not args.describe:
            raise UsageError(f"Option {opts.spec(flag)} is available only when {opts.spec('describe')} is present")
    if args.type is not None and not args.list:
        raise UsageError(f"Option {opts.spec('type')} is available only when {opts.spec('list')} is present")
    if args.state is not None and not (args.list or args.describe):
        raise UsageError(f"Option {opts.spec('state')} is available only when {opts.spec('describe')} or "
                         f"{opts.spec('list')} is present")
    if args.describe:
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {opts.spec('describe')} takes one of these options: {scopes}")
        if sum(bool(x) for x in (args.members, args.offsets, args.state is not None)) > 1:
            raise UsageError(f"Option {opts.spec('describe')} takes at most one of these options: "
                             f"{opts.spec('members')}, {opts.spec('offsets')}, {opts.spec('state')}")
        if args.state:
            raise UsageError(f"Option {opts.spec('describe')} does not take a value for {opts.spec('state')}")
    if args.delete:
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {opts.spec('delete')} takes one of these options: {scopes}")
        if args.topic:
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if args.delete_offsets and (not args.group or not args.topic):
        raise UsageError(f"Option {opts.spec('delete-offsets')} takes the following options: "
                         f"{opts.spec('group')}, {opts.spec('topic')}")
    if args.reset_offsets:
        groups_reset.check_args(args, scopes)
    opts.invalid_with(args, "group", ["all-groups"])
    opts.invalid_with(args, "group", ["list"])
    opts.invalid_with(args, "topic", ["list", "describe"])


def given(args: argparse.Namespace, flag: str) -> bool:
    return opts.given(args, flag)


def parse_filter(text: str | None, known: tuple[str, ...], what: str) -> list[str]:
    """--state / --type values, case-insensitively; IllegalArgumentException's line else."""
    if not text:
        return []
    chosen = []
    for item in (s.strip() for s in text.split(",")):
        match = next((k for k in known if k.lower() == item.lower()), None)
        if match is None:
            raise UsageError(f"Invalid {what} list '{text}'. Valid {what}s are: {', '.join(known)}")
        chosen.append(match)
    return chosen


# ---------------------------------------------------------------- list


async def list_all(admin: Admin, args: argparse.Namespace) -> None:
    if args.state is None and args.type is None:
        for g in await list_groups(admin):
            print(g.group_id)
        return
    states = parse_filter(args.state, STATES, "state")
    types = parse_filter(args.type, TYPES, "type")
    groups = await list_groups(admin, states, [t.lower() for t in types])
    width = max([15, *(len(g.group_id) for g in groups)]) + 10
    columns = [("GROUP", lambda g: g.group_id, width)]
    if args.type is not None:
        columns.append(("TYPE", lambda g: (getattr(g, "group_type", "") or "unknown").capitalize(), 20))
    if args.state is not None:
        columns.append(("STATE", lambda g: g.group_state or "Unknown", 20))
    print(" ".join(f"{name:<{w}}" for name, _, w in columns))
    for g in groups:
        print(" ".join(f"{value(g):<{w}}" for _, value, w in columns))


# ---------------------------------------------------------------- describe


@dataclass(frozen=True)
class Row:
    """PartitionAssignmentState: one partition of a group, with its member if assigned."""

    group: str
    topic: str = MISSING
    partition: str = MISSING
    offset: str = MISSING
    log_end: str = MISSING
    lag: str = MISSING
    consumer_id: str = MISSING
    host: str = MISSING
    client_id: str = MISSING


def state_allows(group: Group, rows: int) -> bool:
    """shouldPrintMemberState: what Kafka says of the group's state, and whether a table
    follows."""
    if group.state == "Dead":
        error(f"Consumer group '{group.group_id}' does not exist.")
        return False
    if group.state == "Empty":
        print(f"\nConsumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)
    return rows > 0


async def offset_rows(admin: Admin, group: Group) -> list[Row]:
    """collectGroupOffsets: the assigned partitions member by member (most partitions
    first), then the committed partitions no member has."""
    offsets = await committed(admin, group.group_id)
    assigned: list[TopicPartition] = []
    rows: list[Row] = []

    async def partitions(tps: list[TopicPartition], consumer: str, host: str, client: str) -> None:
        ordered = sorted(tps, key=lambda tp: tp[1])
        ends = await log_offsets(admin, ordered, LATEST)
        for tp in hash_map_order(ordered, topic_partition_hash):
            at, end = offsets.get(tp), ends[tp]
            lag = str(end.offset - at.offset) if at is not None and end is not None else MISSING
            rows.append(Row(group.group_id, tp[0], str(tp[1]), str(at.offset) if at else MISSING,
                            str(end.offset) if end else MISSING, lag, consumer, host, client))

    for m in sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment)):
        assigned += m.assignment
        await partitions(list(hash_map_order(m.assignment, topic_partition_hash)), m.member_id, m.host,
                         m.client_id)
    unassigned = [tp for tp in offsets if tp not in assigned]
    if unassigned:
        await partitions(hash_map_order(unassigned, topic_partition_hash), MISSING, MISSING, MISSING)
    return rows


def print_offsets(group: Group, rows: list[Row]) -> None:
    if not state_allows(group, len(rows)):
        return
    widths = [max([15, *(len(getattr(r, f)) for r in rows)]) for f in ("group", "topic", "consumer_id", "host")]
    g, t, c, h = widths
    header = Row("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID")
    for r in (header, *rows):
        print(f"\n{r.group:<{g}} {r.topic:<{t}} {r.partition:<10} {r.offset:<15} {r.log_end:<15} {r.lag:<15} "
              f"{r.consumer_id:<{c}} {r.host:<{h}} {r.client_id}", end="")
    print()


def print_members(group: Group, verbose: bool) -> None:
    """printMembers: the header even when the group has no member to show."""
    state_allows(group, len(group.members))
    members = group.members
    widths = {"group": 15, "consumer": 15, "instance": 17, "host": 15, "client": 15}
    for m in members:
        for key, value in (("group", group.group_id), ("consumer", m.member_id), ("instance", m.instance_id or ""),
                           ("host", m.host), ("client", m.client_id)):
            widths[key] = max(widths[key], len(value))
    with_instance = any(m.instance_id for m in members)

    def line(cells: list[str]) -> str:
        keys = ["group", "consumer", *(["instance"] if with_instance else []), "host", "client"]
        return "".join(f"{cell:<{widths[k]}} " for cell, k in zip(cells, keys)) + f"{cells[-1]:<15} "

    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance else []), "HOST", "CLIENT-ID",
              "#PARTITIONS"]
    print("\n" + line(header) + ("ASSIGNMENT" if verbose else ""))
    for m in members:
        cells = [group.group_id, m.member_id, *([m.instance_id or ""] if with_instance else []), m.host, m.client_id,
                 str(len(m.assignment))]
        print(line(cells) + (assignment_text(m.assignment) if verbose else ""))


def assignment_text(assignment: tuple[TopicPartition, ...]) -> str:
    """--verbose's ASSIGNMENT: each topic's partitions as (0,1), topics sorted by that text;
    "topic" is not named, as in Kafka's tool."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[str]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(str(partition))
    return ", ".join(sorted("(" + ",".join(sorted(ps)) + ")" for ps in by_topic.values()))


def print_state(group: Group) -> None:
    if not state_allows(group, 1):
        return
    coordinator = f"{group.coordinator.host}:{group.coordinator.port}  ({group.coordinator.node_id})"
    width = max(25, len(coordinator))
    for cells in (("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                  (group.group_id, coordinator, group.assignor, group.state, str(len(group.members)))):
        print(f"\n{cells[0]:<{width}} {cells[1]:<25} {cells[2]:<20} {cells[3]:<15} {cells[4]}", end="")
    print()


async def describe(admin: Admin, args: argparse.Namespace) -> None:
    group_ids = [g.group_id for g in await list_groups(admin)] if args.all_groups else args.group
    groups = [await describe_group(admin, g) for g in sorted(set(group_ids))]
    for group in groups:
        if args.members:
            print_members(group, args.verbose)
        elif args.state is not None:
            print_state(group)
        else:
            print_offsets(group, await offset_rows(admin, group))
    if any(g.state == "Dead" for g in groups):
        raise Reported()


# ---------------------------------------------------------------- delete, delete-offsets


async def delete(admin: Admin, args: argparse.Namespace) -> None:
    group_ids = [g.group_id for g in await list_groups(admin)] if args.all_groups else args.group
    outcomes = await delete_groups(admin, group_ids)
    done = [g for g, e in outcomes.items() if e is None]
    failed = {g: e for g, e in outcomes.items() if e is not None}
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return
    error("Deletion of some consumer groups failed:")
    for g, e in failed.items():
        print(f"* Group '{g}' could not be deleted due to: java.util.concurrent.ExecutionException: {e.java()}")
    if done:
        print(f"\nThese consumer groups were deleted successfully: '{chr(39).join(done)}', '")
    raise Reported()


async def delete_group_offsets(admin: Admin, args: argparse.Namespace) -> None:
    group_id = args.group[0]
    partitions: list[TopicPartition] = []
    for topic in args.topic:
        if ":" in topic:
            partitions += groups_reset.topic_with_partitions(topic)
        else:
            metadata = await admin.metadata([topic])
            partitions += [(topic, p.partition_index) for t in metadata.topics for p in t.partitions]
    top, per_partition = await delete_offsets(admin, group_id, partitions)
    messages = {0: None, 24: f"'{group_id}' is not valid.", 69: f"'{group_id}' does not exist.",
                30: f"Access to '{group_id}' is not authorized.",
                68: f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is not empty.",
                86: "Encounter some partition level error, see the follow-up details:",
                29: "Encounter some partition level error, see the follow-up details:",
                3: "Encounter some partition level error, see the follow-up details:"}
    if top == 0:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group_id}")
    else:
        error(messages.get(top) or f"Encounter some unknown error: {KafkaError(top).error.name.upper()}")
    print(f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}", end="")
    for (topic, partition) in sorted(per_partition, key=lambda tp: tp[0] + str(tp[1])):
        code = per_partition[(topic, partition)] if top == 0 else top
        status = "Successful" if code == 0 else f"Error: :{KafkaError(code).java()}"
        print(f"\n{topic:<30} {partition:<15} {status:<15}", end="")
    print()
    if top != 0 or any(per_partition.values()):
        raise Reported()


async def _run(args: argparse.Namespace) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, None)
    settings = read_command_config(args.command_config)
    if args.timeout is not None:
        settings = replace(settings, request_timeout_s=args.timeout / 1000)
    async with Admin(bootstrap, settings, endpoint_type) as admin:
        if args.list:
            await list_all(admin, args)
        elif args.describe:
            await describe(admin, args)
        elif args.delete:
            await delete(admin, args)
        elif args.delete_offsets:
            await delete_group_offsets(admin, args)
        else:
            await groups_reset.reset(admin, args, list_groups)


def _failed(e: KafkaError | ToolError) -> None:
    error(f"Executing consumer group command failed due to {e.java() if isinstance(e, KafkaError) else e}")


@quiet_on_broken_pipe
def main(args: argparse.Namespace) -> int:
    return run_tool(args, check_args, _run, _failed)
