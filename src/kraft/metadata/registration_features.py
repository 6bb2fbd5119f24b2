"""What a broker must support to register: every finalized feature's level, as Kafka's
controller checks a BrokerRegistration (ClusterControlManager.registerBroker,
processRegistrationFeature).

A broker that could not replay the log at its finalized levels must not join: after
`kraft features upgrade --feature kraft.version=1` a broker that only knows a static quorum
would misread the voters' records. So each level the cluster has finalized must lie in the
range the broker gives for it, or the registration is refused with UNSUPPORTED_VERSION and
nothing is written:

- each feature the broker lists, in the request's order, against its finalized level (0 for
  a feature not finalized, so a broker that wants at least level 1 of one is refused too);
- metadata.version, which a broker that does not list it is taken to support at
  MINIMUM_VERSION (3.3-IV3) alone: that range is what its record then lists;
- every feature finalized above 0 that the broker does not list, which it is taken to
  support at level 0 alone (so it is refused). kraft.version is the Raft layer's, and counts
  as finalized at the level its latest KRaftVersionRecord gives (appended, not yet committed,
  as Kafka's controller reads it from its Raft client), whatever the image says.

The first feature refused is the one the message names. The unlisted ones are checked in
the order of Kafka's HashMap of the finalized names (java_order.py): kraft.version (bucket 5)
before kraft.derived.fencing (bucket 7), say.
"""

from collections.abc import Sequence

from kraft.java_order import hash_map_order, string_hash
from kraft.metadata.image import KRAFT_VERSION, METADATA_VERSION, MetadataImage
from kraft.metadata.kafka_releases import MINIMUM_METADATA_VERSION
from kraft.metadata.metadata_errors import ControllerError, Errors
from kraft.metadata.records import BrokerFeature


def finalized_levels(image: MetadataImage, kraft_version: int) -> dict[str, int]:
    """FinalizedControllerFeatures as the controller passes them to a registration: the
    image's levels, metadata.version (a log not bootstrapped yet reads as the level kraft's
    logs start at) and kraft.version from the Raft layer."""
    levels = {METADATA_VERSION: image.features.get(METADATA_VERSION, MINIMUM_METADATA_VERSION)}
    levels.update(image.features.items())  # in the order Kafka's controller puts them
    levels[KRAFT_VERSION] = kraft_version
    return levels


def registered_features(image: MetadataImage, offered: Sequence[BrokerFeature],
                        kraft_version: int) -> tuple[BrokerFeature, ...]:
    """The features the RegisterBrokerRecord lists, once every finalized level is one the
    broker supports; else ControllerError(UNSUPPORTED_VERSION) with Kafka's message."""
    finalized = finalized_levels(image, kraft_version)
    listed = {f.name for f in offered}
    recorded = tuple(offered)
    if METADATA_VERSION not in listed:
        recorded += (BrokerFeature(name=METADATA_VERSION, min_supported_version=MINIMUM_METADATA_VERSION,
                                   max_supported_version=MINIMUM_METADATA_VERSION),)
    unlisted = [name for name in hash_map_order(finalized, string_hash)
                if finalized[name] and name not in listed and name != METADATA_VERSION]
    for feature in (*recorded, *(BrokerFeature(name=name, min_supported_version=0, max_supported_version=0)
                                 for name in unlisted)):
        level = finalized.get(feature.name, 0)
        low, high = feature.min_supported_version, feature.max_supported_version
        if not low <= level <= high:
            raise ControllerError(
                Errors.UNSUPPORTED_VERSION,
                f"Unable to register because the broker does not support finalized version {level} of "
                f"{feature.name}. The broker wants a version between {low} and {high}, inclusive.",
            )
    return recorded
