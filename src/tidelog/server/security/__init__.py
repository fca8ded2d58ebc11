"""Security: principals, resource/operation types, the authorizer seam (Kafka's `security/`).

Handlers reach authorization through one call on the request context::

    if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, topic):
        ... TOPIC_AUTHORIZATION_FAILED ...

With no authorizer configured (``authorizer.class.name`` empty, the default) every call
answers True, as Kafka does. ``ctx.authorized_operations(resource_type, name)`` gives the
bit field Metadata/DescribeCluster/DescribeGroups return for ``include_*_authorized_operations``.
"""

from .types import (
    ANONYMOUS,
    AclOperation,
    Authorizer,
    KafkaPrincipal,
    ResourceType,
    supported_operations,
)

__all__ = [
    "ANONYMOUS",
    "AclOperation",
    "Authorizer",
    "KafkaPrincipal",
    "ResourceType",
    "supported_operations",
]
