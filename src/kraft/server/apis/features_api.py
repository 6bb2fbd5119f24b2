"""UpdateFeatures (KIP-584) as Kafka 4.2's controller answers it, and the features ApiVersions
lists (kafka-features describe reads them).

UpdateFeatures is an admin write: brokers forward it, the active controller answers it, and
admin clients that bootstrap from controllers send it there directly (`forwardable` in
admin.py). ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED. The rules are
kraft.metadata.features'; the answer is Kafka's QuorumController's: one top-level error,
"The update failed for all features since the following feature had an error: ...", and
for versions 0-1 on success a result per feature (error NONE, message "NONE", as Kafka
fills it). Version 0 has AllowDowngrade where v1 has UpgradeType: a downgrade is a safe one.

ApiVersions v3+ carries the node's supported features (below v4 without those whose minimum
is 0, KAFKA-17492), its finalized levels (none at 0) and their epoch: the offset of the
image the node has applied, -1 before it has one.
"""

from datetime import timedelta
from typing import Any

from kraft.metadata.features import FeatureUpdate, UpgradeType
from kraft.protocol import ErrorCode
from kraft.protocol.build import build_response
from kraft.protocol.server import FeaturesAnswer

UPDATE_FEATURES = 57
VERSIONS = (0, 2)
FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "


def requested(header: Any, request: Any) -> list[FeatureUpdate]:
    """The updates, in the request's order (UpdateFeaturesRequest.featureUpdates)."""
    if header.request_api_version == 0:
        return [FeatureUpdate(u.feature, u.max_version_level,
                              UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE)
                for u in request.feature_updates]
    return [FeatureUpdate(u.feature, u.max_version_level, UpgradeType.of(u.upgrade_type))
            for u in request.feature_updates]


def response(header: Any, request: Any, error_code: ErrorCode = ErrorCode.none,
             error_message: str | None = None) -> Any:
    """The answer: a success (per feature results below v2), or `error_code` for all."""
    version = header.request_api_version
    data: dict[str, Any] = {"throttle_time": timedelta(0), "error_code": error_code, "error_message": error_message}
    if version <= 1:
        data["results"] = [] if error_code != ErrorCode.none else [
            {"feature": u.feature, "error_code": ErrorCode.none, "error_message": "NONE"}
            for u in request.feature_updates]
    return build_response(UPDATE_FEATURES, version, data)


def refused(header: Any, request: Any, error: ErrorCode, message: str) -> Any:
    """A feature the controller refused (its message wrapped as QuorumController wraps it)."""
    return response(header, request, error, FAILED_FOR_ALL + message)


def api_versions_features(version: int, supported: dict[str, tuple[int, int]], finalized: dict[str, int],
                          epoch: int) -> FeaturesAnswer:
    """What ApiVersions `version` says of features (ApiVersionsResponse.createApiVersionsResponse)."""
    return FeaturesAnswer(
        tuple((name, low, high) for name, (low, high) in sorted(supported.items()) if version >= 4 or low > 0),
        tuple((name, level) for name, level in sorted(finalized.items()) if level != 0),
        epoch)
