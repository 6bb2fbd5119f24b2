"""`kraft features`, Kafka's kafka-features: its flags, what FeatureCommand prints, its exit.

    (--bootstrap-server | --bootstrap-controller) HOST:PORT [--command-config FILE]
      describe
      upgrade   [--metadata VERSION] [--feature NAME=LEVEL ...] [--dry-run]
      downgrade [--metadata VERSION] [--feature NAME=LEVEL ...] [--unsafe] [--dry-run]
      disable   [--feature NAME ...] [--unsafe] [--dry-run]

`describe` asks ApiVersions (v4, so features whose minimum is 0 are listed) of the node, as
Kafka's admin client's describeFeatures does, and prints one line per supported feature:
`Feature: kraft.version<TAB>SupportedMinVersion: 0<TAB>SupportedMaxVersion: 1<TAB>
FinalizedVersionLevel: 0<TAB>Epoch: 5`, metadata.version by its name (3.3-IV3). The others
send one UpdateFeatures and print a line per feature, sorted by name: `kraft.version was
upgraded to 1.`, `... can be upgraded ...` with --dry-run, or `Could not downgrade
kraft.version to 0. <why>`; then, if any failed, `N out of M operation(s) failed.` on
standard error and exit 1. Bad input is one line on standard error (Kafka's message) and
exit 1. Kafka's `--release-version`, `version-mapping` and `feature-dependencies` map Kafka
releases to the levels of features kraft does not implement; they are not here.
"""

import argparse
import re
import sys
from datetime import timedelta
from typing import Any

from kraft.cli.admin_client import Admin, bootstrap_of, run_tool
from kraft.cli.admin_connection import Reported, ToolError, UsageError, read_command_config
from kraft.cli.kafka_errors import KafkaError
from kraft.cli.output import quiet_on_broken_pipe
from kraft.metadata.features import (
    LATEST_METADATA_VERSION,
    METADATA_VERSIONS,
    MINIMUM_METADATA_VERSION,
    UpgradeType,
)
from kraft.metadata.image import METADATA_VERSION

API_VERSIONS, UPDATE_FEATURES = 18, 57
_SHORT = re.compile(r"[+-]?[0-9]+")  # what Java's Short.parseShort takes (then its range)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("features", help="describe, upgrade or downgrade feature flags (like kafka-features)")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="A comma-separated list of host:port "
                   "pairs to use for establishing the connection to the Kafka cluster.")
    p.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]", help="A comma-separated list of host:port "
                   "pairs to use for establishing the connection to the KRaft quorum.")
    p.add_argument("--command-config", metavar="FILE", help="Property file containing configs to be passed to "
                                                           "Admin Client.")
    commands = p.add_subparsers(dest="action", required=True)
    commands.add_parser("describe", help="Describes the current active feature flags.")
    for name, text in (("upgrade", "Upgrade one or more feature flags."),
                       ("downgrade", "Downgrade one or more feature flags.")):
        c = commands.add_parser(name, help=text)
        c.add_argument("--metadata", help=f"DEPRECATED -- The level to which we should {name} the metadata. "
                                          "For example, 3.3-IV3.")
        c.add_argument("--feature", action="append", metavar="NAME=LEVEL",
                       help=f"A feature {name} we should perform, in feature=level format. For example: "
                            "`metadata.version=5`.")
        if name == "downgrade":
            c.add_argument("--unsafe", action="store_true",
                           help="Perform this downgrade even if it may irreversibly destroy metadata.")
        c.add_argument("--dry-run", action="store_true", help=f"Validate this {name}, but do not perform it.")
    c = commands.add_parser("disable", help="Disable one or more feature flags. This is the same as downgrading "
                                            "the version to zero.")
    c.add_argument("--feature", action="append", metavar="NAME", help="A feature flag to disable.")
    c.add_argument("--unsafe", action="store_true",
                   help="Disable this feature flag even if it may irreversibly destroy metadata.")
    c.add_argument("--dry-run", action="store_true", help="Perform a dry-run of this disable operation.")
    p.set_defaults(func=main)


def level_text(feature: str, level: int) -> str:
    """FeatureCommand.levelToString: metadata.version by its name."""
    if feature != METADATA_VERSION:
        return str(level)
    return METADATA_VERSIONS[level] if MINIMUM_METADATA_VERSION <= level <= LATEST_METADATA_VERSION \
        else f"UNKNOWN {level}"


def metadata_level(text: str) -> int:
    """MetadataVersion.fromVersionString: `3.3-IV3`, or a release (`3.3`, `3.3.2`) for its
    latest level."""
    key = ".".join(text.split(".")[:2])
    levels = range(MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION + 1)
    for level in reversed(levels):
        if key in (METADATA_VERSIONS[level], METADATA_VERSIONS[level].split("-")[0]):
            return level
    names = ", ".join(METADATA_VERSIONS[level] for level in levels)
    raise ToolError(f"Unknown metadata.version {text}. Supported metadata.version are {names}")


def name_and_level(text: str) -> tuple[str, int]:
    """FeatureCommand.parseNameAndLevel."""
    name, equals, level = text.partition("=")
    if not equals:
        raise ToolError(f"Can't parse feature=level string {text}: equals sign not found.")
    level = level.strip()
    if not _SHORT.fullmatch(level) or not -0x8000 <= int(level) <= 0x7FFF:
        raise ToolError(f"Can't parse feature=level string {text}: unable to parse {level} as a short.")
    return name.strip(), int(level)


def updates_of(args: argparse.Namespace) -> dict[str, tuple[int, UpgradeType]]:
    """What to send: name -> (level, upgrade type), Kafka's checks and messages."""
    if args.action == "upgrade":
        kind = UpgradeType.UPGRADE
    else:
        kind = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
    updates: dict[str, tuple[int, UpgradeType]] = {}

    def add(name: str, level: int) -> None:
        if name in updates:
            raise ToolError(f"Feature {name} was specified more than once.")
        updates[name] = (level, kind)

    if args.action == "disable":
        for name in args.feature or []:
            add(name, 0)
    else:
        if args.metadata is not None:
            print(" `metadata` flag is deprecated and may be removed in a future release.")
            add(METADATA_VERSION, metadata_level(args.metadata))
        for text in args.feature or []:
            add(*name_and_level(text))
    if not updates:
        raise ToolError(f"You must specify at least one feature to {args.action}")
    return updates


async def describe(admin: Admin) -> None:
    answer = await admin.call(API_VERSIONS, range(3, 5), {"client_software_name": "kraft",
                                                          "client_software_version": "1"})
    if answer.error_code != 0:
        raise KafkaError(answer.error_code)
    finalized = {f.name: int(f.max_version_level) for f in answer.finalized_features}
    epoch = int(answer.finalized_features_epoch)
    for f in sorted(answer.supported_features, key=lambda f: f.name):
        print(f"Feature: {f.name}\tSupportedMinVersion: {level_text(f.name, int(f.min_version))}\t"
              f"SupportedMaxVersion: {level_text(f.name, int(f.max_version))}\t"
              f"FinalizedVersionLevel: {level_text(f.name, finalized.get(f.name, 0))}\t"
              f"Epoch: {epoch if epoch >= 0 else '-'}")


async def update(admin: Admin, action: str, updates: dict[str, tuple[int, UpgradeType]], dry_run: bool) -> None:
    """One UpdateFeatures; a line per feature as FeatureCommand.update prints them."""
    answer = await admin.call(UPDATE_FEATURES, range(0, 3), {
        "timeout": timedelta(seconds=admin.settings.request_timeout_s),
        "feature_updates": [{"feature": name, "max_version_level": level, "upgrade_type": kind,
                             "allow_downgrade": kind != UpgradeType.UPGRADE}
                            for name, (level, kind) in updates.items()],
        "validate_only": dry_run})
    errors: dict[str, KafkaError | None] = dict.fromkeys(updates)
    if answer.error_code != 0:
        errors = dict.fromkeys(updates, KafkaError(answer.error_code, answer.error_message))
    for result in getattr(answer, "results", ()):  # versions 0-1: per feature
        if result.error_code != 0 and result.feature in errors:
            errors[result.feature] = KafkaError(result.error_code, result.error_message)
    failures = 0
    for name in sorted(errors):
        level, error = updates[name][0], errors[name]
        if error is not None:
            failures += 1
            what = f"disable {name}" if action == "disable" else f"{action} {name} to {level}"
            print(f"{'Can not' if dry_run else 'Could not'} {what}. {error.message}")
        else:
            done = "disabled." if action == "disable" else f"{action}d to {level}."
            print(f"{name} {'can be' if dry_run else 'was'} {done}")
    if failures:
        print(f"{failures} out of {len(updates)} operation(s) failed.", file=sys.stderr)
        raise Reported


def check_args(args: argparse.Namespace) -> None:
    """Kafka's argparse4j group: exactly one of --bootstrap-server, --bootstrap-controller."""
    if args.bootstrap_server is not None and args.bootstrap_controller is not None:
        raise UsageError("argument --bootstrap-controller: not allowed with argument --bootstrap-server")
    if args.bootstrap_server is None and args.bootstrap_controller is None:
        raise UsageError("one of the arguments --bootstrap-server --bootstrap-controller is required")


async def _run(args: argparse.Namespace) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, args.bootstrap_controller)
    settings = read_command_config(args.command_config)
    updates = updates_of(args) if args.action != "describe" else {}
    async with Admin(bootstrap, settings, endpoint_type) as admin:
        if args.action == "describe":
            await describe(admin)
        else:
            await update(admin, args.action, updates, args.dry_run)


def _failed(e: KafkaError | ToolError) -> None:
    """FeatureCommand.mainNoExit: the message on standard error."""
    print(e.java() if isinstance(e, KafkaError) else e, file=sys.stderr)


@quiet_on_broken_pipe
def main(args: argparse.Namespace) -> int:
    return run_tool(args, check_args, _run, _failed)
