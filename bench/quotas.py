"""Client quota enforcement: the rate a confluent-kafka producer / consumer reaches when it is
over its producer_byte_rate / consumer_byte_rate quota, against the quota, and the rate of an
unthrottled client in the same run (the baseline: what the quota takes away); and for
request_percentage, the handler time a client sending Metadata requests back to back gets
(as a percentage of one thread, the rate Kafka's ClientRequestQuotaManager samples) against its
quota, its request rate against another client's, and that other client's request rate before
any request quota existed; and, in process, the cost per request of timing a handler once a
request quota exists (a trivial handler run as a task, directly vs through the wrapper).

An in-process broker with Kafka's rate sampling at 11 windows of WINDOW_MS (Kafka's are
11 x 1 s; shorter windows let a run settle in seconds); one warm-up second per client, then
MEASURE_S seconds measured; REPEATS runs, printed as min / median / max.

Run: .venv/bin/python bench/quotas.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "server"))

import test_client_quotas as t
import test_request_quotas as rq

from tidelog.server.quota import ClientQuotaManager, ClientQuotaStore, QuotaType
from tidelog.server.quota.store import entity
from tidelog.testing import EmbeddedBroker

WINDOW_MS = 100
MEASURE_S = 5.0
REPEATS = 3
PRODUCE_QUOTA = 200_000.0
FETCH_QUOTA = 300_000.0
REQUEST_QUOTA = 1.0  # percent of one thread


def one_run() -> tuple[float, float, float, float]:
    import confluent_kafka as ck

    with tempfile.TemporaryDirectory() as d, EmbeddedBroker({"log.dirs": d}) as b:
        store = ClientQuotaStore(Path(d))
        b.broker.client_quotas = ClientQuotaManager(store, window_num=11,
                                                    window_size_ms=WINDOW_MS)
        store.alter([(entity([("client-id", "slow")]), {"producer_byte_rate": PRODUCE_QUOTA}),
                     (entity([("client-id", "slowc")]), {"consumer_byte_rate": FETCH_QUOTA})])
        slow_p = t._produce_for(b.bootstrap_servers, "slow", MEASURE_S)
        free_p = t._produce_for(b.bootstrap_servers, "free", 2.0)
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 20,
                         "batch.size": 16384})
        for _ in range(20_000):
            while True:
                try:
                    p.produce("quota-c", b"y" * 1000)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
        p.flush(60)
        slow_c = t._consume_for(b.bootstrap_servers, "slowc", MEASURE_S)
        free_c = t._consume_for(b.bootstrap_servers, "freec", 0.5, warm=0.0)
        return slow_p, free_p, slow_c, free_c


def request_run() -> tuple[float, float, float, float]:
    """(throttled client's handler %, its requests/s, another client's requests/s, that
    client's requests/s before any request quota existed)."""
    with tempfile.TemporaryDirectory() as d, EmbeddedBroker({"log.dirs": d}) as b:
        store = ClientQuotaStore(Path(d))
        mgr = ClientQuotaManager(store, window_num=11, window_size_ms=WINDOW_MS)
        b.broker.client_quotas = mgr
        greedy, other = rq._Client(b, "greedy"), rq._Client(b, "other")
        try:
            other.run(0.5)  # warm-up
            before, _ = other.run(2.0)
            store.alter([(entity([("client-id", "greedy")]),
                          {"request_percentage": REQUEST_QUOTA})])
            greedy.run(1.0)  # warm-up: past the first windows
            start = int(b.broker.clock.milliseconds())
            greedy_n, _ = greedy.run(MEASURE_S)
            rate = mgr._rates[(QuotaType.REQUEST, ("", "greedy"))]
            percent = rate.per_second(start + int(MEASURE_S * 1000), WINDOW_MS, 11)
            other_n, _ = other.run(2.0)
        finally:
            greedy.close()
            other.close()
        return percent, greedy_n / MEASURE_S, other_n / 2.0, before / 2.0


def wrap_cost(n: int = 100_000) -> tuple[float, float, float]:
    """ns per request run as a task for a handler that does nothing: with no request quota,
    for a client without one while another client has one, and for a client with one (its
    handler time recorded, the rate and throttle computed on every request)."""
    import asyncio
    import time
    from types import SimpleNamespace

    from tidelog.server.quota import request as request_quota
    from tidelog.util.clock import SYSTEM_CLOCK

    with tempfile.TemporaryDirectory() as d:
        store = ClientQuotaStore(Path(d))
        store.alter([(entity([("client-id", "q")]), {"request_percentage": 100.0})])
        broker = SimpleNamespace(client_quotas=ClientQuotaManager(store), clock=SYSTEM_CLOCK)

        def ctx(client_id: str) -> SimpleNamespace:
            return SimpleNamespace(header=SimpleNamespace(api_key=3), broker=broker,
                                   principal=SimpleNamespace(name="u"), client_id=client_id,
                                   throttle_ms=0)

        async def handler(_ctx: object, _req: object) -> int:
            return 0

        async def run(c: SimpleNamespace | None) -> float:
            start = time.perf_counter_ns()
            for _ in range(n):
                h = handler if c is None else request_quota.wrap(c, handler)
                await asyncio.ensure_future(h(c, None))
            return (time.perf_counter_ns() - start) / n

        return tuple(  # type: ignore[return-value]
            min(asyncio.run(run(c)) for _ in range(3)) for c in (None, ctx("c"), ctx("q")))


def _spread(values: list[float]) -> str:
    v = sorted(values)
    return f"min {v[0]:9.1f}  median {statistics.median(v):9.1f}  max {v[-1]:9.1f}"


def main() -> None:
    reqs = [request_run() for _ in range(REPEATS)]
    print(f"request quota {REQUEST_QUOTA}% of a thread, Metadata requests back to back:")
    print(f"  throttled client handler %   {_spread([r[0] for r in reqs])}"
          f"  median/quota {statistics.median(r[0] for r in reqs) / REQUEST_QUOTA:.3f}")
    print(f"  throttled client requests/s  {_spread([r[1] for r in reqs])}")
    print(f"  other client requests/s      {_spread([r[2] for r in reqs])}")
    print(f"  other, no request quota      {_spread([r[3] for r in reqs])}"
          f"  timed/untimed median {statistics.median(r[2] / r[3] for r in reqs):.3f}")
    costs = [wrap_cost() for _ in range(REPEATS)]
    print("an empty handler run as a task, ns per request (best of 3 x 100k per run):")
    for i, label in enumerate(("no request quota", "client without one", "client with one")):
        print(f"  {label:27s}  {_spread([c[i] for c in costs])}")
    runs = [one_run() for _ in range(REPEATS)]
    for i, (label, quota) in enumerate([("producer over quota", PRODUCE_QUOTA),
                                        ("producer unthrottled", None),
                                        ("consumer over quota", FETCH_QUOTA),
                                        ("consumer unthrottled", None)]):
        values = sorted(r[i] for r in runs)
        line = (f"{label:22s} min {values[0] / 1e3:9.1f} KB/s  median "
                f"{statistics.median(values) / 1e3:9.1f}  max {values[-1] / 1e3:9.1f}")
        if quota:
            line += (f"  quota {quota / 1e3:.0f} KB/s, median/quota "
                     f"{statistics.median(values) / quota:.3f}")
        print(line)


if __name__ == "__main__":
    main()
