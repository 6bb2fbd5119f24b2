"""Finalized features as Kafka's controller changes them: UpdateFeatures (KIP-584, KIP-778),
by FeatureControlManager's rules, in its order and with its messages.

What this software supports is one table, `SUPPORTED`: ApiVersions advertises it, brokers
register it, and the controller checks every level against it. kraft implements the
behaviours and record versions of metadata.version 3.3-IV3 alone (the level a new log starts
at), so that is its whole range there; kraft.version 0 and 1 (KIP-853); and its own
`kraft.derived.fencing`, which every replica replays record by record, either way.

Each update, in the order of the HashMap Kafka's controller puts them in, whatever the
request's order (java_order.py); the first refused refuses them all, nothing written:
an unknown upgrade type; a level below 0; a level outside the local controller's range or a
registered broker's ("Local controller 1 only supports versions 7", "Broker 2 does not
support this feature."); lowering a level with UPGRADE, or raising one with a downgrade type.
Then, by feature: metadata.version may go down only where no level in between changed the
metadata (else refused, even UNSAFE_DOWNGRADE, as Kafka refuses it); kraft.version is the
Raft layer's (`upgrade_kraft`: RaftCore.upgrade_kraft_version, whose refusals carry Kafka's
messages) and is never lowered, and, as Kafka does, the upgrade writes a NoOpRecord beside
it so that the answer waits for a commit; any other feature is one FeatureLevelRecord (level
0 removes it). A feature of Kafka's that kraft does not implement (kafka_releases.FEATURES:
group.version, ...) takes level 0 alone, as `downgrade --release-version` asks; a name
Kafka does not know either is "not found". Kafka checks registered controllers too from
metadata.version 3.7-IV0, which kraft's logs never reach.
"""

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraft.java_order import hash_map_order, string_hash
from kraft.metadata.image import DERIVED_FENCING, KRAFT_VERSION, METADATA_VERSION, MetadataImage
from kraft.metadata.kafka_releases import FEATURES, METADATA_CHANGED
from kraft.metadata.metadata_errors import ControllerError, Errors
from kraft.metadata.operations import ControllerResult
from kraft.metadata.records import FeatureLevelRecord, MetadataRecord, NoOpRecord

# What this software supports: name -> (min, max). The one place that says it.
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (7, 7),
    KRAFT_VERSION: (0, 1),
    DERIVED_FENCING: (0, 1),
}
_DISABLED = (0, 0)  # a feature a node does not list: QuorumFeatures.DISABLED


class UpgradeType(enum.IntEnum):
    """FeatureUpdate.UpgradeType, by the codes UpdateFeatures v1+ carries."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> "UpgradeType":
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: UpgradeType


def _range_text(low: int, high: int) -> str:
    """VersionRange.toString."""
    return str(low) if low == high else f"{low}+" if high == 0x7FFF else f"{low}-{high}"


def _not_supported(level: int, who: str, supported: tuple[int, int]) -> str | None:
    """QuorumFeatures.reasonNotSupported."""
    low, high = supported
    if low <= level <= high:
        return None
    if high == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {_range_text(low, high)}"


def _invalid(name: str, level: int, why: str) -> ControllerError:
    return ControllerError(Errors.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {name}. {why}")


def _current(image: MetadataImage, name: str, kraft_version: int) -> int:
    return kraft_version if name == KRAFT_VERSION else image.features.get(name, 0)


def _unsupported_reason(image: MetadataImage, node_id: int, name: str, level: int) -> str | None:
    """Why the local controller or a registered broker cannot take `level` (reasonNotSupported)."""
    why = _not_supported(level, f"Local controller {node_id}", SUPPORTED.get(name, _DISABLED))
    for broker_id in sorted(image.brokers.keys()):
        if why is not None:
            break
        ranges = {f.name: (f.min_supported_version, f.max_supported_version)
                  for f in image.brokers[broker_id].features}
        why = _not_supported(level, f"Broker {broker_id}", ranges.get(name, _DISABLED))
    return why


def _metadata_version(current: int, level: int, unsafe: bool) -> FeatureLevelRecord:
    """FeatureControlManager.updateMetadataVersion's own check (an unknown level is already
    outside SUPPORTED): a downgrade only where no level between changed the metadata."""
    if level < current and any(v in METADATA_CHANGED for v in range(level + 1, current + 1)):
        why = ("Unsafe metadata downgrade is not supported in this version." if unsafe else
               "Refusing to perform the requested downgrade because it might delete metadata information.")
        raise ControllerError(Errors.INVALID_UPDATE_VERSION,
                              f"Unsupported metadata.version downgrade from {current} to {level}. {why}")
    return FeatureLevelRecord(name=METADATA_VERSION, feature_level=level)


def _update(image: MetadataImage, update: FeatureUpdate, node_id: int, kraft_version: int,
            upgrade_kraft: Callable[[int], None]) -> tuple[MetadataRecord, ...]:
    """One update's records (FeatureControlManager.updateFeature), or ControllerError."""
    name, level, kind = update.name, update.level, update.upgrade_type
    if kind == UpgradeType.UNKNOWN:
        raise _invalid(name, level, "The controller does not support the given upgrade type.")
    current = _current(image, name, kraft_version)
    if level < 0:
        raise _invalid(name, level, "A feature version cannot be less than 0.")
    why = _unsupported_reason(image, node_id, name, level)
    if why is not None:
        raise _invalid(name, level, why)
    if level < current and kind == UpgradeType.UPGRADE:
        raise _invalid(name, level, "Can't downgrade the version of this feature without setting the upgrade type "
                                    "to either safe or unsafe downgrade.")
    if level > current and kind != UpgradeType.UPGRADE:
        raise _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        return (_metadata_version(current, level, kind == UpgradeType.UNSAFE_DOWNGRADE),)
    if name == KRAFT_VERSION:
        if kind == UpgradeType.UPGRADE:
            upgrade_kraft(level)
            return (NoOpRecord(),)  # an offset for the answer to wait on
        if level != current:
            raise _invalid(name, level, "Can't downgrade the version of this feature.")
        return ()
    if name not in SUPPORTED and name not in FEATURES:  # level 0 of a feature Kafka has not either
        raise _invalid(name, level, f"Feature {name} not found.")
    return (FeatureLevelRecord(name=name, feature_level=level),)


def update_features(image: MetadataImage, updates: Iterable[FeatureUpdate], *, node_id: int, kraft_version: int,
                    upgrade_kraft: Callable[[int], None]) -> ControllerResult[None]:
    """The records of every update, or ControllerError for the first refused (nothing
    written). `upgrade_kraft(level)` raises kraft.version, or checks that it may be raised:
    the caller decides, by what it passes, and raises ControllerError for a refusal."""
    records: list[MetadataRecord] = []
    by_name = {update.name: update for update in updates}  # Kafka's controller puts them in a HashMap,
    for name in hash_map_order(by_name, string_hash):  # and checks and writes them in its order
        records += _update(image, by_name[name], node_id, kraft_version, upgrade_kraft)
    return ControllerResult(tuple(records), None)


def finalized(image: MetadataImage, kraft_version: int) -> dict[str, int]:
    """The finalized levels ApiVersions lists (Kafka's KRaftMetadataCache.features): the
    image's, and kraft.version from the Raft layer when above 0 (a FeatureLevelRecord for it
    is ignored, KAFKA-18979)."""
    levels = {name: level for name, level in image.features.items() if name != KRAFT_VERSION and level}
    if kraft_version > 0:
        levels[KRAFT_VERSION] = kraft_version
    return levels
