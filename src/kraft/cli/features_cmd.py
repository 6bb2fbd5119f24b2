"""`kraft features`, Kafka's kafka-features: its flags, what FeatureCommand prints, its exit.

    (--bootstrap-server | --bootstrap-controller) HOST:PORT [--command-config FILE]
      describe
      upgrade   [--metadata VERSION] [--feature NAME=LEVEL ...] [--release-version VERSION] [--dry-run]
      downgrade [--metadata VERSION] [--feature NAME=LEVEL ...] [--release-version VERSION] [--unsafe] [--dry-run]
      disable   [--feature NAME ...] [--unsafe] [--dry-run]
      version-mapping [--release-version VERSION]
      feature-dependencies --feature NAME=LEVEL [--feature ...]

`describe` asks ApiVersions (v4, so features whose minimum is 0 are listed) of the node, as
Kafka's admin client's describeFeatures does, and prints one line per supported feature:
`Feature: kraft.version<TAB>SupportedMinVersion: 0<TAB>SupportedMaxVersion: 1<TAB>
FinalizedVersionLevel: 0<TAB>Epoch: 5`, metadata.version by its name (3.3-IV3). The others
send one UpdateFeatures and print a line per feature, sorted by name: `kraft.version was
upgraded to 1.`, `... can be upgraded ...` with --dry-run, or `Could not downgrade
kraft.version to 0. <why>`; then, if any failed, `N out of M operation(s) failed.` on
standard error and exit 1. `--release-version` asks for every feature at the level Kafka's
release sets (kafka_releases.py); an upgrade leaves out those at 0, as Kafka's does, and the
controller refuses what kraft does not support with its usual message. The updates go in the
order of FeatureCommand's HashMap, in which Kafka's controller checks them too, so the first
refused, named in every line, is the one Kafka's tool would name.

`version-mapping` and `feature-dependencies` print from that table without a connection;
Kafka 4.2 still requires a bootstrap flag for them (KAFKA-19749, dropped in 4.3), and so does
this. Bad input is one line on standard error (Kafka's message) and exit 1.
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
from kraft.java_order import hash_map_order, string_hash
from kraft.metadata.features import UpgradeType
from kraft.metadata.image import METADATA_VERSION
from kraft.metadata.kafka_releases import (
    FEATURES,
    LATEST_METADATA_VERSION,
    METADATA_VERSIONS,
    MINIMUM_METADATA_VERSION,
    known_metadata_versions,
    metadata_version_of,
    release_levels,
    requirements,
)

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
        c.add_argument("--release-version", help=f"The release version to {name} all features to. For example, "
                                                 "3.9-IV0 will set metadata.version=21 and kraft.version=1. Use the "
                                                 "version-mapping command to learn which features will be set for "
                                                 "any given version.")
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
    c = commands.add_parser("version-mapping", help="Look up the corresponding features for a given metadata "
                                                    "version. Using the command with no --release-version argument "
                                                    "will return the mapping for the latest stable metadata version")
    c.add_argument("--release-version", help="The release version to use for the corresponding feature mapping. "
                                             f"The minimum is {METADATA_VERSIONS[MINIMUM_METADATA_VERSION]}; the "
                                             f"default is {METADATA_VERSIONS[LATEST_METADATA_VERSION]}")
    c = commands.add_parser("feature-dependencies", help="Look up dependencies for a given feature version. If the "
                                                         "feature is not known or the version not yet defined, an "
                                                         "error is thrown. Multiple features can be specified.")
    c.add_argument("--feature", action="append", metavar="NAME=LEVEL", help="The feature and version to look up "
                   "dependencies for, in feature=version format. For example: `metadata.version=5`.")
    p.set_defaults(func=main)


def level_text(feature: str, level: int) -> str:
    """FeatureCommand.levelToString: metadata.version by its name."""
    if feature != METADATA_VERSION:
        return str(level)
    return METADATA_VERSIONS[level] if MINIMUM_METADATA_VERSION <= level <= LATEST_METADATA_VERSION \
        else f"UNKNOWN {level}"


def metadata_level(text: str) -> int:
    """The level --metadata or --release-version names, or Kafka's message."""
    level = metadata_version_of(text)
    if level is None:
        raise ToolError(f"Unknown metadata.version {text}. Supported metadata.version are "
                        f"{', '.join(known_metadata_versions())}")
    return level


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
    elif args.release_version is not None:
        if args.metadata is not None or args.feature:
            raise ToolError("Can not specify `release-version` with other feature flags.")
        release = metadata_level(args.release_version)
        add(METADATA_VERSION, release)
        for name, level in release_levels(release).items():
            if kind != UpgradeType.UPGRADE or level > 0:  # Kafka's tool asks no upgrade to 0
                add(name, level)
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
        "feature_updates": [{"feature": name, "max_version_level": updates[name][0], "upgrade_type": updates[name][1],
                             "allow_downgrade": updates[name][1] != UpgradeType.UPGRADE}
                            for name in hash_map_order(updates, string_hash)],
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


def version_mapping(release_version: str | None) -> None:
    """FeatureCommand.handleVersionMapping: the release's metadata.version as given, then
    every production feature's level, in Kafka's order."""
    text = METADATA_VERSIONS[LATEST_METADATA_VERSION] if release_version is None else release_version
    level = metadata_version_of(text)
    if level is None:
        raise ToolError(f"Unknown release version '{text}'. Supported versions are: "
                        f"{METADATA_VERSIONS[MINIMUM_METADATA_VERSION]} to {METADATA_VERSIONS[LATEST_METADATA_VERSION]}")
    print(f"{METADATA_VERSION}={level} ({text})")
    for name, feature_level in release_levels(level).items():
        print(f"{name}={feature_level}")


def feature_dependencies(features: list[str]) -> None:
    """FeatureCommand.handleFeatureDependencies: each in turn, stopping at the first unknown."""
    for text in features:
        name, level = name_and_level(text)
        if name == METADATA_VERSION:
            if not MINIMUM_METADATA_VERSION <= level <= LATEST_METADATA_VERSION:
                raise ToolError(f"Unknown metadata.version {level}")
            print(f"{name}={level} ({METADATA_VERSIONS[level]}) has no dependencies.")
            continue
        needs = requirements(name, level)
        if needs is None:
            raise ToolError(f"No feature:{name} with feature level {level}" if name in FEATURES
                            else f"Unknown feature: {name}")
        if not needs:
            print(f"{name}={level} has no dependencies.")
            continue
        print(f"{name}={level} requires:")
        for needed, needed_level in needs:
            named = f" ({METADATA_VERSIONS[needed_level]})" if needed == METADATA_VERSION else ""
            print(f"    {needed}={needed_level}{named}")


def check_args(args: argparse.Namespace) -> None:
    """Kafka's argparse4j group: exactly one of --bootstrap-server, --bootstrap-controller
    (for every command in 4.2); feature-dependencies' required --feature."""
    if args.bootstrap_server is not None and args.bootstrap_controller is not None:
        raise UsageError("argument --bootstrap-controller: not allowed with argument --bootstrap-server")
    if args.bootstrap_server is None and args.bootstrap_controller is None:
        raise UsageError("one of the arguments --bootstrap-server --bootstrap-controller is required")
    if args.action == "feature-dependencies" and not args.feature:
        raise UsageError("argument --feature is required")


async def _run(args: argparse.Namespace) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, args.bootstrap_controller)
    settings = read_command_config(args.command_config)
    if args.action == "version-mapping":
        return version_mapping(args.release_version)
    if args.action == "feature-dependencies":
        return feature_dependencies(args.feature)
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
