"""UpdateFeatures' rules as Kafka 4.2's FeatureControlManager has them, on images built by the
controller's own operations: the order of the checks, their messages, what is written, and
that kraft.version goes to the Raft layer and never down."""

import pytest

from kraft.metadata import ControllerError, Errors
from kraft.metadata import operations as ctl
from kraft.metadata.features import (
    KRAFT_VERSION,
    SUPPORTED,
    FeatureUpdate,
    UpgradeType,
    finalized,
    update_features,
)
from kraft.metadata.image import DERIVED_FENCING, METADATA_VERSION
from kraft.metadata.records import BrokerFeature, FeatureLevelRecord, NoOpRecord
from kraft.server.apis.features_api import api_versions_features
from tests.metadata.cluster import Cluster

UPGRADE, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE


def cluster(*brokers: tuple[int, dict[str, tuple[int, int]]], metadata_version: int = 7) -> Cluster:
    """metadata.version finalized, and brokers registered with the features they list."""
    c = Cluster()
    c.commit(ctl.ControllerResult((FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version),), None))
    for broker_id, ranges in brokers:
        c.commit(ctl.register_broker(c.image, broker_id, incarnation_id=bytes([broker_id]) * 16,
                                     broker_epoch=c.image.offset + 1, features=[
                                         BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                                         for n, (lo, hi) in ranges.items()]))
    return c


def run(c: Cluster, *updates: tuple[str, int, UpgradeType], kraft_version: int = 0, node_id: int = 1,
        raised: list[int] | None = None):
    def upgrade_kraft(level: int) -> None:
        if raised is None:
            raise AssertionError("kraft.version must not be raised here")
        raised.append(level)

    return update_features(c.image, [FeatureUpdate(*u) for u in updates], node_id=node_id,
                           kraft_version=kraft_version, upgrade_kraft=upgrade_kraft)


def refused(c: Cluster, *updates: tuple[str, int, UpgradeType], **kwargs) -> str:
    with pytest.raises(ControllerError) as e:
        run(c, *updates, **kwargs)
    assert e.value.error == Errors.INVALID_UPDATE_VERSION
    return e.value.message


def test_kraft_version_is_raised_by_the_raft_layer_with_a_noop_to_wait_on_and_never_lowered():
    c = cluster((2, dict(SUPPORTED)))
    raised: list[int] = []
    assert run(c, (KRAFT_VERSION, 1, UPGRADE), raised=raised).records == (NoOpRecord(),)
    assert raised == [1]
    assert refused(c, (KRAFT_VERSION, 0, SAFE), kraft_version=1) == (
        "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature.")
    assert refused(c, (KRAFT_VERSION, 0, UNSAFE), kraft_version=1) == (
        "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature.")
    assert refused(c, (KRAFT_VERSION, 0, UPGRADE), kraft_version=1) == (
        "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature without "
        "setting the upgrade type to either safe or unsafe downgrade.")
    assert refused(c, (KRAFT_VERSION, 1, SAFE)) == (
        "Invalid update version 1 for feature kraft.version. Can't downgrade to a newer version.")
    assert refused(c, (KRAFT_VERSION, 2, UPGRADE)) == (
        "Invalid update version 2 for feature kraft.version. Local controller 1 only supports versions 0-1")
    assert run(c, (KRAFT_VERSION, 0, SAFE)).records == ()  # its level already: nothing to do


def test_the_raft_layers_refusal_refuses_the_whole_request():
    c = cluster()

    def not_yet(level: int) -> None:
        raise ControllerError(Errors.INVALID_UPDATE_VERSION, "Invalid upgrade of kraft.version to KRAFT_VERSION_1 "
                                                             "because not all of the voters support it")

    with pytest.raises(ControllerError, match="not all of the voters"):
        update_features(c.image, [FeatureUpdate(DERIVED_FENCING, 1, UPGRADE), FeatureUpdate(KRAFT_VERSION, 1, UPGRADE)],
                        node_id=1, kraft_version=0, upgrade_kraft=not_yet)


def test_unknown_features_types_and_levels_are_refused_in_kafkas_order():
    c = cluster()
    assert refused(c, ("group.version", 1, UPGRADE), node_id=3) == (
        "Invalid update version 1 for feature group.version. Local controller 3 does not support this feature.")
    assert refused(c, ("foo.bar", 0, SAFE)) == (
        "Invalid update version 0 for feature foo.bar. Feature foo.bar not found.")
    assert refused(c, (DERIVED_FENCING, 1, UpgradeType.UNKNOWN)) == (
        "Invalid update version 1 for feature kraft.derived.fencing. The controller does not support the given "
        "upgrade type.")
    assert refused(c, (DERIVED_FENCING, -1, SAFE)) == (
        "Invalid update version -1 for feature kraft.derived.fencing. A feature version cannot be less than 0.")
    assert refused(c, (METADATA_VERSION, 8, UPGRADE)) == (
        "Invalid update version 8 for feature metadata.version. Local controller 1 only supports versions 7")


def test_the_first_refused_is_the_first_in_kafkas_hashmap_order_whatever_the_requests_order():
    c = cluster()
    # metadata.version comes before transaction.version in a HashMap of the two names.
    for updates in ((("transaction.version", 1, UPGRADE), (METADATA_VERSION, 8, UPGRADE)),
                    ((METADATA_VERSION, 8, UPGRADE), ("transaction.version", 1, UPGRADE))):
        assert refused(c, *updates) == (
            "Invalid update version 8 for feature metadata.version. Local controller 1 only supports versions 7")


def test_every_registered_broker_must_support_the_level():
    c = cluster((2, dict(SUPPORTED)), (5, {METADATA_VERSION: (7, 7)}))
    assert refused(c, (DERIVED_FENCING, 1, UPGRADE)) == (
        "Invalid update version 1 for feature kraft.derived.fencing. Broker 5 does not support this feature.")
    c = cluster()
    c.commit(run(c, (DERIVED_FENCING, 1, UPGRADE)))  # a broker wanting level 1 may register only now
    c.commit(ctl.register_broker(c.image, 2, incarnation_id=bytes([2]) * 16, broker_epoch=c.image.offset + 1,
                                 features=[BrokerFeature(name=DERIVED_FENCING, min_supported_version=1,
                                                         max_supported_version=1)]))
    assert refused(c, (DERIVED_FENCING, 0, SAFE)) == (
        "Invalid update version 0 for feature kraft.derived.fencing. Broker 2 only supports versions 1")


def test_a_feature_is_one_record_and_the_first_refusal_writes_nothing():
    c = cluster((2, dict(SUPPORTED)))
    result = run(c, (DERIVED_FENCING, 1, UPGRADE), (METADATA_VERSION, 7, UPGRADE))
    assert result.records == (FeatureLevelRecord(name=DERIVED_FENCING, feature_level=1),
                              FeatureLevelRecord(name=METADATA_VERSION, feature_level=7))
    c.commit(result)
    assert c.image.features[DERIVED_FENCING] == 1
    with pytest.raises(ControllerError):
        run(c, (DERIVED_FENCING, 0, SAFE), (METADATA_VERSION, 8, UPGRADE))
    c.commit(run(c, (DERIVED_FENCING, 0, SAFE)))
    assert DERIVED_FENCING not in c.image.features  # level 0 removes it


def test_a_kafka_feature_kraft_does_not_implement_may_be_set_to_0():
    """As Kafka's controller takes group.version=0 (downgrade --release-version sends it): one
    FeatureLevelRecord, which removes nothing that is there."""
    c = cluster()
    result = run(c, ("group.version", 0, SAFE), ("share.version", 0, UNSAFE))
    assert result.records == (FeatureLevelRecord(name="group.version", feature_level=0),
                              FeatureLevelRecord(name="share.version", feature_level=0))
    c.commit(result)
    assert "group.version" not in c.image.features and finalized(c.image, 0) == {METADATA_VERSION: 7}


def test_metadata_version_goes_down_only_where_no_level_between_changed_the_metadata():
    c = cluster(metadata_version=25)  # a log Kafka 4.0 formatted
    assert refused(c, (METADATA_VERSION, 7, SAFE)) == (
        "Unsupported metadata.version downgrade from 25 to 7. Refusing to perform the requested downgrade because "
        "it might delete metadata information.")
    assert refused(c, (METADATA_VERSION, 7, UNSAFE)) == (
        "Unsupported metadata.version downgrade from 25 to 7. Unsafe metadata downgrade is not supported in this "
        "version.")


def test_apiversions_lists_the_finalized_levels_and_kraft_version_from_the_raft_layer():
    c = cluster()
    c.commit(ctl.ControllerResult((FeatureLevelRecord(name=KRAFT_VERSION, feature_level=1),), None))
    assert finalized(c.image, 0) == {METADATA_VERSION: 7}  # a record for kraft.version is ignored (KAFKA-18979)
    assert finalized(c.image, 1) == {METADATA_VERSION: 7, KRAFT_VERSION: 1}
    v4 = api_versions_features(4, SUPPORTED, finalized(c.image, 1), c.image.offset)
    assert v4.supported == (("kraft.derived.fencing", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 7, 7))
    assert v4.finalized == (("kraft.version", 1), ("metadata.version", 7)) and v4.epoch == c.image.offset
    # Below v4 a feature whose minimum is 0 is left out (KAFKA-17492): older clients fail on it.
    assert api_versions_features(3, SUPPORTED, {}, -1).supported == (("metadata.version", 7, 7),)
