"""A client's connection security from Kafka's client settings: kraft's consumer, the Spark
sources (their `kafka.*` options) and the tools' `--command-config` all read them here.

- `security.protocol`: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL.
- TLS (SSL, SASL_SSL), PEM only, in the Java client's names or librdkafka's: the CA as
  `ssl.truststore.location` (with `ssl.truststore.type=PEM`), `ssl.truststore.certificates`
  or `ssl.ca.location`, else the system's CAs; a client certificate as a PEM keystore
  (`ssl.keystore.type=PEM` with `ssl.keystore.location`, or `ssl.keystore.certificate.chain`
  with `ssl.keystore.key`) or as `ssl.certificate.location` with `ssl.key.location`;
  `ssl.key.password` for an encrypted key. The server's name is checked against its
  certificate unless `ssl.endpoint.identification.algorithm` is empty or `none` (or
  `ssl.check.hostname=false`).
- SASL (SASL_PLAINTEXT, SASL_SSL): `sasl.mechanism` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
  (the Java client's default, GSSAPI, is refused), with `sasl.username` and `sasl.password`
  or, as Java clients write it, `sasl.jaas.config` with `username="..." password="..."`.

The TLS context is built by `kraft.security.tls` and the login is a
`kraft.protocol.connection.ClientLogin`, the same ones a node uses for its own connections
to a controller listener. Files are read at once, so a bad setting is one ClientConfigError
line naming it when the client is made, not a failure at its first connection.
"""

import ssl
from collections.abc import Mapping

from kraft.protocol.connection import ClientLogin
from kraft.protocol.session import PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, SSL
from kraft.security.jaas import JaasConfigError, parse_jaas
from kraft.security.tls import TlsConfigError, TlsSettings, client_context

PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
TLS_SETTINGS = (
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.ca.location",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.certificate.location", "ssl.key.location", "ssl.endpoint.identification.algorithm",
    "ssl.check.hostname",
)
SASL_SETTINGS = ("sasl.mechanism", "sasl.username", "sasl.password", "sasl.jaas.config")
SETTINGS = ("security.protocol", *TLS_SETTINGS, *SASL_SETTINGS)


class ClientConfigError(ValueError):
    pass


def client_security(entries: Mapping[str, str], where: str, *,
                    strict: bool = False) -> tuple[ssl.SSLContext | None, ClientLogin | None]:
    """(the TLS context, the SASL login) the settings ask for; ClientConfigError in one line
    starting with `where`. `strict`: entries are security settings only, and an ssl.* or
    sasl.* setting kraft does not have, or one the protocol does not use, is refused (a
    consumer must not seem to honour it); a tool's properties file holds other settings too."""
    protocol = entries.get("security.protocol", PLAINTEXT).strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"{where}: security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    tls_on, sasl_on = protocol in (SSL, SASL_SSL), protocol in (SASL_PLAINTEXT, SASL_SSL)
    if strict:
        _only_known(entries, where, tls_on, sasl_on, protocol)
    tls = _tls(entries, where) if tls_on else None
    login = _login(entries, where, protocol) if sasl_on else None
    return tls, login


def _only_known(entries: Mapping[str, str], where: str, tls_on: bool, sasl_on: bool, protocol: str) -> None:
    for key in sorted(entries):
        if key not in SETTINGS:
            raise ClientConfigError(f"{where}: {key} is not a security setting kraft's clients have; they take "
                                    f"{', '.join(SETTINGS)}")
        if (key in TLS_SETTINGS and not tls_on) or (key in SASL_SETTINGS and not sasl_on):
            wanted = "SSL or SASL_SSL" if key in TLS_SETTINGS else "SASL_PLAINTEXT or SASL_SSL"
            raise ClientConfigError(f"{where}: {key} is set but security.protocol is {protocol}, which does not "
                                    f"use it: set security.protocol to {wanted}, or leave {key} out")


def _tls(entries: Mapping[str, str], where: str) -> ssl.SSLContext:
    def get(key: str, default: str = "") -> str:
        return entries.get(key, default).strip()

    settings = TlsSettings(
        where=where,
        keystore_type=get("ssl.keystore.type", "JKS").upper(),
        keystore_location=get("ssl.keystore.location"),
        keystore_certificate_chain=get("ssl.keystore.certificate.chain"),
        keystore_key=get("ssl.keystore.key"),
        key_password=get("ssl.key.password"),
        truststore_type=get("ssl.truststore.type", "JKS").upper(),
        truststore_location=get("ssl.truststore.location"),
        truststore_certificates=get("ssl.truststore.certificates"),
        ca_location=get("ssl.ca.location"),
        certificate_location=get("ssl.certificate.location"),
        key_location=get("ssl.key.location"),
        endpoint_identification_algorithm=_endpoint_identification(entries, where),
    )
    try:
        return client_context(settings)
    except TlsConfigError as e:
        raise ClientConfigError(str(e)) from None


def _endpoint_identification(entries: Mapping[str, str], where: str) -> str:
    """https or "": from ssl.endpoint.identification.algorithm (librdkafka writes `none` for
    off) and ssl.check.hostname (true/false), which must agree when both are given."""
    algorithm = entries.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        algorithm = algorithm.strip().lower()
        if algorithm not in ("https", "", "none"):
            raise ClientConfigError(f"{where}: ssl.endpoint.identification.algorithm={algorithm} is not https, "
                                    "none or empty")
        algorithm = "https" if algorithm == "https" else ""
    check = entries.get("ssl.check.hostname")
    if check is None:
        return "https" if algorithm is None else algorithm
    if check.strip().lower() not in ("true", "false"):
        raise ClientConfigError(f"{where}: ssl.check.hostname={check.strip()} is not true or false")
    from_check = "https" if check.strip().lower() == "true" else ""
    if algorithm is not None and algorithm != from_check:
        raise ClientConfigError(f"{where}: ssl.check.hostname={check.strip()} and "
                                f"ssl.endpoint.identification.algorithm={algorithm or 'none'} disagree; give one")
    return from_check


def _login(entries: Mapping[str, str], where: str, protocol: str) -> ClientLogin:
    mechanism = entries.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in ClientLogin.MECHANISMS:
        raise ClientConfigError(f"{where}: sasl.mechanism={mechanism} is not one kraft speaks "
                                f"({', '.join(ClientLogin.MECHANISMS)})")
    jaas_text = entries.get("sasl.jaas.config", "").strip()
    if jaas_text:
        if "sasl.username" in entries or "sasl.password" in entries:
            raise ClientConfigError(f"{where}: give sasl.username and sasl.password or sasl.jaas.config, not both")
        try:
            options = parse_jaas(jaas_text).options
        except JaasConfigError as e:
            raise ClientConfigError(f"{where}: sasl.jaas.config: {e}") from None
        user, password = options.get("username"), options.get("password")
        if not user or password is None:
            raise ClientConfigError(f'{where}: sasl.jaas.config needs username="..." password="..."')
    else:
        user, password = entries.get("sasl.username", "").strip(), entries.get("sasl.password")
        if not user or password is None:
            raise ClientConfigError(f"{where}: security.protocol={protocol} logs in with SASL: give sasl.username "
                                    'and sasl.password (or sasl.jaas.config with username="..." password="...")')
    return ClientLogin.with_password(mechanism, user, password)
