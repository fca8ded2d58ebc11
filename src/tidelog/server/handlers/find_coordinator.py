"""FindCoordinator (key 10): a group's coordinator is the leader of its
``__consumer_offsets`` partition, a transactional id's the leader of its
``__transaction_state`` partition, a share-partition's ("group:topicId:partition", key type
2) the leader of its ``__share_group_state`` partition, as the metadata image shows them
(COORDINATOR_NOT_AVAILABLE while the partition has no leader or none reachable on the
client's listener). v4+ batches keys (KIP-699). As Kafka's getOrCreateInternalTopic, the
first lookup creates the internal topic (through the AdminManager: off the event loop),
answered once it exists."""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.log_store import LogOffsetsStore, offsets_topic_configs
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.server.coordinator.group.wiring import coordinator_for
from tidelog.server.coordinator.share.records import SHARE_STATE_TOPIC, state_partition_for
from tidelog.server.coordinator.share.wiring import share_state_topic_configs
from tidelog.server.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from tidelog.server.coordinator.transaction.records import partition_for as txn_partition_for
from tidelog.server.coordinator.transaction.state_manager import transaction_topic_configs
from tidelog.server.coordinator.transaction.wiring import txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
NO_NODE = (-1, "", -1)
Lookup = tuple[ErrorCode, str | None, TopicPartition | None]


def _leader_endpoint(ctx: RequestContext, tp: TopicPartition) -> tuple[int, str, int] | None:
    """(node, host, port) of ``tp``'s leader on the client's listener (Kafka's
    MetadataCache.getPartitionLeaderEndpoint)."""
    image = ctx.broker.metadata_cache.image
    reg = image.partition(tp)
    if reg is None or reg.leader < 0:
        return None
    if reg.leader == ctx.broker.node_id:
        return (reg.leader, *ctx.endpoint)
    broker = image.broker(reg.leader)
    ep = None if broker is None else broker.endpoint(ctx.listener_name)
    return None if ep is None else (reg.leader, *ep)


async def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None,
                                                                      tuple[int, str, int]]:
    err, msg, tp = await _lookup(ctx, key, key_type)
    if err != ErrorCode.NONE or tp is None:
        return err, msg, NO_NODE
    node = _leader_endpoint(ctx, tp)
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, NO_NODE
    return ErrorCode.NONE, None, node


async def _lookup_txn(ctx: RequestContext, key: str) -> Lookup:
    """Kafka creates ``__transaction_state`` on the first transaction FindCoordinator."""
    if not key:
        return ErrorCode.INVALID_REQUEST, "The transactional id must not be empty.", None
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, None
    coord = txn_coordinator_for(ctx.broker)
    if not coord.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
    cfg = coord.state.store.config
    if not await ctx.broker.admin_manager.ensure_internal_topic(
        TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions,
        transaction_topic_configs(cfg),
        int(ctx.broker.config.values["transaction.state.log.replication.factor"]),
    ):
        # being created by another request
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
    p = txn_partition_for(key, cfg.transaction_state_log_num_partitions)
    return ErrorCode.NONE, None, TopicPartition(TRANSACTION_STATE_TOPIC, p)


def _share_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """"group:topicId:partition" (the topic id in Kafka's base64 form), or None."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        partition = int(parts[2])
    except (ValueError, binascii.Error):
        return None
    return (parts[0], topic_id, partition) if partition >= 0 else None


async def _lookup_share(ctx: RequestContext, key: str) -> Lookup:
    """KIP-932: the share coordinator of a share-partition is the leader of its
    ``__share_group_state`` partition; brokers ask (CLUSTER_ACTION)."""
    parsed = _share_key(key)
    if parsed is None:
        return ErrorCode.INVALID_REQUEST, "Share key must be groupId:topicId:partition.", None
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, None
    cfg = coordinator_for(ctx.broker).config
    n = cfg.share_coordinator_state_topic_num_partitions
    if not await ctx.broker.admin_manager.ensure_internal_topic(
            SHARE_STATE_TOPIC, n, share_state_topic_configs(cfg),
            cfg.share_coordinator_state_topic_replication_factor):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
    return ErrorCode.NONE, None, TopicPartition(SHARE_STATE_TOPIC, state_partition_for(*parsed, n))


async def _lookup(ctx: RequestContext, key: str, key_type: int) -> Lookup:
    if key_type == TRANSACTION_KEY_TYPE:
        return await _lookup_txn(ctx, key)
    if key_type == SHARE_KEY_TYPE:
        return await _lookup_share(ctx, key)
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}.", None
    if not key:
        return ErrorCode.INVALID_REQUEST, "The group id must not be empty.", None
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, None
    coord = coordinator_for(ctx.broker)
    if not coord.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
    store = coord.manager.store
    partitions = coord.manager.config.offsets_topic_num_partitions
    if isinstance(store, LogOffsetsStore) and not await \
            ctx.broker.admin_manager.ensure_internal_topic(
                OFFSETS_TOPIC, partitions, offsets_topic_configs(store.config),
                int(ctx.broker.config.values["offsets.topic.replication.factor"])):
        # being created by another request
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None
    return ErrorCode.NONE, None, TopicPartition(OFFSETS_TOPIC, coord.manager.partition_for(key))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.api_version >= 4:
        ccls = nested(cls, "coordinators")
        out = []
        for key in request.coordinator_keys:
            err, msg, (node, host, port) = await _find(ctx, key, key_type)
            out.append(make(ccls, key=key, node_id=node, host=host, port=port,
                            error_code=err, error_message=msg))
        return make(cls, throttle_time=0, coordinators=tuple(out))
    err, msg, (node, host, port) = await _find(ctx, request.key, key_type)
    return make(cls, throttle_time=0, error_code=err, error_message=msg,
                node_id=node, host=host, port=port)
