"""Who may do what: Kafka's StandardAuthorizer over the ACLs in the node's image (KIP-801).

Off unless `authorizer.class.name` names Kafka's KRaft authorizer
(org.apache.kafka.metadata.authorizer.StandardAuthorizer), as in Kafka: then every request
is decided by `super.users` (semicolon-separated principals), the ACLs committed as
AccessControlEntryRecord, and `allow.everyone.if.no.acl.found` (false) for a resource no
ACL names. Off, nothing is checked and nothing is spent per request.

Two places check, as in Kafka:

- **The listener's guard** (`guard`), before the handler, for APIs decided by one action on
  the cluster: the Raft RPCs, BrokerRegistration, BrokerHeartbeat and Envelope need
  CLUSTER_ACTION (so only the nodes' principals, the controllers' certificates or logins,
  may vote, announce an epoch, fetch as a replica or register a broker); DescribeQuorum and
  DescribeCluster need DESCRIBE. A refusal is the API's answer with
  CLUSTER_AUTHORIZATION_FAILED at its top level.
- **The admin handlers**, per item, so a forwarded request is decided on the controller by
  the principal its Envelope carries: CreateTopics CREATE on the cluster or the topic,
  DeleteTopics DELETE, CreatePartitions ALTER, AlterConfigs/IncrementalAlterConfigs
  ALTER_CONFIGS on the topic (the cluster for brokers), CreateAcls/DeleteAcls,
  AlterUserScramCredentials and UnregisterBroker ALTER on the cluster, DescribeAcls and
  DescribeUserScramCredentials DESCRIBE on it, AlterClientQuotas ALTER_CONFIGS and
  DescribeClientQuotas DESCRIBE_CONFIGS on it.
"""

import dataclasses
import typing
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kraft.metadata import MetadataImage
from kraft.protocol import ErrorCode
from kraft.protocol.codec import response_class
from kraft.protocol.session import Session, current_session
from kraft.raft.messages import METADATA_TOPIC
from kraft.security.acl import CLUSTER_NAME, Acl, AclOperation, Authorizer, ResourceType
from kraft.server.settings.server_config import ServerConfig

CLUSTER_ACTION_APIS = frozenset((52, 53, 54, 1, 59, 82, 62, 63, 58))  # Raft RPCs, broker lifecycle, Envelope
ALTER_CLUSTER_APIS = frozenset((80, 81))  # AddRaftVoter, RemoveRaftVoter: an operator's, as in Kafka
DESCRIBE_CLUSTER_APIS = frozenset((55, 60))  # DescribeQuorum, DescribeCluster
FETCH_SNAPSHOT = 59
REFUSED = "Authorization failed."


def acl_of(record: Any) -> Acl:
    return Acl(record.resource_type, record.resource_name, record.pattern_type, record.principal, record.host,
               record.operation, record.permission_type)


def top_level_refusal(api_key: int, version: int, error: ErrorCode, message: str) -> Any:
    """The API's answer with only its top-level error set (arrays empty, ids -1)."""
    return _blank(response_class(api_key, version), error, message)


def _blank(cls: Any, error: ErrorCode, message: str) -> Any:
    """`cls` with the error and message set, and every other required field empty (a nested
    struct, such as UpdateRaftVoter's CurrentLeader, blank in turn)."""
    hints = typing.get_type_hints(cls)
    data: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kind = f.metadata.get("kafka_type") or ""
        if f.name == "error_code":
            data[f.name] = error
        elif f.name == "error_message":
            data[f.name] = message
        elif not required:
            continue
        elif kind.startswith("timedelta"):
            data[f.name] = timedelta(0)
        elif kind == "bool":
            data[f.name] = False
        elif kind == "string":
            data[f.name] = ""
        elif kind.startswith("int"):
            data[f.name] = -1
        elif kind == "bytes":
            data[f.name] = b""
        elif dataclasses.is_dataclass(hints.get(f.name)):
            data[f.name] = _blank(hints[f.name], error, message)
        else:
            data[f.name] = ()  # an array of structs
    return cls(**data)


class Authorization:
    def __init__(self, config: ServerConfig, image: Callable[[], MetadataImage]) -> None:
        self.enabled = bool(config.authorizer_class_name)
        self.super_users = frozenset(u.strip() for u in config.super_users.split(";") if u.strip())
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._image = image
        self._acls: Any = None  # the image's acls map the authorizer was built from
        self._authorizer = Authorizer((), self.super_users, self.allow_if_no_acl)

    def authorizer(self) -> Authorizer:
        acls = self._image().acls
        if acls is not self._acls:  # immutable maps: a new one means the ACLs changed
            self._authorizer = Authorizer((acl_of(r) for r in acls.values()), self.super_users,
                                          self.allow_if_no_acl)
            self._acls = acls
        return self._authorizer

    def allowed(self, operation: AclOperation, resource_type: ResourceType = ResourceType.CLUSTER,
                name: str = CLUSTER_NAME, session: Session | None = None) -> bool:
        if not self.enabled:
            return True
        who = session or current_session()
        return self.authorizer().authorize(who.principal, who.client_address[0], operation, resource_type, name)

    def controller_guard(self, header: Any, request: Any) -> Any | None:
        """The controller listener's KafkaServer guard: None to serve the request, else the
        refusal to answer."""
        key = header.request_api_key
        if key in CLUSTER_ACTION_APIS:
            return self._cluster(header, AclOperation.CLUSTER_ACTION)
        if key in ALTER_CLUSTER_APIS:
            return self._cluster(header, AclOperation.ALTER)
        return self._cluster(header, AclOperation.DESCRIBE) if key in DESCRIBE_CLUSTER_APIS else None

    def client_guard(self, header: Any, request: Any) -> Any | None:
        """The client listener's: Fetch and FetchSnapshot there are consumers' reads (the
        Fetch handler checks READ per partition), FetchSnapshot READ on the log."""
        key = header.request_api_key
        if key in DESCRIBE_CLUSTER_APIS:
            return self._cluster(header, AclOperation.DESCRIBE)
        if key in ALTER_CLUSTER_APIS:  # forwarded under the node's own login: checked here first
            return self._cluster(header, AclOperation.ALTER)
        if key == FETCH_SNAPSHOT and not self.allowed(AclOperation.READ, ResourceType.TOPIC, METADATA_TOPIC):
            return top_level_refusal(key, header.request_api_version, ErrorCode.topic_authorization_failed, REFUSED)
        return None

    def _cluster(self, header: Any, operation: AclOperation) -> Any | None:
        if self.allowed(operation):
            return None
        return top_level_refusal(header.request_api_key, header.request_api_version,
                                 ErrorCode.cluster_authorization_failed,
                                 f"Cluster authorization failed: {operation.name} on the cluster")
