"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka runs them (KIP-84, KIP-554).

A credential is what Kafka stores in UserScramCredentialRecord: the salt, the iteration
count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"). Neither the password nor the salted password can be
read back from it, and a server holding it can verify a client's proof but cannot make
one. So the password exists only where a user types it: the admin client salts it before
AlterUserScramCredentials (the request carries the salted password), and `kraft storage
format --add-scram` salts it before the bootstrap record is written.

Kafka's details kept: Hi is PBKDF2 over the password's UTF-8 bytes (no SASLprep);
iterations from 4096 to 16384; a client-first message may carry an authzid, which must be
the user, and extensions, of which only tokenauth (delegation tokens) has a meaning: kraft
holds no tokens, so a token login fails like a wrong password; names escape ',' and '='
as =2C and =3D.
"""

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from kraft.security.sasl import SaslAuthenticationError, invalid_credentials

MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
DEFAULT_ITERATIONS = 4096  # Kafka's, for kafka-storage --add-scram and kafka-configs


class ScramMechanism(IntEnum):
    """Kafka's ScramMechanism types, as UserScramCredentialRecord.mechanism stores them."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def named(cls, name: str) -> "ScramMechanism | None":
        return next((m for m in cls if m.mechanism_name == name), None)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(mechanism.hash_name, client_key).digest(),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def new_salt() -> bytes:
    return secrets.token_bytes(32)  # Kafka's ScramFormatter.secureRandomBytes: a 32-byte salt


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(saslname: str) -> str:
    if re.search(r"=(?!2C|3D)", saslname):
        raise SaslAuthenticationError("Invalid SCRAM username: '=' must be followed by 2C or 3D")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    """`k=v,k=v` into a dict; the first of a repeated key wins (the caller reads each once)."""
    attributes: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise SaslAuthenticationError(f"Invalid SCRAM message: {part!r} is not an attribute")
        attributes.setdefault(key, value)
    return attributes


# gs2 header (no channel binding, an optional authzid), then n=user,r=nonce and extensions
_CLIENT_FIRST = re.compile(r"^n,(?:a=([^,]*))?,(n=([^,]*),r=([^,]*)((?:,[^,]*)*))$", re.DOTALL)


class ScramServer:
    """One server exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str, ScramMechanism], ScramCredential | None],
                 nonce: str | None = None) -> None:
        """`nonce`: the server's part of the nonce, random unless given (RFC 7677's example)."""
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._state = "first"
        self._user = ""
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._gs2_header = ""
        self._auth_prefix = ""  # client-first-bare + "," + server-first
        self.complete = False

    @property
    def principal(self) -> str:
        return f"User:{self._user}"

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise SaslAuthenticationError("SCRAM exchange already finished")

    def _first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise SaslAuthenticationError("Invalid SCRAM client first message (channel binding is not supported)")
        authzid, bare, saslname, client_nonce, extensions = match.groups()
        self._user = unescape_name(saslname)
        if authzid and authzid != self._user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        if "tokenauth=true" in extensions.split(","):
            raise invalid_credentials(self.mechanism.mechanism_name)  # no delegation tokens here
        if not client_nonce:
            raise SaslAuthenticationError("Invalid SCRAM client first message: empty nonce")
        self._credential = self._lookup(self._user, self.mechanism)
        if self._credential is None:
            raise invalid_credentials(self.mechanism.mechanism_name)
        self._nonce = client_nonce + self._server_nonce
        self._gs2_header = text[: len(text) - len(bare)]
        server_first = f"r={self._nonce},s={base64.b64encode(self._credential.salt).decode()},i={self._credential.iterations}"
        self._auth_prefix = f"{bare},{server_first}"
        self._state = "final"
        return server_first.encode()

    def _final(self, text: str) -> bytes:
        self._state = "done"
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise SaslAuthenticationError("Invalid SCRAM client final message: no proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise SaslAuthenticationError("Invalid SCRAM client final message: the nonce does not match")
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise SaslAuthenticationError("Invalid SCRAM client final message: channel binding does not match")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise SaslAuthenticationError("Invalid SCRAM client final message: the proof is not base64") from None
        auth_message = f"{self._auth_prefix},{without_proof}".encode()
        signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise invalid_credentials(self.mechanism.mechanism_name)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.mechanism.hash_name, client_key).digest(), credential.stored_key):
            raise invalid_credentials(self.mechanism.mechanism_name)
        self.complete = True
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client's side, for a node's own connections to a SCRAM listener."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._bare = f"n={escape_name(username)},r={self._nonce}"
        self._server_signature = b""
        self.complete = False

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._server_signature:
            verifier = _attributes(challenge.decode())
            if base64.b64decode(verifier.get("v", "")) != self._server_signature:
                raise SaslAuthenticationError("the server's SCRAM signature does not verify")
            self.complete = True
            return None
        server_first = challenge.decode()
        attributes = _attributes(server_first)
        nonce, salt, iterations = attributes["r"], base64.b64decode(attributes["s"]), int(attributes["i"])
        if not nonce.startswith(self._nonce):
            raise SaslAuthenticationError("the server's SCRAM nonce does not extend ours")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{server_first},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        stored_key = hashlib.new(self.mechanism.hash_name, client_key).digest()
        signature = _hmac(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = _hmac(self.mechanism, _hmac(self.mechanism, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
