"""A BrokerRegistration is refused, as Kafka 4.2's controller refuses it
(ClusterControlManager.registerBroker), when the broker does not support a finalized level:
kraft.version from the Raft layer, metadata.version, and any feature it does not list (taken
as level 0 alone). Images are built by the controller's own operations."""

import pytest

from kraft.metadata import ControllerError, Errors
from kraft.metadata import operations as ctl
from kraft.metadata.features import KRAFT_VERSION, SUPPORTED
from kraft.metadata.image import DERIVED_FENCING, METADATA_VERSION
from kraft.metadata.records import BrokerFeature, FeatureLevelRecord, RegisterBrokerRecord
from kraft.protocol import ErrorCode
from tests.metadata.cluster import Cluster

KAFKAS_ONLY_MV = {METADATA_VERSION: (7, 7)}  # what a Kafka broker lists when kraft.version's max is 0


def finalized(**levels: int) -> Cluster:
    """A cluster whose log finalized metadata.version 7 and `levels` (name with _ for .)."""
    c = Cluster()
    records = [FeatureLevelRecord(name=METADATA_VERSION, feature_level=7)]
    records += [FeatureLevelRecord(name=name.replace("_", "."), feature_level=level) for name, level in levels.items()]
    c.commit(ctl.ControllerResult(tuple(records), None))
    return c


def features(ranges: dict[str, tuple[int, int]]) -> list[BrokerFeature]:
    return [BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi) for n, (lo, hi) in ranges.items()]


def register(c: Cluster, ranges: dict[str, tuple[int, int]], kraft_version: int, broker_id: int = 1):
    # kraft_version only when above 0, its default: the other checks stand without it.
    raft = {"kraft_version": kraft_version} if kraft_version else {}
    return ctl.register_broker(c.image, broker_id, incarnation_id=bytes([broker_id]) * 16,
                               broker_epoch=c.image.offset + 1, features=features(ranges), **raft)


def refusal(c: Cluster, ranges: dict[str, tuple[int, int]], kraft_version: int) -> str:
    before = c.image
    with pytest.raises(ControllerError) as refused:
        register(c, ranges, kraft_version)
    assert refused.value.error == Errors.UNSUPPORTED_VERSION
    assert int(refused.value.error) == int(ErrorCode.unsupported_version)
    assert c.image is before and c.image.broker(1) is None  # nothing written
    return refused.value.message


def wants(level: int, name: str, low: int, high: int) -> str:
    return (f"Unable to register because the broker does not support finalized version {level} of {name}. "
            f"The broker wants a version between {low} and {high}, inclusive.")


@pytest.mark.parametrize("ranges", [
    {METADATA_VERSION: (7, 7), KRAFT_VERSION: (0, 0)},
    KAFKAS_ONLY_MV,  # not listed: level 0 alone, as Kafka takes it
])
def test_a_broker_without_the_upgraded_kraft_version_is_refused_with_kafkas_message(ranges):
    assert refusal(finalized(), ranges, kraft_version=1) == wants(1, KRAFT_VERSION, 0, 0)


@pytest.mark.parametrize("ranges", [
    {METADATA_VERSION: (7, 7), KRAFT_VERSION: (0, 1)},
    {METADATA_VERSION: (7, 7), KRAFT_VERSION: (1, 1)},
])
def test_a_broker_that_supports_the_finalized_kraft_version_registers(ranges):
    c = finalized()
    c.commit(register(c, ranges, kraft_version=1))
    assert c.image.broker(1).features == tuple(features(ranges))


def test_at_kraft_version_0_a_broker_need_not_list_it_but_may_not_want_more():
    c = finalized()
    assert refusal(c, {METADATA_VERSION: (7, 7), KRAFT_VERSION: (1, 1)}, kraft_version=0) == (
        wants(0, KRAFT_VERSION, 1, 1))
    c.commit(register(c, KAFKAS_ONLY_MV, kraft_version=0))
    assert c.image.broker(1) is not None


def test_kraft_version_is_the_raft_layers_not_a_feature_level_record_in_the_image():
    c = finalized(kraft_version=1)  # such a record is ignored (KAFKA-18979)
    c.commit(register(c, KAFKAS_ONLY_MV, kraft_version=0))
    assert refusal(finalized(kraft_version=0), KAFKAS_ONLY_MV, kraft_version=1) == wants(1, KRAFT_VERSION, 0, 0)


def test_any_feature_finalized_above_0_that_the_broker_does_not_list_refuses_it():
    c = finalized(kraft_derived_fencing=1, group_version=0)
    assert refusal(c, {METADATA_VERSION: (7, 7), KRAFT_VERSION: (0, 1)}, kraft_version=0) == (
        wants(1, DERIVED_FENCING, 0, 0))
    c.commit(register(c, {METADATA_VERSION: (7, 7), DERIVED_FENCING: (0, 1)}, kraft_version=0))  # group.version 0


def test_a_listed_feature_not_finalized_is_at_level_0():
    c = finalized()
    assert refusal(c, {METADATA_VERSION: (7, 7), "group.version": (1, 1)}, kraft_version=0) == (
        wants(0, "group.version", 1, 1))
    c.commit(register(c, {METADATA_VERSION: (7, 7), "unknown.feature": (0, 5)}, kraft_version=0))


def test_metadata_version_is_checked_and_a_broker_that_omits_it_is_taken_at_3_3_iv3():
    c = finalized()
    assert refusal(c, {METADATA_VERSION: (8, 29)}, kraft_version=0) == wants(7, METADATA_VERSION, 8, 29)
    result = register(c, {}, kraft_version=0)
    (record,) = (r for r in result.records if isinstance(r, RegisterBrokerRecord))
    assert record.features == tuple(features({METADATA_VERSION: (7, 7)}))  # the range it was taken at


def test_listed_features_are_checked_first_in_the_requests_order_then_kraft_version():
    c = finalized(kraft_derived_fencing=1)
    assert refusal(c, {"b.feature": (1, 2), METADATA_VERSION: (8, 8)}, kraft_version=1) == wants(0, "b.feature", 1, 2)
    assert refusal(c, {METADATA_VERSION: (8, 8), "b.feature": (1, 2)}, kraft_version=1) == (
        wants(7, METADATA_VERSION, 8, 8))
    # Both unlisted and above 0: Kafka's HashMap yields kraft.version first (bucket 5, the other 7).
    assert refusal(c, KAFKAS_ONLY_MV, kraft_version=1) == wants(1, KRAFT_VERSION, 0, 0)


@pytest.mark.parametrize("kraft_version", [0, 1])
def test_krafts_own_brokers_register_at_every_level_kraft_finalizes(kraft_version):
    c = finalized(kraft_derived_fencing=1)
    c.commit(register(c, SUPPORTED, kraft_version=kraft_version))
    assert c.image.broker(1).features == tuple(features(SUPPORTED))
