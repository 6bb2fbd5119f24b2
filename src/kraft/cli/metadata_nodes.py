"""A metadata image as the tree Kafka's metadata shell browses, node for node and word for word.

Kafka's shell (shell/.../RootShellNode, LocalShellNode) puts the image under `/image` and
the shell's own facts under `/local`; the image's nodes are metadata/.../image/node/*Node:

    /image/provenance                          offset O, epoch E, time T
    /image/features/metadataVersion            3.3-IV3
    /image/features/zkMigrationState           NONE
    /image/features/finalized_<name>           a finalized level (not metadata.version)
    /image/cluster/brokers/<id>                BrokerRegistration(...)
    /image/cluster/controllers/<id>            ControllerRegistration(...)
    /image/topics/byName/<name>/{name,id,<partition>}
    /image/topics/byId/<id>/{name,id,<partition>}     PartitionRegistration(...)
    /image/configs/<TYPE>[:<name>]/<key>       a config value (TOPIC:orders, BROKER:1, BROKER)
    /image/clientQuotas/<entity>/<key>         clientId(a)_user(b) -> a quota (Java double)
    /image/producerIds/nextProducerId
    /image/acls/<id>                           StandardAcl(...)
    /image/scram/<mechanism>/<user>            ScramCredentialData(salt=..., ...) in hex
    /image/delegationToken/<token id>          DelegationTokenData...

Files print as the Java objects' toString does (BrokerRegistration, PartitionRegistration,
StandardAcl, ...). Kafka's shell prints through ShellNodePrinter with redaction disabled, so
SCRAM credentials show their salt, stored key and server key in hex: salted hashes, which
is all the log holds; no password is ever in it. Where Kafka's node would show nothing
useful, kraft departs and says so here: a client-quota entity's default name (null in the
record, left out by Kafka, so "user(alice)" could be two entities) is `<default>`, as Kafka's
ZooKeeper tools named it.

Nodes are lazy: a directory lists and looks up its children from the immutable image only
when asked, so `cat` of one partition in a million-partition image touches one topic.
"""

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from functools import cache, partial
from importlib import metadata
from typing import Any, NamedTuple, TypeVar

from kraft.cli.kafka_json import java_double
from kraft.metadata import ConfigResourceType, MetadataImage, PartitionRegistration, TopicImage, uuid_str
from kraft.metadata.image import METADATA_VERSION, BrokerRegistration, ControllerRegistration, ScramCredential
from kraft.metadata.kafka_releases import METADATA_VERSIONS
from kraft.metadata.records import AccessControlEntryRecord, BrokerEndpoint, BrokerFeature, DelegationTokenRecord


class Leaf(NamedTuple):
    """A file: the text `cat` prints."""

    text: str


class Dir(NamedTuple):
    """A directory: its children's names (any order; the commands sort), and a lookup that
    gives None for a name it does not hold."""

    names: Callable[[], Iterable[str]]
    child: Callable[[str], "Node | None"]


Node = Leaf | Dir


def sorted_children(directory: Dir) -> Iterator[tuple[str, Node]]:
    """A directory's children by name, sorted as Kafka's commands sort them (String order)."""
    for name in sorted(directory.names()):
        child = directory.child(name)
        if child is not None:  # always, for a name the directory listed: images are immutable
            yield name, child

# Kafka's enums, by the ids the records carry.
_ZK_MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"}
_SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
_LEADER_RECOVERY_STATES = {0: "RECOVERED", 1: "RECOVERING"}
_RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                   6: "DELEGATION_TOKEN", 7: "USER"}
_PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
_OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
               8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
               12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}
_PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
SCRAM_MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # ScramMechanism.mechanismName() -> type
_QUOTA_ENTITY_NAMES = {"client-id": "clientId", "ip": "ip", "user": "user"}  # in Kafka's order
DEFAULT_ENTITY = "<default>"
_ZERO_UUID = bytes(16)  # DirectoryId.MIGRATING: what Kafka shows for unassigned directories


# ------------------------------------------------------------------------------ Java's texts


def _ints(values: Iterable[int]) -> str:
    """Arrays.toString of an int[] (and List.toString): [1, 2, 3]."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def _uuids(values: Iterable[bytes]) -> str:
    return "[" + ", ".join(uuid_str(v) for v in values) + "]"


def _version_range(low: int, high: int) -> str:
    """VersionRange.toString."""
    if low == high:
        return str(low)
    return f"{low}+" if high == 0x7FFF else f"{low}-{high}"


def _java_object(name: str, **fields: object) -> str:
    """`Name(field=value, ...)`, the toString Kafka's metadata classes write by hand."""
    return f"{name}(" + ", ".join(f"{key}={value}" for key, value in fields.items()) + ")"


def _listeners_and_features(endpoints: Iterable[BrokerEndpoint], features: Iterable[BrokerFeature]) -> dict[str, str]:
    """The listeners and supportedFeatures of Broker- and ControllerRegistration.toString:
    each sorted by name, endpoints as Endpoint.toString, feature ranges as VersionRange's."""
    listeners = {e.name: e for e in endpoints}
    ranges = {f.name: _version_range(f.min_supported_version, f.max_supported_version) for f in features}
    endpoint_texts = (
        f"Endpoint(listenerName='{e.name}', securityProtocol={_SECURITY_PROTOCOLS.get(e.security_protocol)}, "
        f"host='{e.host}', port={e.port})"
        for _, e in sorted(listeners.items())
    )
    return {"listeners": f"[{', '.join(endpoint_texts)}]",
            "supportedFeatures": f"{{{', '.join(f'{k}: {v}' for k, v in sorted(ranges.items()))}}}"}


def broker_text(b: BrokerRegistration) -> str:
    return _java_object(
        "BrokerRegistration", id=b.id, epoch=b.epoch, incarnationId=uuid_str(b.incarnation_id),
        **_listeners_and_features(b.endpoints, b.features),
        rack="Optional.empty" if b.rack is None else f"Optional[{b.rack}]", fenced=_bool(b.fenced),
        inControlledShutdown=_bool(b.in_controlled_shutdown), isMigratingZkBroker=_bool(b.is_migrating_zk_broker),
        directories=_uuids(b.log_dirs),
    )


def controller_text(c: ControllerRegistration) -> str:
    return _java_object("ControllerRegistration", id=c.id, incarnationId=uuid_str(c.incarnation_id),
                        zkMigrationReady=_bool(c.zk_migration_ready), **_listeners_and_features(c.endpoints, c.features))


def partition_text(p: PartitionRegistration) -> str:
    """PartitionRegistration.toString; no directories (a v0 record) are all MIGRATING, as Kafka
    fills them in, and no ELR an empty one."""
    return _java_object(
        "PartitionRegistration", replicas=_ints(p.replicas),
        directories=_uuids(p.directories or (_ZERO_UUID,) * len(p.replicas)), isr=_ints(p.isr),
        removingReplicas=_ints(p.removing_replicas), addingReplicas=_ints(p.adding_replicas),
        elr=_ints(p.eligible_leader_replicas or ()), lastKnownElr=_ints(p.last_known_elr or ()), leader=p.leader,
        leaderRecoveryState=_LEADER_RECOVERY_STATES.get(p.leader_recovery_state, p.leader_recovery_state),
        leaderEpoch=p.leader_epoch, partitionEpoch=p.partition_epoch,
    )


def acl_text(r: AccessControlEntryRecord) -> str:
    """StandardAcl.toString; an id Kafka's enums do not know reads UNKNOWN, as fromCode gives."""
    return _java_object(
        "StandardAcl", resourceType=_RESOURCE_TYPES.get(r.resource_type, "UNKNOWN"), resourceName=r.resource_name,
        patternType=_PATTERN_TYPES.get(r.pattern_type, "UNKNOWN"), principal=r.principal, host=r.host,
        operation=_OPERATIONS.get(r.operation, "UNKNOWN"), permissionType=_PERMISSIONS.get(r.permission_type, "UNKNOWN"),
    )


def scram_text(c: ScramCredential) -> str:
    """ScramCredentialDataNode's text: the salted hashes in hex, as the record holds them."""
    return _java_object("ScramCredentialData", salt=c.salt.hex(), storedKey=c.stored_key.hex(),
                        serverKey=c.server_key.hex(), iterations=c.iterations)


def token_text(t: DelegationTokenRecord) -> str:
    """DelegationTokenDataNode's text, its unbalanced parentheses included."""
    return (f"DelegationTokenDatatokenId={t.token_id}(owner={t.owner}(tokenRequester={t.requester}"
            f"(renewers={' '.join(t.renewers)}, issueTimestamp={t.issue_timestamp}, "
            f"maxTimestamp={t.max_timestamp}), expiryTimestamp={t.expiration_timestamp}")


def provenance_text(image: MetadataImage, time_ms: int) -> str:
    """ProvenanceNode's text: the time in DateTimeFormatter.ISO_ZONED_DATE_TIME at UTC."""
    when = datetime.fromtimestamp(time_ms / 1000, UTC)
    fraction = f".{when.microsecond // 1000:03d}".rstrip("0").rstrip(".")
    return f"offset {image.offset}, epoch {image.epoch}, time {when:%Y-%m-%dT%H:%M:%S}{fraction}Z[UTC]"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def quota_entity_name(entity: tuple[tuple[str, str | None], ...]) -> str:
    """ClientQuotasImageNode's name for an entity: clientId(a)_ip(b)_user(c), in that order,
    with \\, ( and ) escaped; the default entity of a type is <default>."""
    names = dict(entity)
    parts = []
    for kind in [*_QUOTA_ENTITY_NAMES, *sorted(set(names) - set(_QUOTA_ENTITY_NAMES))]:
        if kind in names:
            value = names[kind]
            escaped = DEFAULT_ENTITY if value is None else re.sub(r"([\\()])", r"\\\1", value)
            parts.append(f"{_QUOTA_ENTITY_NAMES.get(kind, kind)}({escaped})")
    return "_".join(parts)


def uuid_from_text(text: str) -> bytes | None:
    """Uuid.fromString: 22 characters of URL-safe base64; None if `text` is not one."""
    if len(text) != 22:
        return None
    try:
        return base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        return None


# ------------------------------------------------------------------------------ the tree


def _fixed(children: dict[str, Callable[[], Node]]) -> Dir:
    """A directory whose children are known by name up front."""
    return Dir(children.keys, lambda name: children[name]() if name in children else None)


_Key = TypeVar("_Key")


def _keyed(keys: Callable[[], Iterable[_Key]], name_of: Callable[[_Key], str],
           key_of: Callable[[str], _Key | None], node_of: Callable[[_Key], Node | None]) -> Dir:
    """A directory over an image map: its keys shown by `name_of`, a name read back by
    `key_of` (None: not a key), the child built by `node_of` (None: absent)."""

    def child(name: str) -> Node | None:
        key = key_of(name)
        return None if key is None else node_of(key)

    return Dir(lambda: (name_of(k) for k in keys()), child)


def _table(build: Callable[[], Mapping[str, Any]], node_of: Callable[[Any], Node]) -> Dir:
    """A directory over a table of names built from the image once, when first used."""
    table = cache(build)
    return Dir(lambda: table().keys(), lambda name: node_of(table()[name]) if name in table() else None)


def _values(mapping: Mapping[str, Any], text_of: Callable[[Any], str]) -> Dir:
    """A directory of files, one per key of an image map."""
    return Dir(mapping.keys, lambda key: Leaf(text_of(mapping[key])) if key in mapping else None)


def _int_key(name: str) -> int | None:
    return int(name) if re.fullmatch(r"[+-]?\d+", name) else None


def _topic(topic: TopicImage) -> Dir:
    """TopicImageNode: name, id and each partition."""
    def child(name: str) -> Node | None:
        if name == "name":
            return Leaf(topic.name)
        if name == "id":
            return Leaf(uuid_str(topic.id))
        pid = _int_key(name)
        return Leaf(partition_text(topic.partitions[pid])) if pid is not None and 0 <= pid < len(topic.partitions) else None

    return Dir(lambda: ["name", "id", *(str(i) for i in range(len(topic.partitions)))], child)


def _features(image: MetadataImage) -> Dir:
    level = image.features.get(METADATA_VERSION)
    version = METADATA_VERSIONS.get(level, f"{level} (a level newer than kraft knows)") if level else "3.0-IV1"
    state = _ZK_MIGRATION_STATES.get(image.zk_migration_state, "NONE")
    children: dict[str, Callable[[], Node]] = {"metadataVersion": lambda: Leaf(version),
                                               "zkMigrationState": lambda: Leaf(state)}
    for name, value in image.features.items():
        if name != METADATA_VERSION:
            children[f"finalized_{name}"] = partial(Leaf, str(value))
    return _fixed(children)


def _configs(image: MetadataImage) -> Dir:
    """ConfigurationsImageNode: TYPE for a type's default resource, TYPE:name for the others."""
    def table() -> dict[str, object]:
        out = {}
        for resource, entries in image.configs.items():
            kind = ConfigResourceType(resource.type).name
            out[f"{kind}:{resource.name}" if resource.name else kind] = entries
        return out

    return _table(table, lambda entries: _values(entries, str))


def _client_quotas(image: MetadataImage) -> Dir:
    """ClientQuotasImageNode: an entity's quotas by key, each a Java double."""
    return _table(lambda: {quota_entity_name(e): q for e, q in image.client_quotas.items()},
                  lambda quotas: _values(quotas, java_double))


def _scram(image: MetadataImage) -> Dir:
    """ScramImageNode: both mechanisms, always; under each the users holding a credential."""
    def users(mechanism: int) -> Dir:
        def credential(user: str) -> Node | None:
            found = image.scram_credentials.get((user, mechanism))
            return None if found is None else Leaf(scram_text(found))

        return Dir(lambda: [u for u, m in image.scram_credentials.keys() if m == mechanism], credential)

    return _fixed({name: partial(users, m) for name, m in SCRAM_MECHANISMS.items()})


def image_node(image: MetadataImage, time_ms: int) -> Dir:
    """MetadataImageNode: every part of the image."""
    topics_by_id = _keyed(image.topics_by_id.keys, uuid_str, uuid_from_text,
                          lambda k: None if (t := image.topics_by_id.get(k)) is None else _topic(t))
    topics_by_name = _keyed(image.topics_by_name.keys, str, str,
                            lambda k: None if (t := image.topic(k)) is None else _topic(t))
    brokers = _keyed(image.brokers.keys, str, _int_key,
                     lambda k: None if (b := image.brokers.get(k)) is None else Leaf(broker_text(b)))
    controllers = _keyed(image.controllers.keys, str, _int_key,
                         lambda k: None if (c := image.controllers.get(k)) is None else Leaf(controller_text(c)))
    acls = _keyed(image.acls.keys, uuid_str, uuid_from_text,
                  lambda k: None if (a := image.acls.get(k)) is None else Leaf(acl_text(a)))
    tokens = _keyed(image.delegation_tokens.keys, str, str,
                    lambda k: None if (t := image.delegation_tokens.get(k)) is None else Leaf(token_text(t)))
    return _fixed({
        "provenance": lambda: Leaf(provenance_text(image, time_ms)),
        "features": lambda: _features(image),
        "cluster": lambda: _fixed({"brokers": lambda: brokers, "controllers": lambda: controllers}),
        "topics": lambda: _fixed({"byName": lambda: topics_by_name, "byId": lambda: topics_by_id}),
        "configs": lambda: _configs(image),
        "clientQuotas": lambda: _client_quotas(image),
        "producerIds": lambda: _fixed({"nextProducerId": lambda: Leaf(str(image.next_producer_id))}),
        "acls": lambda: acls,  # Kafka's MetadataImageNode lists ACLs here directly, by id
        "scram": lambda: _scram(image),
        "delegationToken": lambda: tokens,
    })


def root_node(image: MetadataImage, time_ms: int) -> Dir:
    """RootShellNode: /image, and /local with the shell's version (kraft's) and commit id."""
    try:
        version = metadata.version("kraft")
    except metadata.PackageNotFoundError:
        version = "unknown"
    local = _fixed({"version": lambda: Leaf(version), "commitId": lambda: Leaf("unknown")})
    return _fixed({"local": lambda: local, "image": lambda: image_node(image, time_ms)})
