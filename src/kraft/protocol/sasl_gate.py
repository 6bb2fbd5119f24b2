"""SaslHandshake and SaslAuthenticate on a listener, as Kafka's SaslServerAuthenticator runs them.

On a SASL listener (SASL_PLAINTEXT, SASL_SSL) a connection is unauthenticated until a login
succeeds, and only ApiVersions, SaslHandshake and then SaslAuthenticate are served before it:
any other request closes the connection, before its body is parsed (Kafka raises
IllegalSaslStateException there and closes). SaslHandshake v1 names the mechanism; one not
enabled gets UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes.
Each SaslAuthenticate carries the next token of the exchange; a refused one gets
SASL_AUTHENTICATION_FAILED with the exchange's message after
connection.failed.authentication.delay.ms, and the connection closes. Once the login
succeeds, the connection's principal is `User:<name>` and every API is served.

SaslHandshake v0 (raw tokens without Kafka headers, deprecated since Kafka 1.0) is not
served: clients pick v1 from ApiVersions. KIP-368 re-authentication is not offered: the
session lifetime answered is 0 (no expiry), so clients never re-authenticate, and a
SaslHandshake or SaslAuthenticate on an authenticated connection is answered
ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it. Listeners without SASL do not serve the
two APIs at all (Kafka lists them everywhere and answers ILLEGAL_SASL_STATE): a client that
expects SASL there is closed with a line naming the API.
"""

import asyncio
from datetime import timedelta
from typing import Any

from kraft.protocol.build import build_response
from kraft.protocol.codec import api_name
from kraft.protocol.protocol_errors import ErrorCode, ProtocolError
from kraft.protocol.session import ListenerSecurity, current_session
from kraft.security.sasl import SaslAuthenticationError

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_LOGIN = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


class IllegalSaslState(ProtocolError):
    """A request that may not come at this point of a login: the connection closes."""


def refuse_before_login(api_key: int) -> None:
    """Raises for an API that an unauthenticated connection may not send."""
    if api_key not in BEFORE_LOGIN:
        raise IllegalSaslState(f"Unexpected Kafka request of type {api_name(api_key)} during SASL handshake")


class SaslGate:
    """The two SASL APIs' handlers for one listener; each connection's state is its Session."""

    def __init__(self, security: ListenerSecurity) -> None:
        self.security = security

    async def handshake(self, header: Any, request: Any) -> Any:
        session = current_session()
        mechanisms = list(self.security.sasl)

        def answer(error: ErrorCode) -> Any:
            return build_response(SASL_HANDSHAKE, header.request_api_version,
                                  {"error_code": error, "mechanisms": mechanisms})

        if session.authenticated or session.exchange is not None:
            return answer(ErrorCode.illegal_sasl_state)
        factory = self.security.sasl.get(request.mechanism)
        if factory is None:
            session.close_after_response = True
            return answer(ErrorCode.unsupported_sasl_mechanism)
        session.mechanism = request.mechanism
        session.exchange = factory()
        return answer(ErrorCode.none)

    async def authenticate(self, header: Any, request: Any) -> Any:
        session = current_session()

        def answer(error: ErrorCode, message: str | None = None, token: bytes = b"") -> Any:
            return build_response(SASL_AUTHENTICATE, header.request_api_version, {
                "error_code": error, "error_message": message, "auth_bytes": token,
                "session_lifetime": timedelta(0),
            })

        if session.authenticated:
            return answer(ErrorCode.illegal_sasl_state, "SaslAuthenticate request received after successful "
                                                        "authentication")
        exchange = session.exchange
        if exchange is None:
            raise IllegalSaslState("SaslAuthenticate before SaslHandshake")
        try:
            token = exchange.evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as e:
            session.close_after_response = True
            session.exchange = None
            await asyncio.sleep(self.security.failed_authentication_delay_s)
            return answer(ErrorCode.sasl_authentication_failed, str(e))
        if exchange.complete:
            session.principal = exchange.principal
            session.authenticated = True
            session.exchange = None
        return answer(ErrorCode.none, None, token)
