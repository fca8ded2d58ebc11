"""ACLs of a ZooKeeper cluster, kept as Kafka's ZooKeeper authorizer (AclAuthorizer) keeps
them, so an ACL created through one broker is enforced by all.

One znode per resource pattern: ``/kafka-acl/<ResourceType>/<name>`` for literal patterns,
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for prefixed ones, holding
``{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}``.
A change is announced under ``/kafka-acl-changes`` (``Topic:name``) or
``/kafka-acl-extended-changes`` (JSON); every broker watches both and reads the ACLs again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss

from ..security.authorizer import AclBinding, AclPermissionType, PatternType, StandardAuthorizer
from ..security.types import AclOperation, ResourceType
from . import zk_data as z
from .zk_client import KafkaZkClient

log = logging.getLogger(__name__)

Resource = tuple[ResourceType, str, PatternType]


def camel(name: str) -> str:
    """Kafka's SecurityUtils names: ``CLUSTER_ACTION`` -> ``ClusterAction``."""
    return "".join(part.capitalize() for part in name.split("_"))


_TYPES = {camel(t.name): t for t in ResourceType}
_OPERATIONS = {camel(o.name): o for o in AclOperation}
_PERMISSIONS = {camel(p.name): p for p in AclPermissionType}


def resource_path(resource: Resource) -> str:
    rtype, name, pattern = resource
    return z.acl_path(camel(rtype.name), name, pattern.name)


def to_entry(acl: AclBinding) -> z.ZkAclEntry:
    return z.ZkAclEntry(acl.principal, camel(acl.permission_type.name), camel(acl.operation.name), acl.host)


def from_entry(resource: Resource, e: z.ZkAclEntry) -> AclBinding:
    rtype, name, pattern = resource
    return AclBinding(rtype, name, pattern, e.principal, e.host, _OPERATIONS[e.operation],
                      _PERMISSIONS[e.permission_type])  # fmt: skip


class ZkAclAuthorizer(StandardAuthorizer):
    """StandardAuthorizer whose ACLs live in ZooKeeper (``load`` once the session is up)."""

    def __init__(
        self,
        zk: KafkaZkClient,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        super().__init__(None, super_users, allow_everyone_if_no_acl_found)
        self.zk = zk
        self._stored: set[Resource] = set()

    def load(self) -> None:
        self.zk.get_children(z.LITERAL_ACL_CHANGES_PATH, self._on_change)
        self.zk.get_children(z.EXTENDED_ACL_CHANGES_PATH, self._on_change)
        self._read_all()

    def _resources(self) -> list[Resource]:
        out: list[Resource] = []
        for pattern, root in ((PatternType.LITERAL, z.LITERAL_ACL_PATH),
                              (PatternType.PREFIXED, f"{z.EXTENDED_ACL_PATH}/prefixed")):  # fmt: skip
            for type_name in self.zk.get_children(root):
                rtype = _TYPES.get(type_name)
                if rtype is None:
                    continue
                out += [(rtype, name, pattern) for name in self.zk.get_children(f"{root}/{type_name}")]
        return out

    def _read_all(self) -> None:
        acls: list[AclBinding] = []
        resources = self._resources()
        for resource in resources:
            entries, _ = self.zk.get_versioned_acls(resource_path(resource))
            acls += [from_entry(resource, e) for e in entries if e.operation in _OPERATIONS]
        with self._lock:
            self._acls = acls
            self._stored = set(resources)
            self._reindex()

    def _on_change(self, _event: Any = None) -> None:
        """kazoo's thread: a broker changed ACLs; re-arm the watches and read them all."""
        try:
            self.zk.get_children(z.LITERAL_ACL_CHANGES_PATH, self._on_change)
            self.zk.get_children(z.EXTENDED_ACL_CHANGES_PATH, self._on_change)
            self._read_all()
        except (ConnectionClosedError, ConnectionLoss):
            log.debug("ACL change while the ZooKeeper session closes")
        except Exception:
            log.exception("reading ACLs from ZooKeeper failed")

    def _save(self) -> None:
        """Called under the lock with the new ACL list: write each resource whose ACLs
        changed (an empty one loses its znode) and announce it."""
        by_resource: dict[Resource, list[AclBinding]] = {}
        for acl in self._acls:
            by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
        for resource in set(by_resource) | self._stored:
            path = resource_path(resource)
            entries = [to_entry(a) for a in by_resource.get(resource, [])]
            current, version = self.zk.get_versioned_acls(path)
            if current == entries:
                continue
            if entries:
                self.zk.conditional_set_or_create_acls(path, entries, version)
            elif version >= 0:
                self.zk.zk.delete(path, version=version)
            self._announce(resource)
        self._stored = set(by_resource)

    def _announce(self, resource: Resource) -> None:
        rtype, name, pattern = resource
        if pattern == PatternType.LITERAL:
            self.zk.create_acl_change_notification(
                z.LITERAL_ACL_CHANGES_PATH, z.encode_literal_acl_change(camel(rtype.name), name))
        else:
            self.zk.create_acl_change_notification(
                z.EXTENDED_ACL_CHANGES_PATH,
                z.encode_extended_acl_change(rtype.name, name, pattern.name))  # fmt: skip
