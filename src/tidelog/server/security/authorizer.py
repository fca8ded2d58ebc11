"""ACLs with Kafka's StandardAuthorizer semantics, persisted in the log dir.

Matching (StandardAuthorizerData.authorize): super users are allowed everything; the ACLs
that match the resource are the LITERAL ones with its name, the LITERAL ``*`` wildcard and
the PREFIXED ones whose prefix starts the name. If none match the resource at all the answer
is ``allow.everyone.if.no.acl.found``. Otherwise any matching DENY (principal or ``User:*``,
host or ``*``, operation or ALL) denies; else a matching ALLOW allows, where ALLOW READ,
WRITE, DELETE or ALTER also allow DESCRIBE and ALLOW ALTER_CONFIGS allows DESCRIBE_CONFIGS.
ACLs live in ``<first log dir>/tidelog-acls.json`` beside the cluster metadata (Kafka keeps
them as AccessControlEntryRecords in the metadata log), written crash-safe.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from tidelog.util.files import atomic_write

from .types import AclOperation, KafkaPrincipal, ResourceType

ACLS_FILE = "tidelog-acls.json"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
# class names that enable the authorizer (KRaft's, and ZooKeeper-era AclAuthorizer files)
AUTHORIZER_CLASSES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
})


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls filter; None and the ANY codes match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._matches_pattern(acl):
            return False
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission_type in (AclPermissionType.ANY, acl.permission_type)
        )

    def _matches_pattern(self, acl: AclBinding) -> bool:
        pt = self.pattern_type
        if pt == PatternType.MATCH:
            if self.resource_name is None:
                return True
            return acl.matches_resource(acl.resource_type, self.resource_name)
        if pt not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name in (None, acl.resource_name)


def _acl_to_json(acl: AclBinding) -> dict[str, object]:
    return {k: int(v) if isinstance(v, enum.IntEnum) else v for k, v in asdict(acl).items()}


def _acl_from_json(d: dict[str, object]) -> AclBinding:
    return AclBinding(
        ResourceType(int(d["resource_type"])),  # type: ignore[call-overload]
        str(d["resource_name"]),
        PatternType(int(d["pattern_type"])),  # type: ignore[call-overload]
        str(d["principal"]),
        str(d["host"]),
        AclOperation(int(d["operation"])),  # type: ignore[call-overload]
        AclPermissionType(int(d["permission_type"])),  # type: ignore[call-overload]
    )


class StandardAuthorizer:
    """The broker's ``authorizer``: ``authorize`` plus the ACL store the ACL APIs edit."""

    def __init__(
        self,
        log_dir: Path | None,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.path = log_dir / ACLS_FILE if log_dir is not None else None
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._lock = threading.Lock()
        self._acls: list[AclBinding] = []
        # per resource type: literal name -> ACLs (the "*" wildcard included), prefixed ACLs;
        # authorize runs per partition on the fetch path, so no scan of every ACL
        self._index: dict[ResourceType, tuple[dict[str, list[AclBinding]], list[AclBinding]]] = {}
        if self.path is not None and self.path.exists():
            data = json.loads(self.path.read_text())
            self._acls = [_acl_from_json(d) for d in data.get("acls", [])]
        self._reindex()

    def _reindex(self) -> None:
        index: dict[ResourceType, tuple[dict[str, list[AclBinding]], list[AclBinding]]] = {}
        for acl in self._acls:
            literal, prefixed = index.setdefault(acl.resource_type, ({}, []))
            if acl.pattern_type == PatternType.PREFIXED:
                prefixed.append(acl)
            else:
                literal.setdefault(acl.resource_name, []).append(acl)
        self._index = index  # swapped whole: readers on other threads see old or new

    def _matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        entry = self._index.get(resource_type)
        if entry is None:
            return []
        literal, prefixed = entry
        out = literal.get(name, []) + (literal.get(WILDCARD, []) if name != WILDCARD else [])
        out.extend(a for a in prefixed if name.startswith(a.resource_name))
        return out

    # -- the authorizer seam ------------------------------------------------------------------
    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        matching = self._matching(resource_type, name)
        if not matching:
            return self.allow_if_no_acl
        mine = [
            a for a in matching
            if a.principal in (who, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)
        ]
        for acl in mine:
            if acl.permission_type == AclPermissionType.DENY and acl.operation in (
                AclOperation.ALL, operation
            ):
                return False
        implied = _IMPLIES.get(operation, frozenset())
        return any(
            acl.permission_type == AclPermissionType.ALLOW
            and (acl.operation in (AclOperation.ALL, operation) or acl.operation in implied)
            for acl in mine
        )

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's authorizeByResourceType: some ALLOW for the principal on this type that no
        DENY of the same principal covers (a literal/prefixed DENY covering the pattern)."""
        who = str(principal)
        if who in self.super_users:
            return True
        typed = [a for a in self._acls if a.resource_type == resource_type]
        if not typed:
            return self.allow_if_no_acl
        mine = [a for a in typed if a.principal in (who, WILDCARD_PRINCIPAL)
                and a.host in (host, WILDCARD) and a.operation in (AclOperation.ALL, operation)]
        denies = [a for a in mine if a.permission_type == AclPermissionType.DENY]
        for allow in mine:
            if allow.permission_type != AclPermissionType.ALLOW:
                continue
            covered = any(
                (d.resource_name == WILDCARD and d.pattern_type == PatternType.LITERAL)
                or (d.pattern_type == PatternType.PREFIXED
                    and allow.resource_name.startswith(d.resource_name))
                or (d.pattern_type == allow.pattern_type == PatternType.LITERAL
                    and d.resource_name == allow.resource_name)
                for d in denies
            )
            if not covered:
                return True
        return False

    # -- the ACL store ------------------------------------------------------------------------
    def acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return [a for a in self._acls if flt is None or flt.matches(a)]

    def create(self, bindings: list[AclBinding]) -> None:
        with self._lock:
            for acl in bindings:
                if acl not in self._acls:
                    self._acls.append(acl)
            self._save()
            self._reindex()

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter, the ACLs it removed."""
        with self._lock:
            removed = [[a for a in self._acls if f.matches(a)] for f in filters]
            gone = {a for group in removed for a in group}
            if gone:
                self._acls = [a for a in self._acls if a not in gone]
                self._save()
                self._reindex()
            return removed

    def _save(self) -> None:
        if self.path is not None:
            data = {"version": 1, "acls": [_acl_to_json(a) for a in self._acls]}
            atomic_write(self.path, json.dumps(data, indent=1).encode())


def parse_super_users(value: str) -> list[str]:
    """``super.users`` is ';'-separated principals, e.g. ``User:admin;User:CN=ops``."""
    out = []
    for item in value.split(";"):
        item = item.strip()
        if item:
            KafkaPrincipal.parse(item)
            out.append(item)
    return out
