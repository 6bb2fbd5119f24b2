"""A tool's connection security from Kafka's client properties (`--command-config`), as
Kafka's admin clients take them: security.protocol; for SSL and SASL_SSL the PEM
truststore (ssl.truststore.type=PEM with ssl.truststore.location or
ssl.truststore.certificates), a PEM keystore for a client certificate, and
ssl.endpoint.identification.algorithm; for SASL, sasl.mechanism (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) with the username and password of sasl.jaas.config.
"""

import ssl
from collections.abc import Callable, Mapping
from functools import partial

from kraft.protocol.connection import ClientLogin
from kraft.protocol.session import SASL_PLAINTEXT, SASL_SSL, SSL
from kraft.security.jaas import JaasConfigError, parse_jaas
from kraft.security.plain import PLAIN, PlainClient
from kraft.security.sasl import SaslClientExchange
from kraft.security.scram import ScramClient, ScramMechanism
from kraft.security.tls import TlsConfigError, TlsSettings, client_context

PROTOCOLS = ("PLAINTEXT", SSL, SASL_PLAINTEXT, SASL_SSL)


class ClientConfigError(ValueError):
    pass


def client_security(entries: Mapping[str, str], where: str) -> tuple[ssl.SSLContext | None, ClientLogin | None]:
    """(the TLS context, the SASL login) the properties ask for; ClientConfigError in one line."""
    protocol = entries.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"{where}: security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    tls = None
    if protocol in (SSL, SASL_SSL):
        settings = TlsSettings(
            where=where,
            keystore_type=entries.get("ssl.keystore.type", "JKS").strip().upper(),
            keystore_location=entries.get("ssl.keystore.location", "").strip(),
            keystore_certificate_chain=entries.get("ssl.keystore.certificate.chain", "").strip(),
            keystore_key=entries.get("ssl.keystore.key", "").strip(),
            key_password=entries.get("ssl.key.password", "").strip(),
            truststore_type=entries.get("ssl.truststore.type", "JKS").strip().upper(),
            truststore_location=entries.get("ssl.truststore.location", "").strip(),
            truststore_certificates=entries.get("ssl.truststore.certificates", "").strip(),
            endpoint_identification_algorithm=entries.get("ssl.endpoint.identification.algorithm", "https").strip(),
        )
        try:
            tls = client_context(settings)
        except TlsConfigError as e:
            raise ClientConfigError(str(e)) from None
    login = None
    if protocol in (SASL_PLAINTEXT, SASL_SSL):
        login = _login(entries, where)
    return tls, login


def _login(entries: Mapping[str, str], where: str) -> ClientLogin:
    mechanism = entries.get("sasl.mechanism", "GSSAPI").strip().upper()
    scram = ScramMechanism.named(mechanism)
    if mechanism != PLAIN and scram is None:
        raise ClientConfigError(f"{where}: sasl.mechanism={mechanism} is not one kraft speaks "
                                "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    try:
        options = parse_jaas(entries.get("sasl.jaas.config", "")).options
    except JaasConfigError as e:
        raise ClientConfigError(f"{where}: sasl.jaas.config: {e}") from None
    user, password = options.get("username"), options.get("password")
    if not user or password is None:
        raise ClientConfigError(f'{where}: sasl.jaas.config needs username="..." password="..."')
    exchange: Callable[[], SaslClientExchange]
    if scram is None:
        exchange = partial(PlainClient, user, password)
    else:
        exchange = partial(ScramClient, scram, user, password)
    return ClientLogin(mechanism, exchange)
