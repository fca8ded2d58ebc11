"""What handing a produce append to the log dir's writer thread costs, in-process: the same
1 MB batch of 1 KiB records appended on the event loop (``Log.append_as_leader``) and handed
to an ``AppendWriter`` (``Log.append_as_leader_async``, its completion moved to the loop with
``call_soon_threadsafe`` as the broker does), alternating, with the loop busy ``work`` µs of
Python per request (what parsing and validating the next requests costs) and up to 4 appends
in flight. Printed: CPU per append (both threads), the writer's wake-ups per append (how many
found its queue empty) and how long a completion takes to reach the loop after the write.
The switch interval is the broker's (server/gil.py).

    .venv/bin/python bench/append_handover.py [--appends 300] [--work 0,500,1500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType
from tidelog.records.builder import build_batch
from tidelog.server.gil import SWITCH_INTERVAL_S
from tidelog.storage.log import Log
from tidelog.storage.log_writes import AppendWriter
from tidelog.util.clock import SYSTEM_CLOCK

IN_FLIGHT = 4


class CountingWriter(AppendWriter):
    """An AppendWriter counting its tasks and the times it found its queue empty."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.wakeups = 0
        self.tasks = 0

    def _run(self) -> None:
        q = self._queue
        while True:
            if q.empty():
                self.wakeups += 1
            task = q.get()
            if task is None:
                return
            self.tasks += 1
            task()


def busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


async def run(records: bytes, count: int, handed: bool, work_us: float) -> str:
    d = Path(tempfile.mkdtemp(prefix="append-handover-", dir=os.environ.get("BENCH_DIR")))
    lg = Log.open(d / "t-0", LogConfig.from_props({}), clock=SYSTEM_CLOCK)
    w = CountingWriter("bench")
    loop = asyncio.get_running_loop()
    lg.append_as_leader(records, 0)
    back: list[float] = []
    in_flight: list[asyncio.Future[BaseException | None]] = []

    def completed(fut: asyncio.Future[BaseException | None], t: float,
                  error: BaseException | None) -> None:
        back.append(time.perf_counter() - t)
        fut.set_result(error)

    cpu0 = time.process_time()
    for _ in range(count):
        busy(work_us)
        if not handed:
            lg.append_as_leader(records, 0, defer_flush=True)
            continue
        fut: asyncio.Future[BaseException | None] = loop.create_future()

        def done(error: BaseException | None, fut: asyncio.Future[BaseException | None] = fut
                 ) -> None:
            loop.call_soon_threadsafe(completed, fut, time.perf_counter(), error)

        lg.append_as_leader_async(records, 0, w, done, inline_below=0)
        in_flight.append(fut)
        if len(in_flight) >= IN_FLIGHT:
            await in_flight.pop(0)
        else:
            await asyncio.sleep(0)
    for f in in_flight:
        await f
    cpu = (time.process_time() - cpu0) / count * 1e3
    w.stop()
    lg.close()
    shutil.rmtree(d)
    line = f"  {'writer thread' if handed else 'on the loop':<13} CPU {cpu:.2f} ms/append"
    if handed:
        back.sort()
        line += (f", writer wake-ups/append {w.wakeups / max(1, w.tasks):.2f}, completion on "
                 f"the loop after the write: median {statistics.median(back) * 1e3:.1f} ms, "
                 f"p90 {back[int(len(back) * 0.9)] * 1e3:.1f} ms")
    return line


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=300)
    ap.add_argument("--work", default="0,500,1500", help="µs of Python per request")
    args = ap.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    value = os.urandom(1000)
    records = build_batch([(1_700_000_000_000, None, value) for _ in range(970)],
                          CompressionType.NONE)
    print(f"batches of {len(records):,} B (970 records of 1,000 B), {args.appends} appends "
          f"per run, up to {IN_FLIGHT} in flight; load average {os.getloadavg()[0]:.2f}")
    for work in (float(w) for w in args.work.split(",")):
        print(f" loop busy {work:.0f} µs per request:")
        for handed in (False, True, False, True):
            print(await run(records, args.appends, handed, work), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
