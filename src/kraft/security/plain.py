"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer runs it: one token,
`authzid NUL user NUL password`, checked against the listener's JAAS `user_<name>` entries.

PLAIN sends the password itself, so it belongs on SASL_SSL listeners; Kafka allows it on
SASL_PLAINTEXT too, and so does kraft. The messages are Kafka's.
"""

import hmac
from collections.abc import Mapping

from kraft.security.sasl import SaslAuthenticationError

PLAIN = "PLAIN"


class PlainServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        """`users`: name -> password, the JAAS config's user_<name>="<password>" options."""
        self._users = users
        self._user = ""
        self.complete = False

    @property
    def principal(self) -> str:
        return f"User:{self._user}"

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        expected = self._users.get(user)
        # compare_digest against something even for an unknown user: the time taken must not tell
        if not hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00" + password).encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        self._user = user
        self.complete = True
        return b""


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._token = b"\x00" + username.encode() + b"\x00" + password.encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        self.complete = True
        return None
