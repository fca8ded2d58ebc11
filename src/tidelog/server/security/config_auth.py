"""Which ACL guards a config resource (Kafka's KafkaApis.authorizeConfigResource): a topic's
configs are the topic's, a broker's, its loggers' and client metrics subscriptions' are the
cluster's, a group's the group's; the error names what was refused."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode

from .types import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..context import RequestContext

# org.apache.kafka.common.config.ConfigResource.Type codes
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def config_denied(
    ctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> ErrorCode | None:
    """None when allowed, else the *_AUTHORIZATION_FAILED code to answer."""
    if resource_type == TOPIC:
        if ctx.authorize(operation, ResourceType.TOPIC, name):
            return None
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == GROUP:
        if ctx.authorize(operation, ResourceType.GROUP, name):
            return None
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        if ctx.authorize(operation, ResourceType.CLUSTER, "kafka-cluster"):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None  # unknown types fall through to the handler's own INVALID_REQUEST
