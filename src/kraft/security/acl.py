"""ACLs as Kafka's StandardAuthorizer reads them (KIP-801): the codes its records and
requests use, the decision for one action, and the filters DescribeAcls and DeleteAcls match.

The decision, Kafka's: a super user may do anything. Otherwise the ACLs on the resource are
those of its type whose pattern matches its name (LITERAL equal, LITERAL "*", PREFIXED a
prefix of it); of those naming the principal (or `User:*`) and the host (or "*"), a DENY for
the operation (or ALL) refuses; else an ALLOW for it (or ALL) allows, where an ALLOW of READ,
WRITE, DELETE or ALTER also allows DESCRIBE and one of ALTER_CONFIGS also DESCRIBE_CONFIGS;
else, if the resource has no ACL at all, allow.everyone.if.no.acl.found decides; else
refused. The index is by (resource type, name), so one decision reads the few ACLs of a
name, the wildcard's and a prefix's, not every ACL.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
_IMPLIES = {
    AclOperation.DESCRIBE: frozenset((AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER)),
    AclOperation.DESCRIBE_CONFIGS: frozenset((AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)),
}


@dataclass(frozen=True)
class Acl:
    """One ACL binding: a resource pattern and an entry, in Kafka's codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter; None matches any value of a field."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: Acl) -> bool:
        """Kafka's AclBindingFilter.matches."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not _pattern_covers(acl, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
                return False
            if self.resource_name is not None and self.resource_name != acl.resource_name:
                return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission_type in (AclPermissionType.ANY, acl.permission_type))

    @property
    def unknown(self) -> str | None:
        """Why the filter can match nothing Kafka knows (its INVALID_REQUEST), or None."""
        for name, value, enum in (("resource type", self.resource_type, ResourceType),
                                  ("pattern type", self.pattern_type, PatternType),
                                  ("operation", self.operation, AclOperation),
                                  ("permission type", self.permission_type, AclPermissionType)):
            if value not in enum._value2member_map_ or value == 0:
                return f"Unknown {name}"
        return None


def _pattern_covers(acl: Acl, name: str) -> bool:
    """Whether `acl`'s pattern applies to the resource `name`."""
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)


def invalid_new_acl(acl: Acl) -> str | None:
    """Kafka's AclControlManager.validateNewAcl: what makes an ACL impossible to create."""
    if acl.resource_type not in ResourceType._value2member_map_ or acl.resource_type in (0, 1):
        return f"Invalid resourceType {_name(ResourceType, acl.resource_type)}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, acl.pattern_type)}"
    if acl.operation not in AclOperation._value2member_map_ or acl.operation in (0, 1):
        return f"Invalid operation {_name(AclOperation, acl.operation)}"
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {_name(AclPermissionType, acl.permission_type)}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    return None


def _name(enum: type[IntEnum], value: int) -> str:
    member = enum._value2member_map_.get(value)
    return member.name if member is not None else str(value)


class Authorizer:
    """Decisions over one set of ACLs (rebuilt when the image's ACLs change)."""

    def __init__(self, acls: Iterable[Acl], super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[tuple[int, str], list[Acl]] = {}
        self._prefixed: dict[int, list[Acl]] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        candidates = [*self._literal.get((resource_type, name), ()), *self._literal.get((resource_type, WILDCARD), ()),
                      *(a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.resource_name))]
        if not candidates:
            return self.allow_if_no_acl
        wildcard_principal = principal.partition(":")[0] + ":*"
        allowed = False
        for acl in candidates:
            if acl.principal not in (principal, wildcard_principal) or acl.host not in (WILDCARD, host):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.operation in (AclOperation.ALL, operation):
                    return False
            elif acl.operation == AclOperation.ALL or acl.operation in _IMPLIES.get(operation, (operation,)):
                allowed = True
        return allowed
