"""Kafka's command-line checks (CommandLineUtils, jopt-simple), with their messages.

The admin tools take Kafka's flags through argparse and then check their combinations as
Kafka's tools do, in the same order, so a wrong command fails with the line Kafka's tool
prints first (jopt-simple names an option as `[name]`). Kafka prints the whole help after
that line; kraft prints the line alone and exits 1, as Kafka does.
"""

import argparse
from collections.abc import Iterable

from kraft.cli.admin_connection import UsageError


def given(args: argparse.Namespace, option: str) -> bool:
    """Whether `--option` was on the command line (a flag set, a value or values given)."""
    value = getattr(args, option.replace("-", "_"), None)
    return value not in (None, False, [])


def spec(option: str) -> str:
    """An option as jopt-simple prints it."""
    return f"[{option}]"


def require(args: argparse.Namespace, *options: str) -> None:
    for option in options:
        if not given(args, option):
            raise UsageError(f'Missing required argument "{spec(option)}"')


def invalid_with(args: argparse.Namespace, used: str, invalid: Iterable[str]) -> None:
    """CommandLineUtils.checkInvalidArgs: `used` cannot go with any of `invalid`."""
    if given(args, used):
        for option in invalid:
            if given(args, option):
                raise UsageError(f'Option "{spec(used)}" can\'t be used with option "{spec(option)}"')


def exactly_one(args: argparse.Namespace, options: Iterable[str], message: str) -> str:
    """The one action given, or UsageError with Kafka's message."""
    chosen = [o for o in options if given(args, o)]
    if len(chosen) != 1:
        raise UsageError(message)
    return chosen[0]


def add_connection(parser: argparse.ArgumentParser, controller: bool = True,
                   config_help: str = "Property file containing configs to be passed to Admin Client.") -> None:
    """--bootstrap-server, --bootstrap-controller (where Kafka's tool takes it) and
    --command-config."""
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="REQUIRED: The server(s) to connect to.")
    if controller:
        parser.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                            help="The controller(s) to connect to (KIP-919).")
    parser.add_argument("--command-config", metavar="FILE", help=config_help)
