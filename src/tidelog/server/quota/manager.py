"""Kafka's ClientQuotaManager for the byte-rate quotas: each request's bytes are recorded in a
sampled rate (``quota.window.num`` windows of ``quota.window.size.seconds``, Kafka's 11 x 1 s);
when the rate is over the quota the client is throttled for
``(rate - quota) / quota * window`` ms (Kafka's QuotaUtils.throttleTime), at most the whole
window span. The response carries that throttle_time_ms and the connection is muted for as
long (KIP-219), so a client that ignores the field is slowed down all the same.

The quota applying to a (user, client-id) pair is found in Kafka's order, most specific first:
/users/U/clients/C, /users/U/clients/<default>, /users/U, /users/<default>/clients/C,
/users/<default>/clients/<default>, /users/<default>, /clients/C, /clients/<default>. Clients
matched by one entity share one rate only where the entity names them exactly; a default entity
gives each user / client-id its own rate (Kafka's metric tags).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .store import CLIENT_ID, USER, ClientQuotaStore, QuotaEntity


class QuotaType(enum.Enum):
    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"  # handler time, percent of one thread (request.py)


@dataclass(slots=True)
class _Rate:
    """Kafka's Rate over a SampledStat: (window start ms, total) samples."""

    samples: list[list[float]] = field(default_factory=list)

    def record(self, value: float, now_ms: int, window_ms: int, num: int) -> None:
        self.purge(now_ms, window_ms, num)
        if not self.samples or now_ms - self.samples[-1][0] >= window_ms:
            self.samples.append([now_ms, 0.0])
        self.samples[-1][1] += value

    def purge(self, now_ms: int, window_ms: int, num: int) -> None:
        horizon = now_ms - window_ms * num
        if self.samples and self.samples[0][0] <= horizon:  # rebuilt only when one expired
            self.samples = [s for s in self.samples if s[0] > horizon]

    def window_ms(self, now_ms: int, window_ms: int, num: int) -> float:
        elapsed = now_ms - self.samples[0][0] if self.samples else 0
        full = int(elapsed // window_ms)
        if full < num - 1:
            elapsed += (num - 1 - full) * window_ms
        return float(elapsed)

    def per_second(self, now_ms: int, window_ms: int, num: int) -> float:
        total = sum(s[1] for s in self.samples)
        return total / (self.window_ms(now_ms, window_ms, num) / 1000.0)


def _candidates(user: str, client_id: str) -> list[QuotaEntity]:
    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    return [
        (c, u), (dc, u), (u,),
        (c, du), (dc, du), (du,),
        (c,), (dc,),
    ]


_NONE: tuple[float, tuple[str, str]] = (float("inf"), ("", ""))
_RESOLVED_MAX = 10_000  # client ids remembered before the cache starts over


class ClientQuotaManager:
    def __init__(
        self, store: ClientQuotaStore, *, window_num: int = 11, window_size_ms: int = 1000
    ) -> None:
        self.store = store
        self.window_num = window_num
        self.window_ms = window_size_ms
        self._rates: dict[tuple[QuotaType, tuple[str, str]], _Rate] = {}
        # (type, user, client-id) -> quota, valid for one store version (the lookup walks
        # eight entities, and runs on every request of a client once request quotas exist)
        self._resolved: dict[tuple[QuotaType, str, str], tuple[float, tuple[str, str]]] = {}
        self._resolved_version = -1

    def quota(self, qtype: QuotaType, user: str, client_id: str) -> tuple[float, tuple[str, str]]:
        """(bytes/s or inf, the rate's key: the user and client-id the matching entity
        names, "" where it names none)."""
        store = self.store
        if not store.entries:  # the common case: no quotas at all
            return _NONE
        if self._resolved_version != store.version or len(self._resolved) > _RESOLVED_MAX:
            self._resolved.clear()
            self._resolved_version = store.version
        key = (qtype, user, client_id)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = self._resolve(qtype, user, client_id)
        return found

    def _resolve(self, qtype: QuotaType, user: str,
                 client_id: str) -> tuple[float, tuple[str, str]]:
        for ent in _candidates(user, client_id):
            value = self.store.get(ent).get(qtype.value)
            if value is not None:
                names = dict(ent)
                key = (user if USER in names else "", client_id if CLIENT_ID in names else "")
                return value, key
        return _NONE

    def unrecord(self, qtype: QuotaType, user: str, client_id: str, nbytes: int,
                 now_ms: int) -> None:
        """Take back bytes recorded for a response that is not sent (a throttled fetch is
        answered empty, Kafka's unrecordQuotaSensor)."""
        bound, key = self.quota(qtype, user, client_id)
        rate = self._rates.get((qtype, key))
        if bound != float("inf") and rate is not None:
            rate.record(-nbytes, now_ms, self.window_ms, self.window_num)

    def record(self, qtype: QuotaType, user: str, client_id: str, nbytes: float,
               now_ms: int) -> int:
        """Record ``nbytes`` (for REQUEST: percent-seconds of handler time) for this client;
        the throttle time in ms (0 within quota)."""
        bound, key = self.quota(qtype, user, client_id)
        if bound == float("inf"):
            return 0
        rate = self._rates.setdefault((qtype, key), _Rate())
        rate.record(nbytes, now_ms, self.window_ms, self.window_num)
        observed = rate.per_second(now_ms, self.window_ms, self.window_num)
        if observed <= bound:
            return 0
        window = rate.window_ms(now_ms, self.window_ms, self.window_num)
        throttle = (observed - bound) / bound * window
        # Kafka's ClientRequestQuotaManager caps its throttle at one window
        # (maxThrottleTimeMs); the byte-rate managers at the whole sampled span
        cap = self.window_ms if qtype is QuotaType.REQUEST else self.window_ms * self.window_num
        return int(min(throttle, cap))
