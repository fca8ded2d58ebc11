"""The console's admin actions, only with ``http.console.admin.enable=true``: create a topic,
alter a topic config, reset a group's offsets (dry run first). Each goes through the same
broker calls as its Kafka API and, when an authorizer is configured, asks it as Kafka's
handler would, for ``User:ANONYMOUS`` at the HTTP client's address (the console has no
login of its own, so ACLs must grant the anonymous user explicitly)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web
from multidict import MultiDictProxy

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.wiring import replicated
from tidelog.server.errors import ApiError
from tidelog.server.metadata.admin import NewTopic
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.util.topic_partition import TopicPartition

from . import state
from .acl import allowed, authorize

if TYPE_CHECKING:
    from tidelog.server.broker import Broker
    from tidelog.server.coordinator.group.group import GroupMetadata

    from .console import Console


class AdminHost(Protocol):
    """What the admin actions use of the HTTP listener."""

    @property
    def broker(self) -> Broker: ...

    @property
    def console(self) -> Console: ...

    async def admin_form(self, request: web.Request
                         ) -> MultiDictProxy[str | bytes | bytearray | web.FileField]: ...


def _configs(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in text.replace("\n", ",").split(","))):
        if "=" not in item:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


async def create_topic(listener: AdminHost, request: web.Request) -> web.Response:
    form = await listener.admin_form(request)
    name = str(form.get("name", "")).strip()
    # Kafka: CREATE on the cluster, else CREATE on the topic
    if not allowed(listener.broker, request, AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster"):
        authorize(listener.broker, request, AclOperation.CREATE, ResourceType.TOPIC, name)
    try:
        partitions = int(str(form.get("partitions", "1")) or 1)
        # off the loop, as CreateTopics does: a topic of many partitions opens many files
        await listener.broker.admin_manager.create_topic(
            NewTopic(name, partitions, configs=_configs(str(form.get("configs", "")))))
    except (ApiError, ValueError) as exc:
        return await listener.console.topics(request, message=f"not created: {exc}", error=True)
    raise web.HTTPSeeOther(f"/topics/{name}")


async def alter_config(listener: AdminHost, request: web.Request) -> web.Response:
    form = await listener.admin_form(request)
    name = request.match_info["topic"]
    authorize(listener.broker, request, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name)
    rm = listener.broker.replica_manager
    info = rm.topic(name)
    if info is None:
        raise web.HTTPNotFound(text=f"no topic {name!r}")
    key = str(form.get("key", "")).strip()
    value = str(form.get("value", "")).strip()
    configs = dict(info.configs)
    if value:  # IncrementalAlterConfigs SET / DELETE of one key
        configs[key] = value
    else:
        configs.pop(key, None)
    try:
        rm.set_topic_configs(name, configs)
    except ApiError as exc:
        return await listener.console.topic(request, message=f"not changed: {exc}", error=True)
    raise web.HTTPSeeOther(f"/topics/{name}")


def reset_plan(broker: Broker, group: GroupMetadata, topic: str, to: str, value: str
               ) -> list[tuple[str, int, int]]:
    """(partition, current committed, new offset) per partition of ``topic``, like
    kafka-consumer-groups --reset-offsets --dry-run."""
    rm = broker.replica_manager
    info = rm.topic(topic)
    if info is None:
        raise ValueError(f"no topic {topic!r}")
    plan = []
    for p in range(info.partitions):
        tp = TopicPartition(topic, p)
        lg = rm.logs.get_log(tp)
        if lg is None:
            continue
        cur = group.offsets.get(tp)
        current = int(cur.offset) if cur is not None else -1
        if to == "earliest":
            new = int(lg.log_start_offset)
        elif to == "latest":
            new = int(lg.high_watermark)
        elif to == "timestamp":
            found = lg.fetch_offset_by_timestamp(int(value))
            new = int(found.offset) if found is not None else int(lg.high_watermark)
        else:  # an explicit offset, clamped into the log like Kafka's tool does
            new = min(max(int(value), int(lg.log_start_offset)), int(lg.high_watermark))
        plan.append((str(tp), current, new))
    return plan


async def reset_offsets(listener: AdminHost, request: web.Request) -> web.Response:
    form = await listener.admin_form(request)
    gid = request.match_info["group"]
    topic = str(form.get("topic", "")).strip()
    authorize(listener.broker, request, AclOperation.READ, ResourceType.GROUP, gid)
    authorize(listener.broker, request, AclOperation.READ, ResourceType.TOPIC, topic)
    broker = listener.broker
    group = state.groups(broker).get(gid)
    if group is None:
        raise web.HTTPNotFound(text=f"no group {gid!r}")
    try:
        plan = reset_plan(broker, group, topic, str(form.get("to", "earliest")),
                          str(form.get("value", "0") or "0"))  # fmt: skip
    except ValueError as exc:
        return await listener.console.group(request, message=f"no plan: {exc}", error=True)
    if form.get("dry_run"):
        return await listener.console.group(request, plan=plan, message="dry run: nothing changed")
    if group.members:  # Kafka's tool refuses too: members would overwrite the reset
        return await listener.console.group(
            request, plan=plan, error=True,
            message=f"group {gid} has {len(group.members)} active members: stop them first")
    from tidelog.server.coordinator.group.offsets import CommitEntry

    entries = {TopicPartition(topic, int(tp.rsplit("-", 1)[1])): CommitEntry(new)
               for tp, _, new in plan}  # fmt: skip
    coord = state.coordinator(broker)
    assert coord is not None  # the group was found in it
    errors = coord.commit_offsets(gid, entries)
    if any(e == 0 for e in errors.values()):  # in a cluster: in the cache once replicated
        error = await replicated(coord, gid)
        errors = {tp: error if e == 0 else e for tp, e in errors.items()}
    failed = {str(tp): e.name for tp, e in errors.items() if e}
    msg = f"failed: {failed}" if failed else f"reset {len(entries)} partitions of {topic}"
    return await listener.console.group(request, plan=plan, message=msg, error=bool(failed))
