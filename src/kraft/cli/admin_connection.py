"""What every network tool shares: where to connect (`--bootstrap-server`,
`--bootstrap-controller`), the admin client properties of `--command-config`, and one
connection to a node that knows which API versions the node serves.

Every connection asks ApiVersions first, as Kafka's clients do, so a tool sends each API at
a version the node serves and says so in one line when it serves none. Every wait has the
request timeout as its bound: a node that does not answer is an error line, never a hang.
"""

import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kraft.cli.client_security import ClientConfigError, client_security
from kraft.protocol.build import build_request
from kraft.protocol.connection import ClientLogin, KafkaConnection
from kraft.server.settings.server_config import parse_properties

API_VERSIONS = 18
API_VERSIONS_VERSION = 3
# What a node that cannot be reached, or that drops the connection, raises.
UNREACHABLE = (TimeoutError, OSError, ConnectionError, ValueError)


class UsageError(ValueError):
    """A flag's value that cannot be used; said in one line with what to give instead."""


class ToolError(Exception):
    """What went wrong, in one line for the operator."""


class Reported(Exception):
    """The tool has printed its error as Kafka's tool prints it (and Kafka's may exit 0)."""


@dataclass(frozen=True)
class ClientSettings:
    """What a tool takes from --command-config (Kafka's admin client properties)."""

    client_id: str = "kraft-admin"
    request_timeout_s: float = 30.0  # Kafka's admin client's request.timeout.ms
    tls: ssl.SSLContext | None = None  # security.protocol SSL or SASL_SSL (client/security.py)
    login: ClientLogin | None = None  # SASL_PLAINTEXT or SASL_SSL


def parse_addresses(flag: str, value: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]`, each checked, or UsageError naming the bad one."""
    addresses = []
    for entry in (e.strip() for e in value.split(",")):
        host, colon, port = entry.rpartition(":")
        if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UsageError(f"{flag} {value!r}: {entry!r} is not host:port with a port from 1 to 65535")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def read_properties(path: str, flag: str = "--command-config") -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{flag} {path}: cannot read it ({e})") from None


def client_settings(entries: dict[str, str], path: str, defaults: ClientSettings = ClientSettings(),
                    flag: str = "--command-config") -> ClientSettings:
    """The admin client properties kraft honours: the client id, the request timeout and the
    connection's security (client/security.py); the rest (Kafka's admin client has many) is
    left to Kafka's defaults."""
    try:
        tls, login = client_security(entries, f"{flag} {path}")
    except ClientConfigError as e:
        raise UsageError(str(e)) from None
    timeout = entries.get("request.timeout.ms", str(int(defaults.request_timeout_s * 1000)))
    if not timeout.isdigit() or int(timeout) < 1:
        raise UsageError(f"{flag} {path}: request.timeout.ms={timeout!r} is not a positive number")
    return ClientSettings(entries.get("client.id", defaults.client_id), int(timeout) / 1000, tls, login)


def read_command_config(path: str | None, defaults: ClientSettings = ClientSettings(),
                        flag: str = "--command-config") -> ClientSettings:
    """The settings of the properties file `path`, or `defaults` without one."""
    if path is None:
        return defaults
    return client_settings(read_properties(path, flag), path, defaults, flag)


def with_client_id(settings: ClientSettings, client_id: str) -> ClientSettings:
    """`settings` under the tool's own client id, unless the properties named one."""
    return replace(settings, client_id=client_id) if settings.client_id == ClientSettings.client_id else settings


class NodeConnection:
    """One node: a connection, and the API versions it serves (its ApiVersions answer)."""

    def __init__(self, address: tuple[str, int], connection: KafkaConnection, versions: dict[int, tuple[int, int]],
                 settings: ClientSettings) -> None:
        self.address = address
        self._connection = connection
        self.versions = versions
        self._settings = settings

    @classmethod
    async def open(cls, address: tuple[str, int], settings: ClientSettings) -> "NodeConnection":
        connection = await KafkaConnection.connect(*address, client_id=settings.client_id,
                                                   timeout=settings.request_timeout_s, tls=settings.tls,
                                                   login=settings.login)
        try:
            answer = await connection.request(
                build_request(API_VERSIONS, API_VERSIONS_VERSION,
                              {"client_software_name": "kraft", "client_software_version": "1"}),
                settings.request_timeout_s)
        except BaseException:
            connection.close()
            raise
        versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
        return cls(address, connection, versions, settings)

    @property
    def where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def highest(self, api_key: int, ours: range) -> int | None:
        """The highest version of `api_key` in `ours` that the node serves, or None."""
        low, high = self.versions.get(api_key, (0, -1))
        both = [v for v in ours if low <= v <= high]
        return max(both) if both else None

    async def ask(self, request: Any, timeout_s: float | None = None) -> Any:
        return await self._connection.request(request, timeout_s or self._settings.request_timeout_s)

    def close(self) -> None:
        self._connection.close()


async def first_answering(bootstrap: list[tuple[str, int]], settings: ClientSettings,
                          kind: str = "server") -> NodeConnection:
    """A connection to the first address of `bootstrap` that answers ApiVersions."""
    last: Exception | None = None
    for address in bootstrap:
        try:
            return await NodeConnection.open(address, settings)
        except UNREACHABLE as e:
            last = e
    raise ToolError(f"no bootstrap {kind} answered ({', '.join(f'{h}:{p}' for h, p in bootstrap)}): {last}")
