"""Time from members joining to a stable consumer group, with 1, 10 and 50 members.

Two measurements:

* **core**: the coordinator state machine alone (in-process, ManualClock, in-memory store):
  N members join, the initial delay elapses (simulated time), all sync; wall time is the
  coordinator's CPU cost of one N-member rebalance.
* **wire**: a real broker (`tidelog serve` subprocess, group.initial.rebalance.delay.ms=0)
  and N protocol-level members on asyncio sockets (JoinGroup v7 with the MEMBER_ID_REQUIRED
  round trip, SyncGroup v5, Heartbeat v4 every HEARTBEAT_MS, rejoin on REBALANCE_IN_PROGRESS).
  "cold": N members start at once, time until all are synced on one generation.
  "join-one": one member joins a stable group of N-1, time until all N are synced again.
  Real clients learn of a rebalance on their next heartbeat (heartbeat.interval.ms, 3 s by
  default in Kafka clients), so "join-one" is bounded below by the heartbeat interval.

* **load**: replaying a ``__consumer_offsets`` partition at startup (records/s).
* **clients** (with ``--clients``): N confluent-kafka consumers subscribe at once; time until
  all N own one partition each (librdkafka, heartbeat.interval.ms=100).

Baseline: the wire measurements again against ``tidelog serve`` with Kafka's default
initial delay (3000 ms) and against Tansu (same protocol-level members; Tansu has no delay
setting), with the ratio of the two.

Run: .venv/bin/python bench/groups.py [--clients]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from broker import tansu_broker  # bench/broker.py: the Tansu baseline broker

from tidelog.client.wire import decode_response, encode_request
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.coordinator import (
    CommitEntry,
    GroupCoordinator,
    JoinRequest,
    SyncRequest,
)
from tidelog.server.coordinator.group.member import JoinResult, SyncResult
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

SIZES = (1, 10, 50)
RUNS = 3
HEARTBEAT_MS = 50
JOIN, SYNC, HEARTBEAT = 11, 14, 12
NONE, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 0, 27, 79
SUBSCRIPTION = struct.pack(">hih5si", 0, 1, 5, b"topic", -1)


# ----------------------------------------------------------------------------- core


def core_once(n: int) -> float:
    clock = ManualClock()
    coord = GroupCoordinator(
        GroupConfig(offsets_topic_num_partitions=1),
        clock=clock,
        scheduler=ManualScheduler(clock),
        store=InMemoryOffsetsStore(),
    )
    coord.startup()
    joins: list[JoinResult] = []
    syncs: list[SyncResult] = []
    start = time.perf_counter()
    for i in range(n):
        coord.join_group(
            JoinRequest(
                "g", "", "consumer", [("range", SUBSCRIPTION)], 10000, 10000, client_id=f"c{i}"
            ),
            joins.append,
        )
    while len(joins) < n:
        clock.advance(3000)
    gen = joins[0].generation_id
    leader = next(j for j in joins if j.members)
    for j in joins:
        if j is not leader:
            coord.sync_group(SyncRequest("g", gen, j.member_id), syncs.append)
    plan = {j.member_id: b"x" for j in joins}
    coord.sync_group(SyncRequest("g", gen, leader.member_id, assignments=plan), syncs.append)
    elapsed = time.perf_counter() - start
    assert len(syncs) == n and all(s.error == NONE for s in syncs)
    return elapsed


def load_once(commits: int) -> tuple[float, float, int]:
    """Replay a __consumer_offsets partition of ``commits`` commit batches (1000 groups x
    4 partitions, one batch per OffsetCommit as the coordinator writes them)."""
    clock = ManualClock()
    cfg = GroupConfig(offsets_topic_num_partitions=1)
    store = InMemoryOffsetsStore()
    writer = GroupCoordinator(cfg, clock=clock, scheduler=ManualScheduler(clock), store=store)
    writer.startup()
    tps = [TopicPartition("topic", p) for p in range(4)]
    start = time.perf_counter()
    for i in range(commits):
        writer.commit_offsets(f"group-{i % 1000}", {tp: CommitEntry(i) for tp in tps})
    wrote = time.perf_counter() - start
    reader = GroupCoordinator(cfg, clock=clock, scheduler=ManualScheduler(clock), store=store)
    start = time.perf_counter()
    reader.startup()
    return wrote, time.perf_counter() - start, len(reader.groups)


# ----------------------------------------------------------------------------- wire


class WireMember:
    def __init__(self, name: str, port: int, group: str, state: dict[str, Any]) -> None:
        self.name = name
        self.group = group
        self.port = port
        self.state = state  # shared: synced generation per member
        self.member_id = ""
        self.generation = -1
        self.corr = 0
        self.stop = False

    async def call(self, key: int, version: int, body: dict[str, Any]) -> Any:
        self.corr += 1
        self.writer.write(encode_request(key, version, self.corr, self.name, body))
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        _, resp = decode_response(key, version, await self.reader.readexactly(size))
        return resp

    async def join(self) -> Any:
        while True:
            r = await self.call(
                JOIN,
                7,
                {
                    "group_id": self.group,
                    "session_timeout": 10000,
                    "rebalance_timeout": 10000,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
                },
            )
            self.member_id = r.member_id
            if int(r.error_code) != MEMBER_ID_REQUIRED:
                return r

    async def run(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        while not self.stop:
            r = await self.join()
            if int(r.error_code) != NONE:
                continue
            self.generation = int(r.generation_id)
            plan = [{"member_id": m.member_id, "assignment": b"x"} for m in r.members]
            s = await self.call(
                SYNC,
                5,
                {
                    "group_id": self.group,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocol_name": "range",
                    "assignments": plan,
                },
            )
            if int(s.error_code) != NONE:
                continue
            self.state[self.name] = self.generation
            await self.heartbeat_until_rebalance()
        await self.call(13, 1, {"group_id": self.group, "member_id": self.member_id})
        self.writer.close()

    async def heartbeat_until_rebalance(self) -> None:
        while not self.stop:
            await asyncio.sleep(HEARTBEAT_MS / 1000)
            h = await self.call(
                HEARTBEAT,
                4,
                {
                    "group_id": self.group,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                },
            )
            if int(h.error_code) != NONE:
                self.state.pop(self.name, None)
                return


async def wait_stable(state: dict[str, int], names: list[str]) -> None:
    while True:
        gens = [state.get(n) for n in names]
        if None not in gens and len(set(gens)) == 1:
            return
        await asyncio.sleep(0.001)


async def wire_once(port: int, n: int, join_one: bool) -> float:
    """cold: n members start at once; join_one: one member joins a stable group of n - 1."""
    state: dict[str, int] = {}
    group = f"bench-{n}-{join_one}-{time.monotonic_ns()}"
    members = [WireMember(f"m{i}", port, group, state) for i in range(n)]
    first = members[:-1] if join_one else members
    start = time.perf_counter()
    tasks = [asyncio.create_task(m.run()) for m in first]
    await wait_stable(state, [m.name for m in first])
    if join_one:
        start = time.perf_counter()
        tasks.append(asyncio.create_task(members[-1].run()))
        await wait_stable(state, [m.name for m in members])
    elapsed = time.perf_counter() - start
    for m in members:
        m.stop = True
    await asyncio.gather(*tasks, return_exceptions=True)
    return elapsed


def clients_once(bootstrap: str, n: int, topic: str) -> float:
    """n confluent-kafka consumers subscribe at once: time until each has an assignment and
    together they own every partition (real librdkafka, heartbeat.interval.ms=100)."""
    import confluent_kafka

    group = f"bench-clients-{n}-{time.monotonic_ns()}"
    consumers = [
        confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 100,
                "enable.auto.commit": False,
            }
        )
        for _ in range(n)
    ]
    start = time.perf_counter()
    for c in consumers:
        c.subscribe([topic])
    while True:
        owned = [len(c.assignment()) for c in consumers]
        if all(owned) and sum(owned) == n:
            break
        for c in consumers:
            c.poll(0.005)
    elapsed = time.perf_counter() - start
    for c in consumers:
        c.close()
    return elapsed


def start_broker(log_dir: str, delay_ms: int = 0) -> tuple[subprocess.Popen[str], int]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": log_dir,
        "group.initial.rebalance.delay.ms": str(delay_ms),
        "group.min.session.timeout.ms": "1000",
    }
    cmd = [sys.executable, "-m", "tidelog.cli.main", "serve"]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on" in line:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
            return proc, int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
    raise RuntimeError("broker did not start")


def clients_section(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    print("clients: confluent-kafka consumers, one partition each (median of 3)")
    for n in SIZES:
        topic = f"bench-clients-{n}"
        for f in admin.create_topics([NewTopic(topic, n, 1)]).values():
            f.result(30)
        took = statistics.median(clients_once(bootstrap, n, topic) for _ in range(RUNS))
        print(f"  {n:3d} members: subscribe -> all assigned {took * 1e3:8.1f} ms")


def main() -> None:
    print(f"core: coordinator state machine, one N-member rebalance (best/median of {RUNS * 3})")
    for n in SIZES:
        ts = [core_once(n) for _ in range(RUNS * 3)]
        print(
            f"  {n:3d} members: {min(ts) * 1e3:8.3f} ms  median {statistics.median(ts) * 1e3:8.3f} ms"
        )
    for commits in (10_000, 100_000):
        wrote, took, groups = load_once(commits)
        print(
            f"commit: {commits} OffsetCommits of 4 partitions in {wrote * 1e3:.0f} ms "
            f"= {commits / wrote:,.0f} commits/s (in-process, in-memory store)"
        )
        print(
            f"load: {commits} commit batches ({commits * 4} records, {groups} groups) "
            f"replayed in {took * 1e3:.0f} ms = {commits * 4 / took:,.0f} records/s"
        )
    with tempfile.TemporaryDirectory() as d:
        proc, port = start_broker(d)
        try:
            wire_section(f"tidelog serve, delay 0, heartbeat {HEARTBEAT_MS} ms", port)
            if "--clients" in sys.argv:
                clients_section(f"127.0.0.1:{port}")
        finally:
            proc.terminate()
            proc.wait(30)
    # Tansu has no group.initial.rebalance.delay.ms setting, so the baseline comparison is
    # broker against broker at their defaults: ours with Kafka's 3000 ms.
    with tempfile.TemporaryDirectory() as d:
        proc, port = start_broker(d, delay_ms=3000)
        try:
            ours = wire_section("tidelog serve, Kafka's default delay 3000 ms", port)
        finally:
            proc.terminate()
            proc.wait(30)
    with tansu_broker() as (bootstrap, _pid):
        theirs = wire_section("Tansu (baseline), its defaults", int(bootstrap.rsplit(":", 1)[1]))
    print("ratio Tansu/tidelog time, both at defaults (above 1: tidelog is faster)")
    for key, t in ours.items():
        if key in theirs:
            print(f"  {key:<22} {theirs[key] / t:6.2f}x")


def wire_section(label: str, port: int) -> dict[str, float]:
    """Median cold and join-one times for each size against the broker on ``port``."""
    print(f"wire: {label} (median of {RUNS})")
    out: dict[str, float] = {}
    for n in SIZES:
        cold = statistics.median(asyncio.run(wire_once(port, n, False)) for _ in range(RUNS))
        out[f"{n} members cold"] = cold
        extra = ""
        if n > 1:
            one = statistics.median(asyncio.run(wire_once(port, n, True)) for _ in range(RUNS))
            out[f"{n} members join-one"] = one
            extra = f"  join-one (N-1 -> N): {one * 1e3:8.1f} ms"
        print(f"  {n:3d} members: cold {cold * 1e3:8.1f} ms{extra}", flush=True)
    return out


if __name__ == "__main__":
    main()
