"""One quota manager per broker, built by ``Broker.start`` (its store in the broker's first log
dir, read before serving: made on first use, a produce after its disk failed would crash on the
read instead of answering KAFKA_STORAGE_ERROR); the handlers and the produce/fetch paths reach
it through ``quota_manager(broker)``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from tidelog.config.broker_config import BrokerConfig

from .manager import ClientQuotaManager, QuotaType
from .request import request_throttle
from .store import ClientQuotaStore

if TYPE_CHECKING:
    from ..context import RequestContext


def has_quota(ctx: RequestContext, qtype: QuotaType) -> bool:
    mgr = quota_manager(ctx.broker)
    if not mgr.store.entries:  # the common case: no quotas at all (one check per request)
        return False
    bound, _ = mgr.quota(qtype, ctx.principal.name, ctx.client_id or "")
    return bound != float("inf")


async def wait_until_unmuted(ctx: RequestContext) -> None:
    """Kafka reads a throttled channel's next request only once its mute ends; requests
    already read here (pipelined) wait for it instead, one at a time (the caller chains a
    connection's requests while it has a quota)."""
    state = ctx.connection_state
    until = state.throttled_until
    if until is None:
        return
    delay = until - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)
    if state.throttled_until == until:
        state.throttled_until = None


def new_quota_manager(config: BrokerConfig, store: ClientQuotaStore | None = None) -> ClientQuotaManager:
    """With ``store`` None, the quotas live in the first log dir (a ZooKeeper cluster
    passes its store: zk/quotas.py)."""
    if store is None:
        store = ClientQuotaStore(config.log_dirs[0])
    values = config.values  # read-only in Kafka too (QuotaConfig)
    return ClientQuotaManager(
        store, window_num=int(values["quota.window.num"]),
        window_size_ms=int(values["quota.window.size.seconds"]) * 1000)


class HasClientQuotas(Protocol):
    """What ``quota_manager`` reads (the broker)."""

    @property
    def client_quotas(self) -> ClientQuotaManager | None: ...


def quota_manager(broker: HasClientQuotas) -> ClientQuotaManager:
    manager = broker.client_quotas
    if manager is None:
        raise RuntimeError("the broker has not started: no quota manager yet")
    return manager


def throttle_fetch(ctx: RequestContext, nbytes: int) -> int:
    """consumer_byte_rate: over quota, the response is sent empty (its bytes taken back) with
    the throttle time, and the connection muted, as Kafka's handleFetchRequest does."""
    ms = throttle(ctx, QuotaType.FETCH, nbytes)
    if ms > 0:
        now_ms = int(ctx.broker.clock.milliseconds())
        quota_manager(ctx.broker).unrecord(
            QuotaType.FETCH, ctx.principal.name, ctx.client_id or "", nbytes, now_ms)
        # fetches are not chained: the mute alone holds them
        ctx.connection_state.throttled_until = None
    return ms


def throttle(ctx: RequestContext, qtype: QuotaType, nbytes: int) -> int:
    """Record a request's bytes against its client's quota; the throttle time, also set on
    the context so the connection mutes itself for as long once it has answered."""
    mgr = quota_manager(ctx.broker)
    if not mgr.store.entries:  # no quota at all: nothing recorded, no throttle (a request
        return 0  # timer, of a request quota removed meanwhile, records once its handler ends)
    now_ms = int(ctx.broker.clock.milliseconds())
    ms = mgr.record(qtype, ctx.principal.name, ctx.client_id or "", nbytes, now_ms)
    if ms > 0:
        mute(ctx, ms)
        ctx.connection_state.throttled_until = asyncio.get_running_loop().time() + ms / 1000
    # the response carries the larger of the byte-rate and request-time throttles (Kafka's
    # handleProduceRequest); the mute lasts as long
    return max(ms, request_throttle(ctx))


def mute(ctx: RequestContext, ms: int) -> None:
    """The connection mutes itself for ``ms`` once it has answered (KIP-219)."""
    ctx.throttle_ms = max(getattr(ctx, "throttle_ms", 0), ms)
