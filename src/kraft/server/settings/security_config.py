"""server.properties' security keys, with Kafka's names, defaults and per-listener overrides.

Kafka resolves a listener's ssl.* and sasl.* settings key by key: `listener.name.<name>.<key>`
(the listener's name in lower case) when given, else `<key>`. A SASL mechanism's JAAS
configuration is only per listener and mechanism:
`listener.name.<name>.<mechanism in lower case>.sasl.jaas.config`, as Kafka's brokers read
it (they take no unprefixed sasl.jaas.config). The keys here are checked at load like every
key kraft uses; the files they name are read when the node starts (listener_security.py).
"""

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from kraft.security.jaas import JaasConfigError, JaasEntry, parse_jaas
from kraft.security.plain import PLAIN
from kraft.security.scram import ScramMechanism

PREFIX = "listener.name."
JAAS_SUFFIX = ".sasl.jaas.config"
SASL_MECHANISMS = (PLAIN, *(m.mechanism_name for m in ScramMechanism))
LOGIN_MODULES = {
    PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    **{m.mechanism_name: "org.apache.kafka.common.security.scram.ScramLoginModule" for m in ScramMechanism},
}


def _upper(value: str) -> str:
    return value.strip().upper()


def _text(value: str) -> str:
    return value.strip()


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value.strip().lower() not in choices:
            raise ValueError(f"{value.strip()!r} is not one of {', '.join(repr(c) for c in choices)}")
        return value.strip().lower()

    return parse


def _positive(value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not an integer") from None
    if n < 1:
        raise ValueError(f"{n} is below the minimum 1")
    return n


def _mechanisms(value: str) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in value.split(",") if m.strip())


def _jaas(value: str) -> JaasEntry:
    try:
        return parse_jaas(value)
    except JaasConfigError as e:
        raise ValueError(str(e)) from None


def _key(key: str, parse: Callable[[str], Any], default: Any) -> Any:
    """A security key as a typed attribute (its Kafka name with `.` as `_`)."""
    return field(default=default, metadata={"key": key, "parse": parse})


@dataclass(frozen=True, kw_only=True)
class SecurityKeys:
    """The security keys of server.properties, typed. ServerConfig holds the node's; a
    listener's are the same keys with its listener.name.<name>.<key> overrides applied
    (`ServerConfig.security_of`), and only those named in PER_LISTENER may be overridden."""

    ssl_keystore_type: str = _key("ssl.keystore.type", _upper, "JKS")
    ssl_keystore_location: str = _key("ssl.keystore.location", _text, "")
    ssl_keystore_certificate_chain: str = _key("ssl.keystore.certificate.chain", _text, "")
    ssl_keystore_key: str = _key("ssl.keystore.key", _text, "")
    ssl_key_password: str = _key("ssl.key.password", _text, "")
    ssl_truststore_type: str = _key("ssl.truststore.type", _upper, "JKS")
    ssl_truststore_location: str = _key("ssl.truststore.location", _text, "")
    ssl_truststore_certificates: str = _key("ssl.truststore.certificates", _text, "")
    ssl_client_auth: str = _key("ssl.client.auth", _choice("none", "requested", "required"), "none")
    ssl_endpoint_identification_algorithm: str = _key(
        "ssl.endpoint.identification.algorithm", _choice("https", ""), "https")
    sasl_enabled_mechanisms: tuple[str, ...] = _key("sasl.enabled.mechanisms", _mechanisms, ("GSSAPI",))
    # node-wide: how this node logs in to controllers
    sasl_mechanism_controller_protocol: str = _key("sasl.mechanism.controller.protocol", _upper, "GSSAPI")
    connection_failed_authentication_delay_ms: int = _key(
        "connection.failed.authentication.delay.ms", lambda v: max(0, int(v.strip())), 100)
    # the largest frame a SASL listener reads before a login (Kafka's, since CVE-2022-34917)
    sasl_server_max_receive_size: int = _key("sasl.server.max.receive.size", _positive, 524288)
    # ACLs (authorization.py): on only with Kafka's KRaft authorizer named, as Kafka's are
    authorizer_class_name: str = _key("authorizer.class.name", _text, "")
    super_users: str = _key("super.users", _text, "")
    allow_everyone_if_no_acl_found: bool = _key(
        "allow.everyone.if.no.acl.found", lambda v: _choice("true", "false")(v) == "true", False)


# The keys a listener may override with listener.name.<name>.<key> (Kafka's listener-prefixed
# ssl.* and sasl.enabled.mechanisms), by Kafka name: key -> its parser.
PER_LISTENER: dict[str, Callable[[str], Any]] = {
    f.metadata["key"]: f.metadata["parse"] for f in fields(SecurityKeys)
    if f.metadata["key"].startswith("ssl.")
    or f.metadata["key"] in ("sasl.enabled.mechanisms", "sasl.server.max.receive.size")
}
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def listener_key(key: str, raw: str) -> tuple[tuple[str, str], Any] | None:
    """A `listener.name.<name>.<setting>` key as ((LISTENER, setting), parsed value), or None
    if the setting is not one kraft uses (then it is warned about like any unused key).
    ValueError for a value that does not parse."""
    name, dot, setting = key[len(PREFIX):].partition(".")
    if not dot or not name:
        return None
    if setting in PER_LISTENER:
        return (name.upper(), setting), PER_LISTENER[setting](raw)
    if setting.endswith(JAAS_SUFFIX):
        mechanism = setting[: -len(JAAS_SUFFIX)].upper()
        if mechanism in SASL_MECHANISMS:
            return (name.upper(), f"{mechanism}{JAAS_SUFFIX}"), _jaas(raw)
    return None


def check_jaas(where: str, mechanism: str, entry: JaasEntry, *, client: bool) -> None:
    """The JAAS entry a mechanism needs: its login module, and for a node logging in as a
    client, username and password."""
    expected = LOGIN_MODULES[mechanism]
    if entry.login_module != expected:
        raise ValueError(f"{where}: {mechanism} needs {expected}, not {entry.login_module}")
    if client and not (entry.options.get("username") and entry.options.get("password")):
        raise ValueError(f"{where}: this node logs in to the controllers with {mechanism}: give username=... "
                         "password=... in this JAAS config")
