"""ACLs of a ZooKeeper cluster, kept as Kafka's ZooKeeper authorizer (AclAuthorizer) keeps
them, so an ACL created through one broker is enforced by all.

One znode per resource pattern: ``/kafka-acl/<ResourceType>/<name>`` for literal patterns,
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for prefixed ones, holding
``{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}``.
A change is announced under ``/kafka-acl-changes`` (``Topic:name``) or
``/kafka-acl-extended-changes`` (JSON); every broker watches both and reads the ACLs again.

Writes are AclAuthorizer.updateResourceAcls: the resource's znode is read, changed and
written back at the version read (created when absent, deleted when emptied); when another
broker wrote it in between, it is read again and the change applied again (at most
``MAX_UPDATE_RETRIES`` times, after a short random backoff), so ACLs created on one resource
through several brokers at once all land.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss

from ..security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    StandardAuthorizer,
)
from ..security.types import AclOperation, ResourceType
from . import data as z
from .client import KafkaZkClient

log = logging.getLogger(__name__)

Resource = tuple[ResourceType, str, PatternType]
Entries = list[z.ZkAclEntry]
MAX_UPDATE_RETRIES = 10  # Kafka's AclAuthorizer.maxUpdateRetries
BACKOFF_S = (0.005, 0.05)  # Kafka waits 500-1000 ms; these writes run on the request's loop


class AclUpdateError(RuntimeError):
    """The resource's znode kept changing under every retry."""


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


def _adding(added: Entries) -> Callable[[Entries], Entries]:
    def change(current: Entries) -> Entries:
        return current + [e for e in dict.fromkeys(added) if e not in current]

    return change


def _resource_of(acl: AclBinding) -> Resource:
    return acl.resource_type, acl.resource_name, acl.pattern_type


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

    # --- writes (AclAuthorizer.createAcls / deleteAcls) -------------------------------------

    def create(self, bindings: list[AclBinding]) -> None:
        by_resource: dict[Resource, list[z.ZkAclEntry]] = {}
        for acl in bindings:
            by_resource.setdefault(_resource_of(acl), []).append(to_entry(acl))
        for resource, added in by_resource.items():
            self._update_resource(resource, _adding(added))

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the ACLs it removed (read from ZooKeeper as they were removed)."""
        resources = {_resource_of(a) for a in self.acls() if any(f.matches(a) for f in filters)}
        removed: list[list[AclBinding]] = [[] for _ in filters]
        for resource in sorted(resources, key=repr):
            gone: list[AclBinding] = []

            def drop(cur: Entries, resource: Resource = resource, gone: list[AclBinding] = gone) -> Entries:
                gone.clear()
                keep = []
                for e in cur:
                    acl = from_entry(resource, e) if e.operation in _OPERATIONS else None
                    if acl is not None and any(f.matches(acl) for f in filters):
                        gone.append(acl)
                    else:
                        keep.append(e)
                return keep

            self._update_resource(resource, drop)
            for i, f in enumerate(filters):
                removed[i] += [a for a in gone if f.matches(a)]
        return removed

    def _update_resource(self, resource: Resource, change: Callable[[Entries], Entries]) -> None:
        """Read, change, write at the version read; re-read and retry when another writer
        got there first. The cache takes what was written; a change is announced."""
        path = resource_path(resource)
        current, version = self.zk.get_versioned_acls(path)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            new = change(current)
            if new == current:
                self._cache(resource, current)
                return
            if new:
                done = self.zk.conditional_set_or_create_acls(path, new, version)
            else:
                done = self.zk.conditional_delete(path, version)
            if done:
                self._cache(resource, new)
                self._announce(resource)
                return
            time.sleep(random.uniform(*BACKOFF_S))
            current, version = self.zk.get_versioned_acls(path)
        raise AclUpdateError(f"Failed to update ACLs for {path} after trying a maximum of "
                             f"{MAX_UPDATE_RETRIES} times")  # fmt: skip

    def _cache(self, resource: Resource, entries: Entries) -> None:
        acls = [from_entry(resource, e) for e in entries if e.operation in _OPERATIONS]
        with self._lock:
            self._acls = [a for a in self._acls if _resource_of(a) != resource] + acls
            self._reindex()

    def _announce(self, resource: Resource) -> None:
        rtype, name, pattern = resource
        if pattern == PatternType.LITERAL:
            self.zk.create_acl_change_notification(
                z.LITERAL_ACL_CHANGES_PATH, z.encode_literal_acl_change(camel(rtype.name), name))
        else:
            self.zk.create_acl_change_notification(
                z.EXTENDED_ACL_CHANGES_PATH,
                z.encode_extended_acl_change(rtype.name, name, pattern.name))  # fmt: skip
