"""UpdateFeatures' answers in each version as Kafka's controller shapes them, and version 0's
AllowDowngrade read as Kafka's UpdateFeaturesRequest reads it."""

from types import SimpleNamespace

from kraft.metadata.features import FeatureUpdate, UpgradeType
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_request
from kraft.protocol.codec import encode
from kraft.server.apis import features_api

UPDATES = [{"feature": "kraft.version", "max_version_level": 1, "upgrade_type": 1, "allow_downgrade": False},
           {"feature": "kraft.derived.fencing", "max_version_level": 0, "upgrade_type": 7, "allow_downgrade": True}]


def request(version: int):
    header = SimpleNamespace(request_api_version=version)
    return header, build_request(57, version, {"feature_updates": UPDATES, "validate_only": True})


def test_version_0s_allow_downgrade_is_a_safe_downgrade_and_an_unknown_type_stays_unknown():
    assert features_api.requested(*request(0)) == [FeatureUpdate("kraft.version", 1, UpgradeType.UPGRADE),
                                                   FeatureUpdate("kraft.derived.fencing", 0, UpgradeType.SAFE_DOWNGRADE)]
    assert features_api.requested(*request(2))[1].upgrade_type == UpgradeType.UNKNOWN


def test_results_per_feature_only_below_version_2_and_only_on_success():
    for version in (0, 1):
        ok = features_api.response(*request(version))
        assert [(r.feature, r.error_code, r.error_message) for r in ok.results] == [
            ("kraft.version", ErrorCode.none, "NONE"), ("kraft.derived.fencing", ErrorCode.none, "NONE")]
        failed = features_api.refused(*request(version), ErrorCode.invalid_update_version, "why")
        assert failed.results == () and failed.error_message == features_api.FAILED_FOR_ALL + "why"
    ok = features_api.response(*request(2))
    assert (ok.error_code, ok.error_message) == (ErrorCode.none, None) and not hasattr(ok, "results")
    encode(ok)  # Kafka's schema: no Results field from version 2 on
    refused = features_api.response(*request(2), ErrorCode.cluster_authorization_failed, "Authorization failed.")
    assert (refused.error_code, refused.error_message) == (ErrorCode.cluster_authorization_failed,
                                                           "Authorization failed.")
