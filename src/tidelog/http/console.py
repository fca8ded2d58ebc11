"""The web console's read-only pages (server-rendered: Jinja templates, SVG pictures)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from aiohttp import web

from tidelog.records import iter_batches
from tidelog.util.topic_partition import TopicPartition

from . import state
from .acl import authorize_read
from .group_views import SHARE, group_views, share_partition_views
from .svg import line_chart, segment_picture

if TYPE_CHECKING:
    from tidelog.server.broker import Broker
    from tidelog.server.metadata.store import TopicInfo
    from tidelog.storage.log import Log

    from .lag import LagHistory
    from .throughput import ThroughputHistory

MAX_BROWSE = 500
READ_BYTES = 1 << 20
TOPIC_KEYS = (
    "cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
    "min.cleanable.dirty.ratio", "delete.retention.ms", "max.message.bytes",
    "compression.type", "message.timestamp.type", "min.insync.replicas",
)  # fmt: skip


class TopicRow(TypedDict):
    name: str
    partitions: int
    size: int
    messages: int
    cleanup_policy: str
    retention_ms: int
    retention_bytes: int
    bytes_in: NotRequired[float]  # the overview's rates
    bytes_out: NotRequired[float]


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        raise web.HTTPBadRequest(text=f"not a number: {value!r}") from None


class ConsoleHost(Protocol):
    """What the console's pages use of the HTTP listener."""

    @property
    def broker(self) -> Broker: ...

    @property
    def urls(self) -> list[str]: ...

    @property
    def lag_history(self) -> LagHistory: ...

    @property
    def throughput(self) -> ThroughputHistory: ...

    def render(self, name: str, title: str, **ctx: object) -> web.Response: ...


class Console:
    """Page handlers; ``render`` is the listener's (template + common context)."""

    def __init__(self, listener: ConsoleHost) -> None:
        self.listener = listener
        self.broker = listener.broker

    def render(self, name: str, title: str, **ctx: object) -> web.Response:
        return self.listener.render(name, title, **ctx)

    # -- overview -----------------------------------------------------------------------------
    async def overview(self, request: web.Request) -> web.Response:
        b = self.broker
        rm = b.replica_manager
        offline = state.offline_log_dirs(b)
        throughput = self.listener.throughput
        throughput.sample()
        rates = throughput.topic_rates()
        topics = self._topic_rows()
        for row in topics:
            row["bytes_in"], row["bytes_out"] = rates.get(row["name"], (0.0, 0.0))
        listeners = [(b.config.listener.name, f"{b.advertised_host}:{b.advertised_port}")]
        listeners += [(f"HTTP {i}", u) for i, u in enumerate(self.listener.urls)]
        chart = line_chart(throughput.series(), chart_id="throughput-chart",
                           window_ms=throughput.history_ms, per_second=True)  # fmt: skip
        return self.render(
            "overview", "Overview", node_id=b.node_id, cluster_id=rm.cluster_id,
            topics=len(topics), partitions=sum(t["partitions"] for t in topics),
            size=sum(t["size"] for t in topics), groups=len(group_views(b)),
            connections=len(b.connections), listeners=listeners, ready=state.readiness(b),
            log_dirs=_log_dirs(b, offline), topic_rows=topics, group_rows=self._group_rows(),
            throughput_chart=chart, cluster=_cluster(b),
        )  # fmt: skip

    # -- topics -------------------------------------------------------------------------------
    async def topics(self, request: web.Request, **extra: object) -> web.Response:
        return self.render("topics", "Topics", topics=self._topic_rows(), **extra)

    def _topic_rows(self) -> list[TopicRow]:
        rm = self.broker.replica_manager
        logs = rm.logs
        rows: list[TopicRow] = []
        for info in sorted(rm.topics(), key=lambda i: i.name):
            cfg = rm.topic_config(info.name)
            parts = [logs.get_log(TopicPartition(info.name, p)) for p in range(info.partitions)]
            live = [lg for lg in parts if lg is not None]
            rows.append({
                "name": info.name, "partitions": info.partitions,
                "size": sum(lg.size_in_bytes for lg in live),
                "messages": sum(lg.high_watermark - lg.log_start_offset for lg in live),
                "cleanup_policy": ",".join(cfg.cleanup_policy),
                "retention_ms": cfg.retention_ms, "retention_bytes": cfg.retention_bytes,
            })  # fmt: skip
        return rows

    def _topic_or_404(self, name: str) -> TopicInfo:
        info = self.broker.replica_manager.topic(name)
        if info is None:
            raise web.HTTPNotFound(text=f"no topic {name!r}")
        return info

    async def topic(self, request: web.Request, **extra: object) -> web.Response:
        name = request.match_info["topic"]
        info = self._topic_or_404(name)
        views, offline = [], []
        offline_tps = state.offline_partitions(self.broker)
        for p in range(info.partitions):
            tp = TopicPartition(name, p)
            v = state.partition_view(self.broker, tp)
            if v is not None:
                views.append(v)
            elif tp in offline_tps:
                offline.append(p)
        cfg = self.broker.replica_manager.topic_config(name)
        overrides = dict(info.configs)
        configs = [(k, overrides[k], "topic") for k in sorted(overrides)]
        defaults = cfg.to_props()
        for k in TOPIC_KEYS:
            if k not in overrides:
                v = defaults.get(k)
                if v is not None:
                    configs.append((k, ",".join(v) if isinstance(v, list) else v, "default"))
        return self.render("topic", f"Topic {name}", topic=name, partitions=views,
                           offline=offline, configs=configs, **extra)  # fmt: skip

    def _partition(self, request: web.Request) -> tuple[TopicPartition, Log]:
        name = request.match_info["topic"]
        self._topic_or_404(name)
        tp = TopicPartition(name, _int(request.match_info["partition"], 0))
        lg = state.log_manager(self.broker).get_log(tp)
        if lg is None:
            raise web.HTTPNotFound(text=f"partition {tp} is not here (or its log dir is offline)")
        return tp, lg

    async def partition(self, request: web.Request) -> web.Response:
        tp, _ = self._partition(request)
        p = state.partition_view(self.broker, tp, with_segments=True)
        assert p is not None
        marks = {
            "log start": p.log_start_offset,
            "cleaner point": p.first_dirty_offset,
            "LSO": p.last_stable_offset,
            "HW": p.high_watermark,
            "LEO": p.log_end_offset,
        }
        return self.render("partition", f"Partition {tp}", p=p,
                           picture=segment_picture(p.segments, marks))  # fmt: skip

    async def messages(self, request: web.Request) -> web.Response:
        tp, lg = self._partition(request)
        # Record contents: with an authorizer, the HTTP client must be allowed to READ the
        # topic as User:ANONYMOUS (the console has no login), as a consumer would.
        authorize_read(self.broker, request, tp.topic)
        q = request.query
        fmt = q.get("format", "text") if q.get("format") in ("text", "json", "hex") else "text"
        limit = min(max(_int(q.get("limit"), 20), 1), MAX_BROWSE)
        timestamp = q.get("timestamp") or None
        offset = _int(q.get("offset"), lg.log_start_offset)
        if timestamp is not None:
            found = lg.fetch_offset_by_timestamp(_int(timestamp, 0))
            offset = found.offset if found is not None else lg.high_watermark
        offset = max(offset, lg.log_start_offset)
        records, next_offset = read_records(lg, offset, limit, fmt)
        p = state.partition_view(self.broker, tp)
        return self.render("messages", f"Messages of {tp}", p=p, records=records, fmt=fmt,
                           offset=offset, timestamp=timestamp, limit=limit,
                           next_offset=next_offset)  # fmt: skip

    # -- groups -------------------------------------------------------------------------------
    async def groups(self, request: web.Request) -> web.Response:
        return self.render("groups", "Groups", groups=self._group_rows())

    def _group_rows(self) -> list[dict[str, object]]:
        """Every group of every type (classic, consumer, share), with its committed lag."""
        lags: dict[str, int] = {}
        for pl in state.group_lags(self.broker, time_lag=False):
            lags[pl.group] = lags.get(pl.group, 0) + pl.lag
        in_flight: dict[str, int] = {}
        for sp in share_partition_views(self.broker):
            in_flight[sp.group_id] = in_flight.get(sp.group_id, 0) + sp.in_flight
        return [
            {"id": v.group_id, "type": v.type, "state": v.state, "protocol": v.protocol,
             "members": len(v.members), "lag": lags.get(v.group_id, 0),
             "in_flight": in_flight.get(v.group_id)}
            for v in group_views(self.broker)
        ]  # fmt: skip

    async def group(self, request: web.Request, **extra: object) -> web.Response:
        gid = request.match_info["group"]
        view = next((v for v in group_views(self.broker) if v.group_id == gid), None)
        if view is None:
            raise web.HTTPNotFound(text=f"no group {gid!r}")
        chart = ""
        if view.type != SHARE:
            history = self.listener.lag_history
            history.sample()
            chart = line_chart(history.series(gid), window_ms=history.history_ms)
        members = [
            {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
             "partitions": len(m.partitions), "assignment": m.assignment}
            for m in view.members
        ]  # fmt: skip
        return self.render("group", f"Group {gid}", group_id=gid, type=view.type,
                           state=view.state, protocol=view.protocol, generation=view.epoch,
                           members=members, lags=state.group_lags(self.broker, gid),
                           share_partitions=share_partition_views(self.broker, gid),
                           chart=chart, **extra)  # fmt: skip

    # -- cleaner ------------------------------------------------------------------------------
    async def cleaner(self, request: web.Request) -> web.Response:
        c = state.cleaner(self.broker)
        if c is None:
            return self.render("cleaner", "Log cleaner", enabled=False)
        m = c.manager
        checkpoints = m.all_cleaner_checkpoints()
        rows = []
        empty = 0
        for tp, lg in state.iter_logs(self.broker):
            if not lg.config.compact:
                continue
            if lg.size_in_bytes == 0:
                empty += 1
                continue
            s = c.last_stats.get(tp)
            st = m.state_of(tp)
            first_dirty = checkpoints.get(tp, lg.log_start_offset)
            rows.append({
                "topic": tp.topic, "partition": tp.partition, "first_dirty": first_dirty,
                "dirty": f"{100 * state.dirty_ratio(tp, lg, first_dirty):.1f} %",
                "leo": lg.log_end_offset, "size": lg.size_in_bytes,
                "state": str(st) if st is not None else "idle",
                "last": (f"{s.bytes_read} → {s.bytes_written} B in "
                         f"{s.elapsed_secs:.3f} s") if s else "",
                "buffer": f"{100 * s.buffer_utilization:.1f} %" if s else "",
            })  # fmt: skip
        uncleanable = sorted(str(tp) for tps in dict(m.uncleanable).values() for tp in tps)
        now = self.broker.clock.milliseconds()
        since = f"{(now - m.time_of_last_run) / 1000:.0f} s ago" if m.time_of_last_run else "never"
        return self.render("cleaner", "Log cleaner", enabled=True, rows=rows,
                           dirty=m.dirtiest_log_cleanable_ratio, since=since,
                           uncleanable=uncleanable, empty=empty)  # fmt: skip


def show(data: bytes | None, fmt: str) -> str:
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def read_records(lg: Log, offset: int, limit: int, fmt: str
                 ) -> tuple[list[dict[str, object]], int | None]:
    """Up to ``limit`` records from ``offset`` below the HW (control records skipped)."""
    out: list[dict[str, object]] = []
    last_offset = -1
    pos = offset
    hw = lg.high_watermark
    while len(out) < limit and pos < hw:
        info = lg.read(pos, READ_BYTES, min_one_message=True)
        data = info.records.read() if info.records is not None else b""
        if not data:
            break
        next_pos = pos
        for batch in iter_batches(data, 0, len(data)):
            next_pos = max(next_pos, batch.next_offset)
            if batch.is_control:
                continue
            for r in batch.iter_records():
                if r.offset < pos or r.offset >= hw or len(out) >= limit:
                    continue
                last_offset = r.offset
                out.append({
                    "offset": r.offset, "timestamp": r.timestamp, "key": show(r.key, fmt),
                    "value": show(r.value, fmt),
                    "headers": [(k, show(v, fmt)) for k, v in r.headers],
                })  # fmt: skip
        if next_pos <= pos:
            break
        pos = next_pos
    last = last_offset + 1 if out else None
    return out, (last if last is not None and last < hw else None)


def _log_dirs(broker: Broker, offline: dict[str, str]) -> list[dict[str, object]]:
    """Each log dir: offline reason, free space and floor (None where not measured)."""
    spaces = {str(d.path): d for d in state.free_space(broker)}
    rows: list[dict[str, object]] = []
    for path in state.all_log_dirs(broker):
        d = spaces.get(path)
        rows.append({"path": path, "offline": offline.get(path),
                     "free": d.free if d else None, "floor": d.floor if d else None,
                     "below_floor": bool(d and d.below_floor)})  # fmt: skip
    return rows


def _cluster(broker: Broker) -> dict[str, object]:
    """Brokers, controller, under-replicated and offline partitions: from the metadata image
    in a cluster, this broker alone otherwise."""
    if broker.cluster is None:
        return {"brokers": [broker.node_id], "controller": broker.node_id,
                "under_replicated": 0, "offline": len(state.offline_partitions(broker))}
    image = broker.replica_manager.metadata_cache.image
    parts = [p for t in image.topics.values() for p in t.partitions.values()]
    return {
        "brokers": image.live_broker_ids(),
        "controller": image.controller_id if image.controller_id >= 0 else "none known",
        "under_replicated": sum(1 for p in parts if p.leader >= 0 and len(p.isr) < len(p.replicas)),
        "offline": sum(1 for p in parts if p.leader < 0),
    }
