"""Client quotas as Kafka's ClientQuotaControlManager and ClientQuotasImage.describe rule
them (server/apis/quota_api.py): what an alteration writes or refuses, and which entities a
filter matches."""

from dataclasses import dataclass

import pytest

from kraft.metadata import Errors, MetadataImage, apply_records
from kraft.protocol import ErrorCode
from kraft.server.apis import quota_api

ALICE = (("user", "alice"),)
DEFAULT_CLIENT = (("client-id", None),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))


def altered(image: MetadataImage, *alterations) -> tuple[MetadataImage, list]:
    result = quota_api.alter_quotas(image, list(alterations))
    return apply_records(image, result.records, offset=image.offset + len(result.records), epoch=1), result.response


def test_values_are_set_changed_only_when_different_and_removed():
    image, outcomes = altered(MetadataImage(), (ALICE, [("producer_byte_rate", 1024.0)]),
                              (DEFAULT_CLIENT, [("request_percentage", 12.5)]))
    assert outcomes == [None, None]
    assert dict(image.client_quotas[ALICE]) == {"producer_byte_rate": 1024.0}
    same = quota_api.alter_quotas(image, [(ALICE, [("producer_byte_rate", 1024.0)])])
    assert same.records == () and same.response == [None], "no record for a value that does not change"
    nothing = quota_api.alter_quotas(image, [(ALICE, [("consumer_byte_rate", None)])])
    assert nothing.records == (), "no removal of a quota that is not set"
    image, _ = altered(image, (ALICE, [("producer_byte_rate", None)]))
    assert ALICE not in image.client_quotas


@pytest.mark.parametrize("entity, ops, message", [
    (ALICE, [("producer_byte_rate", 1.5)], "producer_byte_rate cannot be a fractional value."),
    (ALICE, [("request_percentage", 0.0)], "Quota request_percentage must be greater than 0"),
    (ALICE, [("connection_creation_rate", 5.0)], "Invalid configuration key connection_creation_rate"),
    ((("ip", "10.0.0.1"), ("user", "alice")), [("connection_creation_rate", 5.0)],
     "IP entity shouldnot be combined with User or ClientId"),
    ((), [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
    (ALICE, [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)], "Duplicate quota key producer_byte_rate"),
])
def test_refusals_are_kafkas_and_write_nothing_for_their_entity(entity, ops, message):
    result = quota_api.alter_quotas(MetadataImage(), [(entity, ops), (DEFAULT_CLIENT, [("request_percentage", 5.0)])])
    refused, fine = result.response
    assert refused.error == Errors.INVALID_REQUEST and message in refused.message
    assert fine is None and len(result.records) == 1


@dataclass
class Component:
    entity_type: str
    match_type: int
    match: str | None = None


def described(image: MetadataImage, components: list[Component], strict: bool) -> list:
    @dataclass
    class Header:
        request_api_version: int = 1

    @dataclass
    class Request:
        components: list
        strict: bool

    answer = quota_api.describe(image, Header(), Request(components, strict))
    assert answer.error_code == ErrorCode.none, answer.error_message
    return sorted(tuple((e.entity_type, e.entity_name) for e in entry.entity) for entry in answer.entries)


def test_filters_match_an_exact_name_the_default_or_any_name_and_strict_excludes_other_types():
    image, _ = altered(MetadataImage(), (ALICE, [("producer_byte_rate", 1.0)]),
                       (DEFAULT_CLIENT, [("request_percentage", 5.0)]), (ALICE_APP, [("consumer_byte_rate", 2.0)]))
    user = [Component("user", quota_api.EXACT, "alice")]
    assert described(image, user, strict=True) == [ALICE]
    assert described(image, user, strict=False) == sorted([ALICE_APP, ALICE])
    assert described(image, [Component("client-id", quota_api.DEFAULT)], strict=True) == [DEFAULT_CLIENT]
    assert described(image, [Component("client-id", quota_api.SPECIFIED)], strict=False) == [ALICE_APP]
