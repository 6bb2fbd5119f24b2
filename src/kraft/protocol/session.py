"""Who is on a connection: its listener's security, and the session each connection has.

A listener's `ListenerSecurity` says how it is secured: its security protocol, the TLS
context (SSL and SASL_SSL) and the SASL mechanisms it offers (SASL_PLAINTEXT and
SASL_SSL), each a factory of server exchanges (kraft.security).

Every connection has a `Session`: the listener, the client's address, and the principal,
`User:ANONYMOUS` until a TLS client certificate or a SASL login names someone (Kafka's
DefaultKafkaPrincipalBuilder). The server runs each connection in a task of its own and
sets `SESSION` there, so a handler reads the principal of the request it answers with
`current_session()` without it being passed through every handler's signature (and a
forwarding node puts it in the Envelope, as Kafka's do).
"""

import ssl
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

from kraft.security.sasl import SaslServerExchange

ANONYMOUS = "User:ANONYMOUS"
PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str = PLAINTEXT
    tls: ssl.SSLContext | None = None
    sasl: Mapping[str, Callable[[], SaslServerExchange]] = field(default_factory=dict)
    failed_authentication_delay_s: float = 0.1  # connection.failed.authentication.delay.ms
    max_receive_before_login: int = 524288  # sasl.server.max.receive.size: the largest frame before a login

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def authenticates(self) -> bool:
        """Whether a connection must first authenticate (a TLS handshake, a SASL login)."""
        return self.tls is not None or self.uses_sasl


PLAINTEXT_LISTENER = ListenerSecurity("listener")


@dataclass
class Session:
    listener: str
    protocol: str
    client_address: tuple[str, int]
    principal: str = ANONYMOUS
    authenticated: bool = True  # False on a SASL listener until a login succeeds
    mechanism: str | None = None  # the SASL mechanism the client chose
    exchange: SaslServerExchange | None = None  # the login under way
    close_after_response: bool = False  # a refused login: answered, then the connection ends


SESSION: ContextVar[Session | None] = ContextVar("kraft_session", default=None)


def current_session() -> Session:
    """The session of the connection whose request is being handled (an anonymous one
    outside any connection, for handlers called directly)."""
    session = SESSION.get()
    return session if session is not None else Session("", PLAINTEXT, ("0.0.0.0", 0))
