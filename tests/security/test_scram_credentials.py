"""SCRAM credentials without a cluster: Kafka's --add-scram syntax and `kraft storage format
--add-scram` (salted, the password kept nowhere), and the controller's rules for
AlterUserScramCredentials."""

import subprocess
import sys

import pytest

from kraft.cli.scram_args import ScramArgumentError, parse_add_scram
from kraft.controller.bootstrap import BOOTSTRAP_FILE, read_bootstrap
from kraft.metadata import Errors, MetadataImage, apply_records
from kraft.metadata.records import FeatureLevelRecord
from kraft.security.scram import ScramMechanism, credential_from_salted, salted_password
from kraft.server.apis.scram_api import Deletion, Upsertion, alter_credentials


def test_add_scram_takes_kafkas_syntax_and_keeps_no_password():
    record = parse_add_scram("SCRAM-SHA-512=[name=alice,password=alice-secret]")
    assert (record.name, record.mechanism, record.iterations) == ("alice", 2, 4096)
    assert b"alice-secret" not in record.salt + record.stored_key + record.server_key
    salted = salted_password(ScramMechanism.SCRAM_SHA_512, "alice-secret", record.salt, 4096)
    assert credential_from_salted(ScramMechanism.SCRAM_SHA_512, salted, record.salt, 4096).stored_key == \
        record.stored_key
    given = parse_add_scram('SCRAM-SHA-256=[name=bob,iterations=8192,salt="c2FsdA==",saltedpassword="YCE="]')
    assert (given.salt, given.iterations) == (b"salt", 8192)
    for argument, message in (
        ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
        ("SCRAM-SHA-256=name=a", "Expected configuration string to start with ["),
        ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=YCE=]", "You must supply 'salt' with 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "must be >= 4096"),
        ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ):
        with pytest.raises(ScramArgumentError, match=message.replace("[", r"\[").replace("(", r"\(")):
            parse_add_scram(argument)


def test_the_controllers_scram_rules_are_kafkas():
    image = MetadataImage()
    alice = Upsertion("alice", 1, 4096, b"s" * 16, b"p" * 32)
    result = alter_credentials(image, [], [alice, Upsertion("bob", 2, 4096, b"s", b"p" * 64)])
    assert [(n, e) for n, e in result.response] == [("alice", None), ("bob", None)]
    image = apply_records(image, result.records, offset=0, epoch=1)
    assert sorted(image.scram_credentials) == [("alice", 1), ("bob", 2)]
    refused = alter_credentials(image, [Deletion("carol", 1), Deletion("alice", 1)], [
        Upsertion("alice", 1, 4096, b"s", b"p"), Upsertion("", 1, 4096, b"s", b"p"),
        Upsertion("dave", 9, 4096, b"s", b"p"), Upsertion("erin", 1, 100, b"s", b"p"),
        Upsertion("frank", 1, 20000, b"s", b"p")])
    assert refused.records == ()
    assert {n: (e.error, e.message) for n, e in refused.response} == {
        "carol": (Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "alice": (Errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "": (Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "dave": (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "erin": (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "frank": (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    }
    deleted = alter_credentials(image, [Deletion("bob", 2)], [])
    assert apply_records(image, deleted.records, offset=1, epoch=1).scram_credentials.get(("bob", 2)) is None


def _kraft(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, timeout=60)


def test_storage_format_add_scram_writes_kafkas_bootstrap_file_and_never_the_password(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                      "listeners=CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\n"
                      f"metadata.log.dir={tmp_path / 'data'}\n")
    cluster_id = _kraft("storage", "random-uuid").stdout.strip()
    out = _kraft("storage", "format", "-c", str(config), "-t", cluster_id,
                 "--add-scram", "SCRAM-SHA-256=[name=alice,password=Wonderland-7]",
                 "-S", "SCRAM-SHA-512=[name=bob,password=Builder-8,iterations=8192]")
    assert out.returncode == 0, out.stderr
    assert "Wonderland-7" not in out.stdout + out.stderr
    bootstrap = tmp_path / "data" / BOOTSTRAP_FILE
    assert b"Wonderland-7" not in bootstrap.read_bytes() and b"Builder-8" not in bootstrap.read_bytes()
    records = read_bootstrap(tmp_path / "data")
    assert isinstance(records[0], FeatureLevelRecord) and records[0].name == "metadata.version"
    assert [(r.name, r.mechanism, r.iterations) for r in records[1:]] == [("alice", 1, 4096), ("bob", 2, 8192)]

    refused = _kraft("storage", "format", "-c", str(config), "-t", cluster_id,
                     "--add-scram", "SCRAM-SHA-256=[name=carol,password=x,iterations=10]")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "kraft storage format: The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"]
