"""`kraft topics`, Kafka's kafka-topics: its flags, its checks in its order, its output.

    --bootstrap-server HOST:PORT [--command-config FILE]
      --list | --describe | --create | --alter | --delete
      [--topic REGEX] [--topic-id ID] [--exclude-internal] [--if-exists] [--if-not-exists]
      [--partitions N] [--replication-factor N] [--replica-assignment 1:2,2:3] [--config k=v ...]
      [--under-replicated-partitions | --unavailable-partitions | --under-min-isr-partitions |
       --at-min-isr-partitions | --topics-with-overrides]

`--topic` is a Java regular expression as Kafka's TopicFilter reads it (commas mean "or",
spaces and surrounding quotes dropped) matched against the whole name. `--describe` prints
Kafka's two line shapes, tab-separated: the topic's (`Topic: t\tTopicId: ..\tPartitionCount:
..\tReplicationFactor: ..\tConfigs: k=v,..`, the configs whose source is not Kafka's default)
and each partition's (`\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tElr:
N/A\tLastKnownElr: N/A`). Kafka's admin client reads partitions through
DescribeTopicPartitions where a broker serves it; kraft serves Metadata, from which Kafka's
tool prints the eligible leader replicas as N/A, and so does this one.

Errors: a usage error is Kafka's message on stderr; anything else Kafka's tool prints on
stdout as `Error while executing topic command : <message>`; both exit 1.
"""

import argparse
import re
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kraft.cli import kafka_options as opts
from kraft.cli.admin_client import Admin, bootstrap_of, run_tool
from kraft.cli.admin_connection import ToolError, UsageError, read_command_config
from kraft.cli.config_entries import DEFAULT_CONFIG, describe_configs
from kraft.cli.kafka_errors import KafkaError, check
from kraft.cli.output import quiet_on_broken_pipe
from kraft.storage.meta_properties import kafka_text, uuid_from_kafka_text

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})  # Topic.isInternal
ACTIONS = ("create", "list", "alter", "describe", "delete")
REPORTS = ("under-replicated-partitions", "under-min-isr-partitions", "at-min-isr-partitions",
           "unavailable-partitions")
NO_TOPIC_ID = uuid.UUID(int=0)
TIMEOUT = timedelta(milliseconds=30_000)
ALTER_HINT = " (To alter topic configurations, the kafka-configs tool can be used.)"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, delete, describe, or change a topic (like kafka-topics)")
    opts.add_connection(p, controller=False)
    for action, text in (("list", "List all available topics."), ("create", "Create a new topic."),
                         ("delete", "Delete a topic."), ("alter", "Alter the number of partitions."),
                         ("describe", "List details for the given topics.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", help="The topic to create, alter, describe or delete; a regular expression except "
                                   "for --create")
    p.add_argument("--topic-id", help="The topic-id to describe.")
    p.add_argument("--config", action="append", metavar="NAME=VALUE", help="A topic configuration override for "
                                                                            "the topic being created.")
    p.add_argument("--delete-config", action="append", metavar="NAME", help="No longer supported (since 4.0).")
    p.add_argument("--partitions", type=int, help="The number of partitions for the topic being created or altered.")
    p.add_argument("--replication-factor", type=int, help="The replication factor for each partition.")
    p.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...",
                   help="A list of manual partition-to-broker assignments.")
    for report, text in (("under-replicated-partitions", "only show under-replicated partitions"),
                         ("unavailable-partitions", "only show partitions whose leader is not available"),
                         ("under-min-isr-partitions", "only show partitions whose isr count is below the minimum"),
                         ("at-min-isr-partitions", "only show partitions whose isr count is the minimum"),
                         ("topics-with-overrides", "only show topics that have overridden configs")):
        p.add_argument(f"--{report}", action="store_true", help=f"If set when describing topics, {text}.")
    p.add_argument("--if-exists", action="store_true", help="Only if the topic exists (alter, delete, describe).")
    p.add_argument("--if-not-exists", action="store_true", help="Only if the topic does not exist (create).")
    p.add_argument("--exclude-internal", action="store_true", help="Exclude internal topics when listing or "
                                                                   "describing topics.")
    p.add_argument("--partition-size-limit-per-response", type=int, help="Accepted, as Kafka's; kraft answers "
                                                                         "in one response.")
    p.set_defaults(func=main)


def check_args(args: argparse.Namespace) -> None:
    """TopicCommandOptions.checkArgs, in Kafka's order."""
    opts.exactly_one(args, ACTIONS, "Command must include exactly one action: --list, --describe, --create, "
                                    "--alter or --delete")
    if args.delete_config:
        print("delete-config option is no longer supported and deprecated since version 4.0. The config will be "
              "fully removed in future releases.", file=sys.stderr)
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server must be specified")
    if args.describe and args.if_exists:
        if not args.topic and not args.topic_id:
            raise UsageError("--topic or --topic-id is required to describe a topic")
        if args.topic and args.topic_id:
            print("Only topic id will be used when both --topic and --topic-id are specified and topicId is not "
                  "Uuid.ZERO_UUID")
    if not args.list and not args.describe:
        opts.require(args, "topic")
    if args.alter:
        if args.config:
            raise UsageError(f'Option combination "[{opts.spec("bootstrap-server")}, {opts.spec("config")}]" '
                             f'can\'t be used with option "{opts.spec("alter")}"{ALTER_HINT}')
        opts.require(args, "partitions")
    others = {a: [o for o in ACTIONS if o not in a] for a in (("alter", "create"), ("create",))}
    opts.invalid_with(args, "config", others[("alter", "create")])
    opts.invalid_with(args, "partitions", others[("alter", "create")])
    opts.invalid_with(args, "replication-factor", others[("create",)])
    opts.invalid_with(args, "replica-assignment", others[("alter", "create")])
    if args.create:
        opts.invalid_with(args, "replica-assignment", ("partitions", "replication-factor"))
    for report in REPORTS:
        opts.invalid_with(args, report, ["topics-with-overrides", *(a for a in ACTIONS if a != "describe")])
    opts.invalid_with(args, "topics-with-overrides", [*REPORTS, *(a for a in ACTIONS if a != "describe")])
    opts.invalid_with(args, "if-exists", [a for a in ACTIONS if a not in ("alter", "delete", "describe")])
    opts.invalid_with(args, "if-not-exists", [a for a in ACTIONS if a != "create"])
    opts.invalid_with(args, "exclude-internal", [a for a in ACTIONS if a not in ("list", "describe")])


def parse_replica_assignment(text: str) -> list[list[int]]:
    """`1:2,2:3` as TopicCommand reads it: one broker list per partition, no duplicates,
    every partition with the first one's replication factor."""
    assignment: list[list[int]] = []
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise ToolError(f'For input string: "{part}"') from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise ToolError("Partition replica lists may not contain duplicate entries: "
                            + ",".join(map(str, duplicates)))
        assignment.append(brokers)
        if len(brokers) != len(assignment[0]):
            raise ToolError(f"Partition {i} has different replication factor: {brokers}")
    return assignment


def parse_configs(entries: Sequence[str]) -> dict[str, str]:
    """--config k=v, split as Java's String.split (trailing empty parts dropped)."""
    configs: dict[str, str] = {}
    for entry in entries:
        parts = re.split(r"\s*=\s*", entry)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2:
            raise ToolError('requirement failed: Invalid topic config: all configs to be added must be in the '
                            'format "key=val".')
        configs[parts[0].strip()] = parts[1].strip()
    return configs


def topic_filter(raw: str) -> re.Pattern[str]:
    """Kafka's TopicFilter.IncludeList: commas are alternatives, spaces and quotes dropped."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise ToolError(f"{regex} is an invalid regex.") from None


async def topic_names(admin: Admin, topic: str | None, exclude_internal: bool) -> list[str]:
    """TopicService.getTopics: every topic (internal ones too unless excluded), sorted,
    filtered by --topic."""
    metadata = await admin.metadata()
    names = sorted(t.name for t in metadata.topics if not (exclude_internal and t.is_internal))
    pattern = topic_filter(topic) if topic is not None else None
    return [n for n in names
            if (pattern is None or pattern.fullmatch(n)) and not (exclude_internal and n in INTERNAL_TOPICS)]


def ensure_found(found: Sequence[Any], topic: str | None, required: bool, what: str = "Topic") -> None:
    if topic and required and not found:
        raise ToolError(f"{what} 'Optional[{topic}]' does not exist as expected" if what == "Topic"
                        else f"{what} '{topic}' does not exist as expected")


# ---------------------------------------------------------------- create, alter, delete


async def create(admin: Admin, args: argparse.Namespace) -> None:
    name = args.topic
    if "." in name or "_" in name:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
              "collide. To avoid issues it is best to use either, but not both.")
    configs = parse_configs(args.config or [])
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise ToolError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise ToolError("The partitions must be greater than 0")
    topic: dict[str, Any] = {"name": name, "num_partitions": -1, "replication_factor": -1, "assignments": [],
                             "configs": [{"name": k, "value": v} for k, v in configs.items()]}
    if args.replica_assignment:
        topic["assignments"] = [{"partition_index": i, "broker_ids": b}
                                for i, b in enumerate(parse_replica_assignment(args.replica_assignment))]
    else:
        topic["num_partitions"] = -1 if args.partitions is None else args.partitions
        topic["replication_factor"] = -1 if args.replication_factor is None else args.replication_factor
    answer = await admin.call(CREATE_TOPICS, range(2, 8), {"topics": [topic], "timeout": TIMEOUT,
                                                           "validate_only": False})
    result = answer.topics[0]
    if result.error_code == 36 and args.if_not_exists:  # TOPIC_ALREADY_EXISTS
        return
    check(result.error_code, result.error_message)
    print(f"Created topic {name}.")


async def alter(admin: Admin, args: argparse.Namespace) -> None:
    topics = await topic_names(admin, args.topic, args.exclude_internal)
    ensure_found(topics, args.topic, not args.if_exists)
    if not topics:
        return
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
    metadata = await admin.metadata(topics)
    requests = []
    for t in metadata.topics:
        check(t.error_code)
        new = None
        if assignment is not None:
            new = [{"broker_ids": b} for b in assignment[len(t.partitions):]]
        requests.append({"name": t.name, "count": args.partitions, "assignments": new})
    answer = await admin.call(CREATE_PARTITIONS, range(0, 4), {"topics": requests, "timeout": TIMEOUT,
                                                               "validate_only": False})
    for result in answer.results:
        check(result.error_code, result.error_message)


async def delete(admin: Admin, args: argparse.Namespace) -> None:
    topics = await topic_names(admin, args.topic, args.exclude_internal)
    ensure_found(topics, args.topic, not args.if_exists)
    if not topics:
        return
    answer = await admin.call(DELETE_TOPICS, range(1, 6), {
        "topic_names": topics, "topics": [{"name": t, "topic_id": NO_TOPIC_ID} for t in topics],
        "timeout": TIMEOUT})
    for result in answer.responses:
        check(result.error_code, getattr(result, "error_message", None))


# ---------------------------------------------------------------- describe


@dataclass(frozen=True)
class Partition:
    topic: str
    index: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int

    def line(self) -> str:
        ids = ",".join
        return (f"\tTopic: {self.topic}\tPartition: {self.index}\tLeader: "
                f"{self.leader if self.leader >= 0 else 'none'}\tReplicas: {ids(map(str, self.replicas))}\t"
                f"Isr: {ids(map(str, self.isr))}\tElr: N/A\tLastKnownElr: N/A")

    def shown(self, args: argparse.Namespace, live: set[int]) -> bool:
        """DescribeOptions.shouldPrintTopicPartition."""
        reports = [getattr(args, r.replace("-", "_")) for r in REPORTS]
        return (not any(reports)
                or (args.under_replicated_partitions and len(self.replicas) > len(self.isr))
                or (args.unavailable_partitions and (self.leader < 0 or self.leader not in live))
                or (args.under_min_isr_partitions and (self.leader < 0 or len(self.isr) < self.min_isr))
                or (args.at_min_isr_partitions and len(self.isr) == self.min_isr))


async def describe(admin: Admin, args: argparse.Namespace) -> None:
    if args.topic_id and args.topic_id != kafka_text(NO_TOPIC_ID):
        try:
            wanted = uuid_from_kafka_text(args.topic_id)
        except ValueError as e:
            raise ToolError(str(e)) from None
        listed = (await admin.metadata()).topics
        topics = [t.name for t in listed if t.topic_id == wanted and not (args.exclude_internal and t.is_internal)]
        ensure_found(topics, args.topic_id, not args.if_exists, "TopicId")
    else:
        topics = await topic_names(admin, args.topic, args.exclude_internal)
        ensure_found(topics, args.topic, not args.if_exists)
    if not topics:
        return
    metadata = await admin.metadata(topics)
    configs = await describe_configs(admin, topics)
    live = {n.node_id for n in await admin.nodes()}
    reporting = any(getattr(args, r.replace("-", "_")) for r in REPORTS)
    for t in metadata.topics:
        check(t.error_code)
        entries = configs[t.name]
        overridden = [(e.name, e.value) for e in entries if e.config_source != DEFAULT_CONFIG]
        partitions = sorted(t.partitions, key=lambda p: p.partition_index)
        # __cluster_metadata has no min.insync.replicas: its writes are Raft's, committed by a majority.
        min_isr = int(next((e.value for e in entries if e.name == "min.insync.replicas"), "1"))
        if not reporting and (not args.topics_with_overrides or overridden):
            topic_id = "" if t.topic_id == NO_TOPIC_ID else f"\tTopicId: {kafka_text(t.topic_id)}"
            print(f"Topic: {t.name}{topic_id}\tPartitionCount: {len(partitions)}\tReplicationFactor: "
                  f"{len(partitions[0].replica_nodes)}\tConfigs: {','.join(f'{k}={v}' for k, v in overridden)}")
        if args.topics_with_overrides:
            continue
        for p in partitions:
            partition = Partition(t.name, p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes),
                                  min_isr)
            if partition.shown(args, live):
                print(partition.line())


async def list_topics(admin: Admin, args: argparse.Namespace) -> None:
    print("\n".join(await topic_names(admin, args.topic, args.exclude_internal)))


async def _run(args: argparse.Namespace) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, None)
    settings = read_command_config(args.command_config)
    action = {"create": create, "alter": alter, "list": list_topics, "describe": describe, "delete": delete}
    chosen = next(a for a in ACTIONS if getattr(args, a))
    async with Admin(bootstrap, settings, endpoint_type) as admin:
        await action[chosen](admin, args)


def _failed(e: KafkaError | ToolError) -> None:
    print(f"Error while executing topic command : {e}")


@quiet_on_broken_pipe
def main(args: argparse.Namespace) -> int:
    return run_tool(args, check_args, _run, _failed)
