"""The SASL mechanisms and JAAS text on their own: RFC 7677's SCRAM example byte for byte,
refusals, PLAIN, Kafka's JAAS text."""

import base64

import pytest

from kraft.security.jaas import JaasConfigError, parse_jaas
from kraft.security.plain import PlainClient, PlainServer
from kraft.security.sasl import SaslAuthenticationError
from kraft.security.scram import ScramClient, ScramMechanism, ScramServer, credential_from_salted, salted_password

SHA256 = ScramMechanism.SCRAM_SHA_256
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CREDENTIAL = credential_from_salted(SHA256, salted_password(SHA256, "pencil", RFC_SALT, 4096), RFC_SALT, 4096)


def test_rfc_7677_example_both_ends():
    server = ScramServer(SHA256, lambda user, m: RFC_CREDENTIAL if user == "user" else None,
                         nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate(client.first())
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                            b"i=4096")
    client_final = client.respond(server_first)
    assert client_final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = server.evaluate(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.principal == "User:user"
    assert client.respond(server_final) is None and client.complete


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_refuses_a_wrong_password_an_unknown_user_and_a_forged_nonce(mechanism):
    salt = b"salt" * 8
    credential = credential_from_salted(mechanism, salted_password(mechanism, "right", salt, 4096), salt, 4096)

    def lookup(user, m):  # noqa: ANN001, ANN202
        return credential if (user, m) == ("alice", mechanism) else None

    def login(user: str, password: str) -> None:
        server, client = ScramServer(mechanism, lookup), ScramClient(mechanism, user, password)
        server.evaluate(client.respond(server.evaluate(client.first())))

    login("alice", "right")
    for user, password in (("alice", "wrong"), ("bob", "right")):
        with pytest.raises(SaslAuthenticationError, match="invalid credentials with SASL mechanism"):
            login(user, password)
    server, client = ScramServer(mechanism, lookup), ScramClient(mechanism, "alice", "right")
    final = client.respond(server.evaluate(client.first())).replace(b",r=", b",r=x")
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        server.evaluate(final)
    with pytest.raises(SaslAuthenticationError, match="channel binding"):
        ScramServer(mechanism, lookup).evaluate(b"p=tls-unique,,n=alice,r=abc")
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):  # a delegation token: none here
        ScramServer(mechanism, lookup).evaluate(b"n,,n=alice,r=abc,tokenauth=true")
    assert ScramServer(mechanism, lookup).evaluate(b"n,,n=alice,r=abc,other=1").startswith(b"r=abc")


def test_scram_names_are_escaped_and_an_authzid_must_be_the_user():
    salt = b"s" * 16
    credential = credential_from_salted(SHA256, salted_password(SHA256, "pw", salt, 4096), salt, 4096)
    server = ScramServer(SHA256, lambda user, m: credential if user == "a=b,c" else None)
    client = ScramClient(SHA256, "a=b,c", "pw")
    assert b"n=a=3Db=2Cc," in client.first()
    server.evaluate(client.respond(server.evaluate(client.first())))
    assert server.principal == "User:a=b,c"
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        ScramServer(SHA256, lambda u, m: credential).evaluate(b"n,a=admin,n=alice,r=abc")


def test_plain_checks_the_jaas_users():
    users = {"admin": "admin-secret"}
    server = PlainServer(users)
    assert server.evaluate(PlainClient("admin", "admin-secret").first()) == b""
    assert server.complete and server.principal == "User:admin"
    for token, message in ((b"\x00admin\x00nope", "Invalid username or password"),
                           (b"\x00nobody\x00admin-secret", "Invalid username or password"),
                           (b"\x00\x00x", "username not specified"),
                           (b"root\x00admin\x00admin-secret", "authorization id"),
                           (b"admin-secret", "expected 3 tokens")):
        with pytest.raises(SaslAuthenticationError, match=message):
            PlainServer(users).evaluate(token)


def test_jaas_text_as_kafka_writes_it():
    entry = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                       'password="a b\\"c" user_admin="x" user_alice=y;')
    assert entry.login_module.endswith("PlainLoginModule") and entry.flag == "required"
    assert entry.options == {"username": "admin", "password": 'a b"c', "user_admin": "x", "user_alice": "y"}
    for text in ("PlainLoginModule required user_a=b", "PlainLoginModule always user_a=b;",
                 "PlainLoginModule required user_a;", "A required; B required;"):
        with pytest.raises(JaasConfigError):
            parse_jaas(text)
