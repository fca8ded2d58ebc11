"""The answer to a request whose handler failed: Kafka's ``AbstractRequest.getErrorResponse``.

Kafka never drops a connection because handling one request went wrong: it answers with the
error in the top-level ``error_code`` where the response has one, and otherwise in every
per-item ``error_code``, the items mirroring the request (each partition of a Produce, each
topic of a CreateTopics, each group of a DescribeGroups...). The client then sees
UNKNOWN_SERVER_ERROR per item instead of a broken connection.

``MIRRORS`` says, per API, which request list each response list copies and which fields come
along; ``make`` drops the fields a version lacks, so one rule serves every version.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import has_field, make, nested

SELF = ""  # a copy rule's source meaning "the request item itself" (lists of names/ints)


@dataclasses.dataclass(frozen=True)
class Mirror:
    """Response list ``resp`` gets one item per element of request list ``req``."""

    resp: str
    req: str
    copy: tuple[tuple[str, str], ...] = ()  # (response field, request item field or SELF)
    child: Mirror | None = None


def _m(resp: str, req: str, child: Mirror | None = None, **copy: str) -> Mirror:
    return Mirror(resp, req, tuple(copy.items()), child)


# A failed item's offsets, timestamps, epochs and ids are -1, as Kafka's (INVALID_OFFSET...).
_INVALID = {
    name: -1
    for name in (
        "base_offset",
        "log_append_time",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "offset",
        "timestamp",
        "leader_epoch",
        "committed_offset",
        "committed_leader_epoch",
        "low_watermark",
        "node_id",
        "leader_id",
        "port",
    )
}

# Shapes several APIs share: topics with partition structs, topics with partition indexes,
# config resources.
_TOPIC_PARTITIONS = _m(
    "topics",
    "topics",
    _m("partitions", "partitions", partition_index="partition_index"),
    name="name",
)
_TOPIC_INDEXES = _m(
    "topics", "topics", _m("partitions", "partition_indexes", partition_index=SELF), name="name"
)


def _resources(resp: str) -> Mirror:
    return _m(resp, "resources", resource_type="resource_type", resource_name="resource_name")


MIRRORS: dict[int, tuple[Mirror, ...]] = {
    0: (
        _m(
            "responses",
            "topic_data",
            _m("partition_responses", "partition_data", index="index"),
            name="name",
            topic_id="topic_id",
        ),
    ),
    1: (
        _m(
            "responses",
            "topics",
            _m("partitions", "partitions", partition_index="partition"),
            topic="topic",
            topic_id="topic_id",
        ),
    ),
    2: (_TOPIC_PARTITIONS,),
    3: (_m("topics", "topics", name="name", topic_id="topic_id"),),
    8: (_TOPIC_PARTITIONS,),
    9: (_TOPIC_INDEXES, _m("groups", "groups", group_id="group_id")),
    10: (_m("coordinators", "coordinator_keys", key=SELF),),
    15: (_m("groups", "groups", group_id=SELF),),
    69: (_m("groups", "group_ids", group_id=SELF),),
    77: (_m("groups", "group_ids", group_id=SELF),),
    90: (_m("groups", "groups", group_id="group_id"),),
    19: (_m("topics", "topics", name="name"),),
    20: (
        _m("responses", "topics", name="name", topic_id="topic_id"),
        _m("responses", "topic_names", name=SELF),
    ),
    21: (_TOPIC_PARTITIONS,),
    30: (_m("results", "creations"),),
    31: (_m("filter_results", "filters"),),
    # one result per user; deletions and upsertions name users, upsertions mirrored here
    51: (_m("results", "upsertions", user="name"),),
    32: (_resources("results"),),
    33: (_resources("responses"),),
    37: (_m("results", "topics", name="name"),),
    42: (_m("results", "groups_names", group_id=SELF),),
    44: (_resources("responses"),),
    24: (
        _m(
            "results_by_topic_v3_and_below",
            "v3_and_below_topics",
            _m("results_by_partition", "partitions", partition_index=SELF),
            name="name",
        ),
        _m(
            "results_by_transaction",
            "transactions",
            _m(
                "topic_results",
                "topics",
                _m("results_by_partition", "partitions", partition_index=SELF),
                name="name",
            ),
            transactional_id="transactional_id",
        ),
    ),
    27: (_m("markers", "markers", _TOPIC_INDEXES, producer_id="producer_id"),),
    28: (_TOPIC_PARTITIONS,),
    23: (
        _m(
            "topics",
            "topics",
            _m("partitions", "partitions", partition="partition"),
            topic="topic",
        ),
    ),
    75: (_m("topics", "topics", name="name"),),
    # results are per topic, the request's topics are per dir: "dirs.topics" flattens
    34: (
        _m(
            "results",
            "dirs.topics",
            _m("partitions", "partitions", partition_index=SELF),
            topic_name="name",
        ),
    ),
    49: (
        _m(
            "entries",
            "entries",
            _m("entity", "entity", entity_type="entity_type", entity_name="entity_name"),
        ),
    ),
    43: (
        _m(
            "replica_election_results",
            "topic_partitions",
            _m("partition_result", "partitions", partition_id=SELF),
            topic="topic",
        ),
    ),
    61: (_TOPIC_INDEXES,),
    65: (_m("transaction_states", "transactional_ids", transactional_id=SELF),),
    # the share coordinator APIs (83-87): results per topic id, partitions per partition
    **dict.fromkeys(range(83, 88), (_m(
        "results", "topics", _m("partitions", "partitions", partition="partition"),
        topic_id="topic_id"),)),
}


def error_response(api_key: int, api_version: int, request: Any, error: ErrorCode) -> Any | None:
    """The response carrying ``error`` for ``request``; empty where the version has nowhere to
    put it (as Kafka's, e.g. DescribeLogDirs v1-2). None only for an unknown response class."""
    try:
        cls = response_class(api_key, api_version)
    except Exception:
        return None
    kw: dict[str, Any] = {}
    if has_field(cls, "error_code"):
        kw["error_code"] = error
    for rule in MIRRORS.get(api_key, ()):
        if has_field(cls, rule.resp) and getattr(request, rule.req.split(".")[0], None) is not None:
            kw[rule.resp] = _mirror(cls, request, rule, error)
    return make(cls, **kw)


def _items(request: Any, path: str) -> list[Any]:
    """The request list ``path`` names; ``a.b`` = every ``b`` of every ``a``, flattened."""
    items = [request]
    for name in path.split("."):
        items = [x for item in items for x in (getattr(item, name, None) or ())]
    return items


def _mirror(parent_cls: type, request: Any, rule: Mirror, error: ErrorCode) -> tuple[Any, ...]:
    item_cls = nested(parent_cls, rule.resp)
    items = []
    for src in _items(request, rule.req):
        kw: dict[str, Any] = {k: v for k, v in _INVALID.items() if has_field(item_cls, k)}
        for dst, field in rule.copy:
            value = src if field == SELF else getattr(src, field, None)
            if value is not None:
                kw[dst] = value
        for name in ("error_code", "partition_error_code"):  # AddPartitionsToTxn names it so
            if has_field(item_cls, name):
                kw[name] = error
        child = rule.child
        if child is not None and has_field(item_cls, child.resp):
            kw[child.resp] = _mirror(item_cls, src, child, error)
        items.append(make(item_cls, **kw))
    return tuple(items)
