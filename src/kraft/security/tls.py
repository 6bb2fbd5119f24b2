"""TLS contexts from Kafka's ssl.* settings, PEM only (as Kafka's ssl.keystore.type=PEM).

The keystore is a private key and its certificate chain, either one PEM file
(ssl.keystore.location) or the PEM text itself (ssl.keystore.certificate.chain and
ssl.keystore.key); the key may be encrypted with ssl.key.password. The truststore is
PEM certificates, a file (ssl.truststore.location) or the text (ssl.truststore.certificates);
without one a client trusts the system's CAs, as a JVM trusts its default store.
ssl.client.auth (none, requested, required) says whether a server asks clients for a
certificate; ssl.endpoint.identification.algorithm (https, Kafka's default, or empty) whether
a client checks the server's name against its certificate. TLS 1.2 and 1.3, as Kafka's
ssl.enabled.protocols.

A client may also give librdkafka's PEM forms: the CA file as ssl.ca.location, its certificate
and key as two files, ssl.certificate.location and ssl.key.location. Each problem names the
setting the user wrote.

Python's ssl module loads keys from files only, so inline PEM text is written to a file
only this process can read, in a private temporary directory, loaded and removed at once.

A problem is a TlsConfigError of one line naming the setting and what to do, raised when
the node starts, before it listens.
"""

import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    pass


@dataclass(frozen=True)
class TlsSettings:
    """One listener's ssl.* values, its `listener.name.<name>.` overrides applied."""

    where: str  # for messages: "listener CLIENT"
    keystore_type: str = "JKS"
    keystore_location: str = ""
    keystore_certificate_chain: str = ""
    keystore_key: str = ""
    key_password: str = ""
    truststore_type: str = "JKS"
    truststore_location: str = ""
    truststore_certificates: str = ""
    ca_location: str = ""  # a client's PEM truststore by librdkafka's name
    certificate_location: str = ""  # a client's certificate and key as two PEM files (librdkafka's names)
    key_location: str = ""
    client_auth: str = "none"
    endpoint_identification_algorithm: str = "https"

    @property
    def has_keystore(self) -> bool:
        return bool(self._keystore_given or self.certificate_location or self.key_location)

    @property
    def _keystore_given(self) -> bool:
        return bool(self.keystore_location or self.keystore_certificate_chain or self.keystore_key)

    def check(self) -> None:
        """What can be said without reading a file (config load time)."""
        if self.certificate_location or self.key_location:
            if self._keystore_given:
                raise TlsConfigError(f"{self.where}: give ssl.certificate.location with ssl.key.location or an "
                                     "ssl.keystore.*, not both")
            if not (self.certificate_location and self.key_location):
                raise TlsConfigError(f"{self.where}: ssl.certificate.location and ssl.key.location go together")
        if self._keystore_given and self.keystore_type != "PEM":
            raise TlsConfigError(f"{self.where}: ssl.keystore.type is {self.keystore_type}; kraft reads PEM "
                                 "keystores only: set ssl.keystore.type=PEM")
        if self.keystore_location and (self.keystore_certificate_chain or self.keystore_key):
            raise TlsConfigError(f"{self.where}: give ssl.keystore.location or ssl.keystore.certificate.chain with "
                                 "ssl.keystore.key, not both")
        if bool(self.keystore_certificate_chain) != bool(self.keystore_key):
            raise TlsConfigError(f"{self.where}: ssl.keystore.certificate.chain and ssl.keystore.key go together")
        if (self.truststore_location or self.truststore_certificates) and self.truststore_type != "PEM":
            raise TlsConfigError(f"{self.where}: ssl.truststore.type is {self.truststore_type}; kraft reads PEM "
                                 "truststores only: set ssl.truststore.type=PEM")
        given = [k for k, v in (("ssl.truststore.location", self.truststore_location),
                                ("ssl.truststore.certificates", self.truststore_certificates),
                                ("ssl.ca.location", self.ca_location)) if v]
        if len(given) > 1:
            raise TlsConfigError(f"{self.where}: give one of {' and '.join(given)}, not both")
        if self.client_auth not in CLIENT_AUTH:
            raise TlsConfigError(f"{self.where}: ssl.client.auth is {self.client_auth!r}; it is none, requested "
                                 "or required")
        if self.endpoint_identification_algorithm.lower() not in ("", "https"):
            raise TlsConfigError(f"{self.where}: ssl.endpoint.identification.algorithm is https or empty")


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A listener's context: its keystore, and its truststore when it asks for client certificates."""
    settings.check()
    if not settings.has_keystore:
        raise TlsConfigError(f"{settings.where} serves TLS but has no keystore: set ssl.keystore.type=PEM and "
                             "ssl.keystore.location (a PEM file with the private key and its certificate chain)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, settings)
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, settings)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A node's context for its connections to a TLS listener: the server is verified
    against the truststore, and the keystore, if any, is offered to servers that ask."""
    settings.check()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(context, settings)
    if settings.has_keystore:
        _load_keystore(context, settings)
    return context


def _readable(path: str, key: str, where: str) -> None:
    file = Path(path)
    if not file.is_file():
        raise TlsConfigError(f"{where}: {key} {path} does not exist or is not a file")
    if not os.access(file, os.R_OK):
        raise TlsConfigError(f"{where}: {key} {path} cannot be read by this user")


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    password = settings.key_password or None
    where = settings.where
    try:
        if settings.keystore_location:
            _readable(settings.keystore_location, "ssl.keystore.location", where)
            context.load_cert_chain(settings.keystore_location, password=password)
            return
        if settings.certificate_location:
            _readable(settings.certificate_location, "ssl.certificate.location", where)
            _readable(settings.key_location, "ssl.key.location", where)
            context.load_cert_chain(settings.certificate_location, settings.key_location, password=password)
            return
        with tempfile.TemporaryDirectory(prefix="kraft-keystore-") as directory:
            chain, key = Path(directory) / "chain.pem", Path(directory) / "key.pem"
            for path, text in ((chain, settings.keystore_certificate_chain), (key, settings.keystore_key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as file:
                    file.write(_pem_text(text))
            context.load_cert_chain(chain, key, password=password)
    except ssl.SSLError as e:
        source = (settings.keystore_location or (settings.certificate_location and
                  f"{settings.certificate_location} and {settings.key_location}")
                  or "ssl.keystore.certificate.chain and ssl.keystore.key")
        raise TlsConfigError(f"{where}: cannot load the keystore {source} ({_reason(e)}): it must hold a PEM "
                             "private key and its certificate chain, the key encrypted only with ssl.key.password"
                             ) from None


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    where = settings.where
    key, location = (("ssl.ca.location", settings.ca_location) if settings.ca_location
                     else ("ssl.truststore.location", settings.truststore_location))
    try:
        if location:
            _readable(location, key, where)
            context.load_verify_locations(cafile=location)
        elif settings.truststore_certificates:
            context.load_verify_locations(cadata=_pem_text(settings.truststore_certificates))
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH if context.protocol == ssl.PROTOCOL_TLS_CLIENT
                                       else ssl.Purpose.CLIENT_AUTH)
    except ssl.SSLError as e:
        source = location or "ssl.truststore.certificates"
        raise TlsConfigError(f"{where}: cannot load the truststore {source} ({_reason(e)}): it must hold PEM "
                             "certificates") from None


def _pem_text(text: str) -> str:
    """PEM given in a properties value: Kafka accepts it on one line, its line breaks lost
    or written as '\\n'; the base64 body is re-wrapped so OpenSSL reads it."""
    text = text.replace("\\n", "\n")
    out = []
    for block in text.split("-----END ")[:-1]:
        begin = block.find("-----BEGIN ")
        head_end = block.find("-----", begin + 11) + 5
        header = block[begin:head_end]
        label = header[len("-----BEGIN "):-5]
        body = "".join(block[head_end:].split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        out.append("\n".join([header, *lines, f"-----END {label}-----"]))
    return "\n".join(out) + "\n" if out else text


def _reason(error: ssl.SSLError) -> str:
    return (error.reason or str(error)).replace("_", " ").lower()


_SHORT_NAMES = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID", "emailAddress": "EMAILADDRESS",
}


def subject_name(certificate: dict) -> str | None:
    """A peer certificate's subject as Java's X500Principal.getName() writes it (RFC 2253:
    the last RDN first), which Kafka's default principal builder makes `User:<name>`."""
    subject = certificate.get("subject")
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape_dn(v)}" for k, v in rdn))
    return ",".join(rdns)


def _escape_dn(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped
