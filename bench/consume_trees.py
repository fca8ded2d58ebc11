"""Consume throughput of tidelog trees side by side, and Tansu, alternating in one sitting:
whether a change of consume figures between sittings is the machine's load or the code.

Each tree is a ``src`` directory of a checkout (``git worktree add DIR COMMIT``, its native
core built there with ``setup.py build_ext --inplace``) served as ``tidelog serve`` with
that directory on PYTHONPATH. Each run starts every broker in turn (fresh log dir; the order
reversed every other run), produces the records with bench/broker.py's producer (acks=1,
linger.ms=5, one partition) and times bench/broker.py's consumer reading them back
(confluent-kafka, one partition from the beginning), taking the broker's CPU (utime+stime
from /proc, 10 ms ticks) over the consume. Printed per run, then per size: each tree's rate
and CPU per record against Tansu, and each pair of trees, median [min .. max] over the runs.

    .venv/bin/python bench/consume_trees.py --tree now=src --tree then=../old/src
        [--runs 4] [--sizes 100,1024] [--no-tansu]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as bb

COUNTS = {100: 200_000, 1024: 50_000}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def factory(name: str, trees: dict[str, str]) -> AbstractContextManager[tuple[str, int]]:
    if name == "tansu":
        return bb.tansu_broker()
    return bb.tidelog_broker(env={"PYTHONPATH": str(Path(trees[name]).resolve())})


def ratios(a: list[tuple[float, float]], b: list[tuple[float, float]], i: int) -> str:
    r = [x[i] / y[i] for x, y in zip(a, b, strict=True) if y[i]]
    if not r:
        return "-"
    return f"{statistics.median(r):.2f}x [{min(r):.2f} .. {max(r):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=SRC")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--no-tansu", action="store_true")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    sizes = {int(s): COUNTS.get(int(s), 50_000) for s in args.sizes.split(",")}
    names = list(trees) + ([] if args.no_tansu else ["tansu"])
    got: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for run in range(args.runs):
        for name in names if run % 2 == 0 else names[::-1]:
            with factory(name, trees) as (bootstrap, pid):
                for size, n in sizes.items():
                    topic = f"consume-{size}"
                    bb.produce(bootstrap, topic, n, size)
                    c0 = cpu_seconds(pid)
                    secs = bb.consume(bootstrap, topic, n + 1)
                    per = (cpu_seconds(pid) - c0) / (n + 1) * 1e6
                    got.setdefault((name, size), []).append(((n + 1) / secs, per))
                    print(f"run {run} {name:<8} {size:>5} B {(n + 1) / secs:>10,.0f} rec/s "
                          f"broker CPU {per:.2f} us/record, load {os.getloadavg()[0]:.1f}",
                          flush=True)
    for size in sizes:
        print(f"\n{size} B, rate and broker CPU per record, median [min .. max]:")
        if not args.no_tansu:
            for name in trees:
                print(f"  {name} / tansu: rate {ratios(got[(name, size)], got[('tansu', size)], 0)}"
                      f", CPU {ratios(got[(name, size)], got[('tansu', size)], 1)}")
        for a, b in itertools.combinations(trees, 2):
            print(f"  {a} / {b}: rate {ratios(got[(a, size)], got[(b, size)], 0)}")


if __name__ == "__main__":
    main()
