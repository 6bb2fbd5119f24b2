"""A node's security, built once at start from server.properties: how each of its listeners
is secured, and how the node itself reaches the controller listener.

- **A listener** gets a ListenerSecurity (kraft.protocol.session): its protocol, a TLS
  server context (SSL, SASL_SSL) from its ssl.* settings, and (SASL_PLAINTEXT, SASL_SSL)
  the mechanisms of its sasl.enabled.mechanisms: PLAIN checks the listener's JAAS
  `user_<name>` entries, SCRAM the credentials in the node's committed metadata image
  (UserScramCredentialRecord), read at each login, so a credential altered through the
  controller applies on every node once it has applied the record.
- **The node's own connections** to controllers (Raft RPCs between voters, broker
  registration and heartbeats, forwarded admin writes) use the controller listener's
  settings, as Kafka's nodes do: a TLS client context from its ssl.* settings (the server
  verified against its truststore, the keystore offered as the client certificate), and,
  on a SASL controller listener, a PLAIN login with the username and password of its JAAS
  entry for sasl.mechanism.controller.protocol.

Files (keystores, truststores) are read here, when the node starts: a problem is a
ConfigError of one line, and the node does not start.
"""

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kraft.metadata import MetadataImage
from kraft.protocol.connection import ClientLogin, KafkaConnection
from kraft.protocol.session import SASL_PLAINTEXT, SASL_SSL, SSL, ListenerSecurity
from kraft.security.plain import PLAIN, PlainServer
from kraft.security.sasl import SaslServerExchange
from kraft.security.scram import ScramCredential, ScramMechanism, ScramServer
from kraft.security.tls import TlsConfigError, TlsSettings, client_context, server_context
from kraft.server.settings.server_config import ConfigError, Endpoint, ServerConfig


def listener_security(config: ServerConfig, listener: str, image: Callable[[], MetadataImage]) -> ListenerSecurity:
    """How `listener` is secured; `image` gives the committed metadata image (SCRAM logins)."""
    protocol = config.protocol_of(listener)
    tls = _tls_context(config, listener, server_context)
    mechanisms: dict[str, Callable[[], SaslServerExchange]] = {}
    if protocol in (SASL_PLAINTEXT, SASL_SSL):
        for name in config.security_of(listener).sasl_enabled_mechanisms:
            if name == PLAIN:
                jaas = config.jaas(listener, PLAIN)
                assert jaas is not None  # config.py refuses a PLAIN listener without one
                users = {k[len("user_"):]: v for k, v in jaas.options.items() if k.startswith("user_")}
                mechanisms[name] = partial(PlainServer, users)
            else:
                scram = ScramMechanism.named(name)
                assert scram is not None  # config.py refuses mechanisms kraft does not serve
                mechanisms[name] = partial(ScramServer, scram, partial(_scram_credential, image))
    delay_s = config.connection_failed_authentication_delay_ms / 1000
    return ListenerSecurity(listener, protocol, tls, mechanisms, delay_s,
                            config.security_of(listener).sasl_server_max_receive_size)


def _tls_context(config: ServerConfig, listener: str,
                 make: Callable[[TlsSettings], ssl.SSLContext]) -> ssl.SSLContext | None:
    """The listener's TLS context (server or client side), if its protocol has TLS; a bad
    keystore or truststore is a ConfigError, one line at start."""
    if config.protocol_of(listener) not in (SSL, SASL_SSL):
        return None
    try:
        return make(config.tls_settings(listener))
    except TlsConfigError as e:
        raise ConfigError(str(e)) from None


def _scram_credential(image: Callable[[], MetadataImage], user: str, mechanism: ScramMechanism) -> ScramCredential | None:
    found = image().scram_credentials.get((user, int(mechanism)))
    if found is None:
        return None
    return ScramCredential(found.salt, found.stored_key, found.server_key, found.iterations)


@dataclass(frozen=True)
class ControllerConnector:
    """How this node connects to a controller listener."""

    tls: ssl.SSLContext | None = None
    login: ClientLogin | None = None

    async def connect(self, endpoint: Endpoint, client_id: str, timeout: float = 5.0) -> KafkaConnection:
        return await KafkaConnection.connect(endpoint.host, endpoint.port, client_id=client_id, timeout=timeout,
                                             tls=self.tls, login=self.login)


def controller_connector(config: ServerConfig) -> ControllerConnector:
    listener = config.controller_listener_name
    protocol = config.protocol_of(listener)
    tls = _tls_context(config, listener, client_context)
    login = None
    if protocol in (SASL_PLAINTEXT, SASL_SSL):
        jaas = config.jaas(listener, PLAIN)
        assert jaas is not None  # config.py checks the controller listener's login
        login = ClientLogin.with_password(PLAIN, jaas.options["username"], jaas.options["password"])
    return ControllerConnector(tls, login)
