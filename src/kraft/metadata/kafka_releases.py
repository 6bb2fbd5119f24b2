"""Kafka 4.2's table of releases and feature levels: what `kafka-features --release-version`,
`version-mapping` and `feature-dependencies` read, and what the controller checks a
metadata.version against.

Facts from Kafka 4.2's server-common (org.apache.kafka.server.common): MetadataVersion (each
level's name, whether it changed the metadata, MINIMUM_VERSION 3.3-IV3 and LATEST_PRODUCTION
4.2-IV1), Feature (its production features, in the enum's order, which the tools print) and
each FeatureVersion enum (KRaftVersion, TransactionVersion, GroupVersion,
EligibleLeaderReplicasVersion, ShareVersion, StreamsVersion): a level's bootstrap
metadata.version (from which a release sets it) and its dependencies. The table describes
Kafka's releases; what kraft itself supports is `features.SUPPORTED`, a different question.
"""

from dataclasses import dataclass

from kraft.metadata.image import METADATA_VERSION

# MetadataVersion: feature level -> its name. Levels 1-6 left the enum in 4.0, but a log
# written by Kafka 3.x may still name them (the metadata shell prints them).
METADATA_VERSIONS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1", 14: "3.6-IV2",
    15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0",
    22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0",
    29: "4.2-IV1",
}
MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION = 7, 29  # MINIMUM_VERSION and LATEST_PRODUCTION
# The levels whose didMetadataChange is true: a downgrade across one may lose metadata.
METADATA_CHANGED = frozenset((7, 8, 11, 13, 14, 15, 17, 23))


@dataclass(frozen=True)
class FeatureLevel:
    """One FeatureVersion: a release from `bootstrap` on sets it; it needs `requires`."""

    level: int
    bootstrap: int  # a metadata.version level
    requires: tuple[tuple[str, int], ...] = ()


# Feature.PRODUCTION_FEATURES, in the enum's order, each level in its enum's order.
FEATURES: dict[str, tuple[FeatureLevel, ...]] = {
    "kraft.version": (FeatureLevel(0, 7), FeatureLevel(1, 21, ((METADATA_VERSION, 21),))),
    "transaction.version": (FeatureLevel(0, 7), FeatureLevel(1, 24), FeatureLevel(2, 24)),
    "group.version": (FeatureLevel(0, 7), FeatureLevel(1, 22)),
    "eligible.leader.replicas.version": (FeatureLevel(0, 7), FeatureLevel(1, 26, ((METADATA_VERSION, 23),))),
    "share.version": (FeatureLevel(0, 7), FeatureLevel(1, 28, ((METADATA_VERSION, 27),))),
    "streams.version": (FeatureLevel(0, 7), FeatureLevel(1, 29)),
}


def metadata_version_of(text: str) -> int | None:
    """MetadataVersion.fromVersionString: a level's name (`3.3-IV3`), or a release (`3.9`,
    `3.9.1`: its first two parts) for that release's latest level; None if 4.2 has none."""
    key = ".".join(text.split(".")[:2])
    for level in range(LATEST_METADATA_VERSION, MINIMUM_METADATA_VERSION - 1, -1):
        if key in (METADATA_VERSIONS[level], METADATA_VERSIONS[level].split("-")[0]):
            return level
    return None


def known_metadata_versions() -> list[str]:
    """MINIMUM_VERSION to LATEST_PRODUCTION, by name."""
    return [METADATA_VERSIONS[level] for level in range(MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION + 1)]


def release_levels(metadata_version: int) -> dict[str, int]:
    """Feature.defaultLevel of every production feature at `metadata_version`: its last
    level whose bootstrap is at or below it (levels are listed in bootstrap order)."""
    return {name: [v.level for v in levels if v.bootstrap <= metadata_version][-1]
            for name, levels in FEATURES.items()}


def requirements(feature: str, level: int) -> tuple[tuple[str, int], ...] | None:
    """FeatureVersion.dependencies of `feature` at `level`; None if there is no such level."""
    for version in FEATURES.get(feature, ()):
        if version.level == level:
            return version.requires
    return None
