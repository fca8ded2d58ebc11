"""What each nemesis fault did, and the progress bound the fault runs hold the cluster to.

:class:`EffectWatch` reads ZooKeeper while a fault lasts (every ``every_s``) and records, with
the seconds since the fault began, the first time it saw each effect against the state before
it: the controller epoch moved, the victim's ``/brokers/ids`` registration gone (a killed or
paused broker fenced by its session's expiry), a partition's leader moved (at a new leader
epoch), an ISR shrank. A fault none of these followed is printed as having had no effect.

:func:`progress_bound_s` is how long acknowledgements may stop on a partition: the ZooKeeper
session timeout (the time the cluster takes to notice a dead or paused broker) and as long
again for what follows it on a loaded two-core machine (the controller's election and
LeaderAndIsr, the leader's ISR write, librdkafka's metadata refresh of 1 s and its retries),
plus 3 s. Kafka's failover is the session timeout plus about a second; the bug this bound is
for (a dead broker left in the ISR) stops acknowledgements for ``replica.lag.time.max.ms``
(Kafka's default 30 s, what the fault runs configure).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from replication_support import states

from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition


def session_timeout_s(cluster: EmbeddedCluster) -> float:
    """The brokers' ``zookeeper.session.timeout.ms``, as the first one was started with (its
    process's props: a cluster's ``broker_props`` may prepare things, such as mounts)."""
    first = cluster.brokers[sorted(cluster.brokers)[0]]
    return int(first.props["zookeeper.session.timeout.ms"]) / 1000


def progress_bound_s(cluster: EmbeddedCluster) -> float:
    return 2 * session_timeout_s(cluster) + 3.0


@dataclass
class FaultRecord:
    kind: str
    victim: int
    start: float  # time.monotonic()
    healed: float | None = None
    effects: dict[str, float] = field(default_factory=dict)  # effect -> seconds after start
    isr_before: dict[int, tuple[int, ...]] = field(default_factory=dict)  # partition -> ISR
    # seconds from the fault's start (while a killed broker is down) and from its heal to an
    # acknowledgement on every partition; None: not reached within the bound
    resumed_down_s: float | None = None
    resumed_after_heal_s: float | None = None

    def line(self) -> str:
        effects = (", ".join(f"{e} at {t:.1f} s" for e, t in self.effects.items())
                   or "NO OBSERVED EFFECT")  # fmt: skip
        held = f"held {self.healed - self.start:.1f} s" if self.healed is not None else "not healed"
        down = (f", acks on every partition {self.resumed_down_s:.1f} s after the kill"
                if self.resumed_down_s is not None else "")  # fmt: skip
        after = (f"{self.resumed_after_heal_s:.1f} s" if self.resumed_after_heal_s is not None
                 else "NOT within the bound")  # fmt: skip
        return (f"{self.kind} {self.victim}: {effects}; {held}{down}; acks on every partition "
                f"after the heal: {after}")  # fmt: skip


class EffectWatch:
    """Polls ZooKeeper from the fault's start until :meth:`stop`, filling ``record.effects``."""

    def __init__(self, cluster: EmbeddedCluster, tps: list[TopicPartition], record: FaultRecord,
                 every_s: float = 0.2) -> None:  # fmt: skip
        self.zk = cluster.zk
        self.tps = tps
        self.record = record
        self.every_s = every_s
        self.before = states(cluster, tps)
        record.isr_before = {tp.partition: tuple(s.isr) for tp, s in self.before.items()}
        self.epoch = self.zk.get_controller_epoch()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> EffectWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.look()  # the last word

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.look()
            except Exception:  # a ZooKeeper read that failed a moment: the next look sees
                continue

    def look(self) -> None:
        epoch = self.zk.get_controller_epoch()
        if epoch is not None and self.epoch is not None and epoch[0] > self.epoch[0]:
            self._note(f"controller epoch {self.epoch[0]} -> {epoch[0]}")
        if self.zk.get_broker(self.record.victim) is None:
            self._note(f"broker {self.record.victim} fenced (registration gone)")
        for tp, now in self.zk.get_topic_partition_states(self.tps).items():
            was = self.before.get(tp)
            if was is None:
                continue
            if now.leader_epoch > was.leader_epoch and now.leader != was.leader:
                self._note(f"{tp} leader {was.leader} -> {now.leader}")
            if len(now.isr) < len(was.isr):
                self._note(f"{tp} ISR {list(was.isr)} -> {list(now.isr)}")

    def _note(self, effect: str) -> None:
        if effect not in self.record.effects:
            self.record.effects[effect] = time.monotonic() - self.record.start

