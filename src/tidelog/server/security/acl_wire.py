"""ACL bindings and filters from the wire (CreateAcls/DescribeAcls/DeleteAcls), validated
as Kafka's AclControlManager and AclBindingFilter do."""

from __future__ import annotations

from typing import Any

from .authorizer import CLUSTER_NAME, AclBinding, AclBindingFilter, AclPermissionType, PatternType
from .types import AclOperation, KafkaPrincipal, ResourceType


def _enum(kind: type[Any], value: int, what: str) -> Any:
    try:
        return kind(int(value))
    except ValueError:
        raise ValueError(f"Invalid {what} {value}") from None


def binding_from_creation(c: Any) -> AclBinding:
    rt = _enum(ResourceType, c.resource_type, "resourceType")
    pt = _enum(PatternType, getattr(c, "resource_pattern_type", 3), "patternType")
    op = _enum(AclOperation, c.operation, "operation")
    perm = _enum(AclPermissionType, c.permission_type, "permissionType")
    if rt in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError("Invalid resourceType")
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("Invalid patternType")
    if op in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError("Invalid operation")
    if perm in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
        raise ValueError("Invalid permissionType")
    if not c.resource_name:
        raise ValueError("Resource name should not be empty")
    if rt == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    KafkaPrincipal.parse(c.principal)  # ValueError names the problem
    if not c.host:
        raise ValueError("Invalid host")
    return AclBinding(rt, c.resource_name, pt, c.principal, c.host, op, perm)


def filter_from_request(r: Any) -> AclBindingFilter:
    rt = _enum(ResourceType, r.resource_type_filter, "resourceType")
    pt = _enum(PatternType, getattr(r, "pattern_type_filter", 3), "patternType")
    op = _enum(AclOperation, r.operation, "operation")
    perm = _enum(AclPermissionType, r.permission_type, "permissionType")
    if PatternType.UNKNOWN in (pt,) or rt == ResourceType.UNKNOWN:
        raise ValueError("Filter contains UNKNOWN elements")
    if op == AclOperation.UNKNOWN or perm == AclPermissionType.UNKNOWN:
        raise ValueError("Filter contains UNKNOWN elements")
    return AclBindingFilter(rt, r.resource_name_filter, pt, r.principal_filter, r.host_filter,
                            op, perm)
