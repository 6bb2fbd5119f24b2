"""`--add-scram` as kafka-storage format takes it (KIP-900, Kafka's ScramParser):

    SCRAM-SHA-256=[name=alice,password=alice-secret]
    SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]

name, and password or saltedpassword (with salt, both base64); iterations 4096 by default,
from 4096 to 16384; a value may be double-quoted. The result is a UserScramCredentialRecord:
the password is salted here and goes no further. Kafka's messages.

kraft also takes `password-file=PATH` (its first line) and `password-file=-` (a line of
standard input, one per such argument, in order), so that a password need not be in the
command line, which every user of the machine can read in its process list.
"""

import base64
import binascii
import sys
from collections.abc import Callable
from pathlib import Path

from kraft.metadata.records import UserScramCredentialRecord
from kraft.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted,
    new_salt,
    salted_password,
)


class ScramArgumentError(ValueError):
    pass


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramArgumentError(f"Failed to decode given {what}: {value}") from None


def _password_from(source: str, read_stdin: Callable[[], str] | None) -> str:
    """The password in the first line of file `source`, or of standard input for "-"."""
    if source == "-":
        line, where = (read_stdin or sys.stdin.readline)(), "standard input"
    else:
        try:
            with Path(source).open(encoding="utf-8") as file:
                line, where = file.readline(), source
        except (OSError, UnicodeDecodeError) as e:
            raise ScramArgumentError(f"Cannot read the password-file {source}: {e}") from None
    password = line.rstrip("\r\n")
    if not password:
        raise ScramArgumentError(f"No password in the first line of {where} (password-file)")
    return password


def parse_add_scram(argument: str, read_stdin: Callable[[], str] | None = None) -> UserScramCredentialRecord:
    text = argument.strip()
    mechanism_name, eq, config = text.partition("=")
    if not eq:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument '{text}'")
    mechanism = ScramMechanism.named(mechanism_name)
    if mechanism is None:
        raise ScramArgumentError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not config.startswith("["):
        raise ScramArgumentError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramArgumentError("Expected configuration string to end with ]")
    components: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, eq, value = component.partition("=")
        if not eq:
            raise ScramArgumentError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    name = components.pop("name", None)
    if name is None:
        raise ScramArgumentError("You must supply 'name' to add-scram")
    salt_text = components.pop("salt", None)
    salt = _base64(salt_text, "salt") if salt_text is not None else new_salt()
    iterations_text = components.pop("iterations", None)
    try:
        iterations = int(iterations_text) if iterations_text is not None else DEFAULT_ITERATIONS
    except ValueError:
        raise ScramArgumentError(f"Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    password_file = components.pop("password-file", None)
    salted_text = components.pop("saltedpassword", None)
    if sum(given is not None for given in (password, password_file, salted_text)) > 1:
        raise ScramArgumentError("Supply only one of 'password', 'password-file' or 'saltedpassword' to add-scram")
    if password_file is not None:
        password = _password_from(password_file, read_stdin)
    if password is None and salted_text is None:
        raise ScramArgumentError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    if password is None and salt_text is None:
        raise ScramArgumentError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if components:
        raise ScramArgumentError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < MIN_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using "
                                 f"{mechanism.name}")
    if iterations > MAX_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using "
                                 f"{mechanism.name}")
    salted = (salted_password(mechanism, password, salt, iterations) if password is not None
              else _base64(salted_text or "", "saltedPassword"))
    credential = credential_from_salted(mechanism, salted, salt, iterations)
    return UserScramCredentialRecord(name=name, mechanism=int(mechanism), salt=credential.salt,
                                     stored_key=credential.stored_key, server_key=credential.server_key,
                                     iterations=iterations)
