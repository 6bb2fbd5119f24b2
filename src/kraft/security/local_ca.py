"""A certificate authority for local clusters: the security tests, the security benchmark and
the secure demo. It signs certificates for nodes and clients, valid for localhost and
127.0.0.1, written as PEM files a node's ssl.keystore.location and ssl.truststore.location take.

Needs the `cryptography` package (the dev extra); a node never imports this module.
"""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Issued:
    cert: Path  # the certificate alone
    key: Path  # its private key (PKCS#8, encrypted when a password was given)
    keystore: Path  # key and certificate in one file: Kafka's ssl.keystore.location for PEM


def _name(common_name: str, organization: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority:
    """A certificate authority in `directory`; `issue` signs a certificate for a name, its
    subject `CN=<name>,O=<organization>` (a principal `User:CN=<name>,O=<organization>`)."""

    def __init__(self, directory: Path, name: str = "kraft test CA", organization: str = "kraft tests") -> None:
        self.directory = Path(directory)
        self.organization = organization
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name, organization)).issuer_name(_name(name, organization))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = self.directory / f"{name.replace(' ', '-')}.pem"
        self.cert.write_bytes(self.pem())

    def pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, password: str | None = None) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, self.organization)).issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        base = self.directory / common_name.replace(" ", "-")
        issued = Issued(base.with_suffix(".crt.pem"), base.with_suffix(".key.pem"), base.with_suffix(".keystore.pem"))
        issued.cert.write_bytes(cert_pem)
        issued.key.write_bytes(key_pem)
        issued.keystore.write_bytes(key_pem + cert_pem)
        return issued
