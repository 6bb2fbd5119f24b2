"""What every SASL mechanism shares: a server exchange, a client exchange, their errors.

A server exchange takes the client's tokens one at a time (SaslAuthenticate's auth_bytes)
and answers each; once `complete`, `principal` names who authenticated (Kafka's
`User:<name>`). A client exchange is the mirror, used by a node for its own connections to
the controller listener.
"""

from typing import Protocol


class SaslAuthenticationError(Exception):
    """The client's credentials were refused. The message goes to the client as the
    SaslAuthenticate answer's error_message, so it must not say more than Kafka's do (never
    whether the user exists)."""


class SaslServerExchange(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; raises SaslAuthenticationError."""
        ...


class SaslClientExchange(Protocol):
    @property
    def complete(self) -> bool: ...

    def first(self) -> bytes:
        """The client's first token."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token for the server's `challenge`, or None when the exchange is done
        (after checking the server's last word); raises SaslAuthenticationError."""
        ...


def invalid_credentials(mechanism: str) -> SaslAuthenticationError:
    """Kafka's answer for credentials that do not verify (it never says which part failed)."""
    return SaslAuthenticationError(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )
