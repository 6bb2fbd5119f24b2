"""`kraft consumer-groups --reset-offsets`, as Kafka's ConsumerGroupCommand resets them.

    --reset-offsets (--group G ... | --all-groups) (--topic T[:P,..] ... | --all-topics | --from-file CSV)
      (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N |
       --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS | --from-file CSV)
      [--dry-run (the default) | --execute] [--export]

Only a group with no members (Empty, or Dead: not yet known) is reset; any other is
refused with Kafka's line, and the coordinator refuses the commit too should a member join
in between. Offsets beyond the log are moved to its end or start, with Kafka's warning.
`--export` prints Kafka's CSV (topic,partition,offset; with the group first when several
groups are reset), which `--from-file` reads back. Each offset committed keeps the leader
epoch of the record before it (KIP-320; groups_client.py), which Kafka's tool drops.
"""

import argparse
import re
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from kraft.cli import kafka_options as opts
from kraft.cli.admin_client import Admin
from kraft.cli.admin_connection import Reported, ToolError, UsageError
from kraft.cli.groups_client import (
    EARLIEST,
    LATEST,
    Offset,
    TopicPartition,
    commit,
    committed,
    describe_group,
    epoch_before,
    log_offsets,
)
from kraft.cli.kafka_errors import check
from kraft.java_order import hash_map_order, string_hash, topic_partition_hash

SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current", "shift-by",
             "from-file")
DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
                      re.IGNORECASE)
INACTIVE = ("Empty", "Dead")
Plan = dict[TopicPartition, Offset]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="Only show results (the default).")
    p.add_argument("--execute", action="store_true", help="Execute the reset.")
    p.add_argument("--export", action="store_true", help="Print the result as CSV (for --from-file).")
    p.add_argument("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    p.add_argument("--from-file", metavar="CSV", help="Reset offsets to values defined in CSV file.")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="Reset offsets to offset from datetime.")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS", help="Reset offsets to offset by duration from now.")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument("--shift-by", type=int, metavar="N", help="Reset offsets shifting current offset by 'n'.")


def check_args(args: argparse.Namespace, scopes: str) -> None:
    if args.dry_run and args.execute:
        raise UsageError(f"Option {opts.spec('reset-offsets')} only accepts one of {opts.spec('execute')} and "
                         f"{opts.spec('dry-run')}")
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing.In a future major release, the "
              "default behavior of this command will be to prompt the user before executing the reset rather than "
              "doing a dry run. You should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.", file=sys.stderr)
    if not args.group and not args.all_groups:
        raise UsageError(f"Option {opts.spec('reset-offsets')} takes one of these options: {scopes}")
    for scenario in SCENARIOS:
        opts.invalid_with(args, scenario, [s for s in SCENARIOS if s != scenario])


def topic_with_partitions(arg: str) -> list[TopicPartition]:
    """`topic:0,1,2` as Kafka's tool reads it."""
    parts = arg.split(":")
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    partitions = []
    for p in parts[1].split(","):
        try:
            partitions.append((parts[0], int(p)))
        except ValueError:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return partitions


DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})(Z|[+-]\d{2}(?::?\d{2})?)")


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: yyyy-MM-dd'T'HH:mm:ss.SSS, UTC unless a zone is given."""
    if len(text.split("T")) < 2:
        raise ToolError("java.text.ParseException: Error parsing timestamp. It does not contain a 'T' according "
                        "to ISO8601 format")
    if not any(c in text.split("T")[1] for c in "+-Z"):
        text += "Z"
    m = DATETIME.fullmatch(text)
    if m is None:
        raise ToolError(f'java.text.ParseException: Unparseable date: "{text}"')
    zone = m.group(2)
    if zone == "Z":
        offset = timedelta(0)
    else:
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)) * (-1 if zone[0] == "-" else 1)
    try:
        moment = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone(offset))
    except ValueError:
        raise ToolError(f'java.text.ParseException: Unparseable date: "{text}"') from None
    return int(moment.timestamp() * 1000)


def parse_duration(text: str) -> timedelta:
    """Java's Duration.parse (PnDTnHnMnS)."""
    m = DURATION.fullmatch(text)
    if m is None or not any(m.group(i) for i in range(2, 6)):
        raise ToolError("Text cannot be parsed to a Duration")
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in range(2, 6))
    fraction = int((m.group(6) or "0").ljust(9, "0")) / 1e9 * (-1 if seconds < 0 else 1)
    return sign * timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds + fraction)


def read_plan(path: str, args: argparse.Namespace) -> dict[str, dict[TopicPartition, int]]:
    """The CSV of --export: topic,partition,offset for one --group, else group,topic,partition,offset."""
    try:
        lines = [line for line in open(path).read().split("\n") if line.strip()]
    except OSError as e:
        raise ToolError(f"java.nio.file.NoSuchFileException: {path} ({e.strerror})") from None
    single = len(args.group or []) == 1 and all(len(line.split(",")) == 3 for line in lines[:1])
    plan: dict[str, dict[TopicPartition, int]] = {}
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if single:
            fields = [args.group[0], *fields]
        if len(fields) != 4 or not fields[2].lstrip("-").isdigit() or not fields[3].lstrip("-").isdigit():
            raise ToolError(f"Invalid reset plan line in {path}: {line!r}")
        plan.setdefault(fields[0], {})[(fields[1], int(fields[2]))] = int(fields[3])
    return plan


class Planner:
    """prepareOffsetsToReset for one group: the new offset of each partition, with its epoch."""

    def __init__(self, admin: Admin, args: argparse.Namespace, group_id: str) -> None:
        self.admin, self.args, self.group_id = admin, args, group_id

    async def partitions(self) -> list[TopicPartition]:
        if self.args.all_topics:
            return list(hash_map_order(await committed(self.admin, self.group_id), topic_partition_hash))
        if self.args.topic:
            found: list[TopicPartition] = []
            whole = []
            for arg in self.args.topic:
                if ":" in arg:
                    found += topic_with_partitions(arg)
                else:
                    whole.append(arg)
            if whole:
                metadata = await self.admin.metadata(whole)
                for t in metadata.topics:
                    check(t.error_code)
                    found += [(t.name, p.partition_index) for p in t.partitions]
            return found
        if not self.args.from_file:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        return []

    async def _ends(self, tps: list[TopicPartition], timestamp: int, what: str) -> dict[TopicPartition, Offset]:
        found = await log_offsets(self.admin, tps, timestamp)
        for tp, offset in found.items():
            if offset is None:
                raise UsageError(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
        return {tp: o for tp, o in found.items() if o is not None}

    async def in_range(self, wanted: dict[TopicPartition, int]) -> Plan:
        """checkOffsetsRange: each offset moved into [log start, log end], with Kafka's
        warning; the epoch of each."""
        tps = list(wanted)
        starts = await self._ends(tps, EARLIEST, "starting")
        ends = await self._ends(tps, LATEST, "ending")
        plan = {}
        for tp, offset in wanted.items():
            name = f"{tp[0]}-{tp[1]}"
            if offset > ends[tp].offset:
                print(f"WARN New offset ({offset}) is higher than latest offset for topic partition {name}. "
                      f"Value will be set to {ends[tp].offset}", file=sys.stderr)
                plan[tp] = ends[tp]
            elif offset < starts[tp].offset:
                print(f"WARN New offset ({offset}) is lower than earliest offset for topic partition {name}. "
                      f"Value will be set to {starts[tp].offset}", file=sys.stderr)
                plan[tp] = starts[tp]
            elif offset == ends[tp].offset:
                plan[tp] = ends[tp]
            else:
                plan[tp] = Offset(offset, await epoch_before(self.admin, tp, offset, starts[tp]))
        return plan

    async def at_timestamp(self, tps: list[TopicPartition], timestamp: int) -> Plan:
        found = await log_offsets(self.admin, tps, timestamp)
        empty = [tp for tp, o in found.items() if o is None]
        for tp in empty:
            print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.")
        plan = {tp: o for tp, o in found.items() if o is not None}
        plan.update(await self._ends(empty, LATEST, "ending") if empty else {})
        return plan

    async def plan(self, tps: list[TopicPartition], from_file: dict[str, dict[TopicPartition, int]] | None) -> Plan:
        a = self.args
        if a.to_offset is not None:
            return await self.in_range({tp: a.to_offset for tp in tps})
        if a.to_earliest:
            return await self._ends(tps, EARLIEST, "starting")
        if a.to_latest:
            return await self._ends(tps, LATEST, "ending")
        if a.shift_by is not None:
            current = await committed(self.admin, self.group_id)
            for tp in tps:
                if tp not in current:
                    raise UsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                     "committed offset")
            return await self.in_range({tp: current[tp].offset + a.shift_by for tp in tps})
        if a.to_datetime is not None:
            return await self.at_timestamp(tps, parse_datetime(a.to_datetime))
        if a.by_duration is not None:
            since = time.time() - parse_duration(a.by_duration).total_seconds()
            return await self.at_timestamp(tps, int(since * 1000))
        if from_file is not None:
            if self.group_id not in from_file:
                print(f"\nError: No reset plan for group {self.group_id} found")
                return {}
            return await self.in_range(from_file[self.group_id])
        if a.to_current:
            current = await committed(self.admin, self.group_id)
            plan = {tp: current[tp] for tp in tps if tp in current}
            missing = [tp for tp in tps if tp not in current]
            plan.update(await self._ends(missing, LATEST, "ending") if missing else {})
            return plan
        raise UsageError(f"Option '{opts.spec('reset-offsets')}' requires one of the following scenarios: "
                         f"[{', '.join(opts.spec(s) for s in SCENARIOS)}]")


async def reset(admin: Admin, args: argparse.Namespace,
                list_groups: Callable[[Admin], Awaitable[list[Any]]]) -> None:
    """Plans each group's reset, commits it with --execute, prints the plan or its CSV;
    Reported once everything is printed if a group was refused."""
    group_ids = [g.group_id for g in await list_groups(admin)] if args.all_groups else args.group
    from_file = read_plan(args.from_file, args) if args.from_file else None
    results: dict[str, Plan] = {}
    refused = []
    for group_id in hash_map_order(dict.fromkeys(group_ids), string_hash):
        group = await describe_group(admin, group_id)
        if group.state not in INACTIVE:
            print(f"\nError: Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                  f"state is {group.state}.")
            results[group_id] = {}
            refused.append(group_id)
            continue
        planner = Planner(admin, args, group_id)
        tps = await planner.partitions()
        plan = await planner.plan(tps, from_file)
        if args.execute:
            await commit(admin, group_id, plan)
        results[group_id] = {tp: plan[tp] for tp in hash_map_order(plan, topic_partition_hash)}
    if args.export:
        single = len(args.group or []) == 1
        print("".join(f"{'' if single else g + ','}{t},{p},{o.offset}\n"
                      for g, plan in results.items() for (t, p), o in plan.items()))
    else:
        print_plan(results)
    if refused:
        raise Reported()


def print_plan(results: dict[str, Plan]) -> None:
    """printOffsetsToReset."""
    if results:
        print(f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}", end="")
    for group_id, plan in results.items():
        for (topic, partition), offset in plan.items():
            print(f"\n{group_id:<30} {topic:<30} {partition:<10} {offset.offset:<15}", end="")
    print()
