"""A Jepsen-style workload, nemesis and checker for the replication fault tests (in the style
of Jepsen's Kafka and Redpanda queue workloads).

* Producers: confluent-kafka idempotent producers with acks=all, each sending unique values
  ``p<producer>-<seq>`` round-robin over the partitions; a delivery report with an offset is an
  acknowledgement, an error leaves the value "indeterminate" (it may or may not be written).
* A consumer assigned to every partition reads throughout and records each (partition,
  offset, value) it sees.
* The nemesis, from a printed seed: SIGKILL of a partition leader, a follower or the
  controller, or of the controller chosen where it leads none of the topic's partitions
  ("kill-controller-follower", issue: a new controller must take the dead broker's replicas
  out of the ISR, not leave them to the leaders' lag check); the killed broker is restarted
  once acknowledgements resumed without it and ZooKeeper expired its session (like Kafka's, a
  broker refuses to start while its id is still registered). SIGSTOP of a leader or a
  follower for longer than the ZooKeeper session timeout, then SIGCONT. One fault at a time.
* Progress (:mod:`fault_record`): each fault's observed effect (the controller moved, the
  victim fenced, a leader moved, an ISR shrank) read from ZooKeeper while it lasts, a fault
  with none printed as such; acknowledgements on every partition after every heal, and while
  a killed broker is down (two of three replicas, ``min.insync.replicas=2``), within a bound
  derived from the ZooKeeper session timeout.
* The checker, after healing (everything running, every ISR complete): every acknowledged
  value is in the final log exactly once at the offset it was acknowledged at (no lost write,
  no duplicate, no inconsistent offset); each producer's values keep their send order within a
  partition; every record a consumer saw during the run is still at its offset (nothing read
  was later truncated away); no value is anywhere that was never sent; no producer failed
  fatally (an idempotent producer that gives up has met an answer it could not explain).
  Where unclean elections are allowed, ``Verdict.consistent`` is what must still hold; the
  lost records, vanished reads and producers that gave up are counted and reported.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from fault_record import EffectWatch, FaultRecord, progress_bound_s
from replication_support import states, wait_for

from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition

FAULTS = ("kill-leader", "kill-follower", "kill-controller", "pause-leader", "pause-follower")
# a family of its own (not drawn from FAULTS, so a seed's kill/pause schedule replays as before)
CONTROLLER_FAULTS = ("kill-controller-follower",)


@dataclass
class History:
    # value -> (partition, offset); the offset None when librdkafka acknowledged it implicitly
    acked: dict[bytes, tuple[int, int | None]] = field(default_factory=dict)
    failed: set[bytes] = field(default_factory=set)
    sent: set[bytes] = field(default_factory=set)
    seen: list[tuple[int, int, bytes]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    producer_errors: list[str] = field(default_factory=list)  # fatal: the producer stopped
    lock: threading.Lock = field(default_factory=threading.Lock)
    # partition -> time.monotonic() of its latest acknowledgement
    last_ack: dict[int, float] = field(default_factory=dict)
    records: list[FaultRecord] = field(default_factory=list)

    def acked_everywhere_since(self, since: float, partitions: int) -> bool:
        return self.acked_since(since, range(partitions))

    def acked_since(self, since: float, partitions: Iterable[int]) -> bool:
        with self.lock:
            return all(self.last_ack.get(p, -1.0) > since for p in partitions)


def client_debug() -> dict[str, str]:
    """librdkafka's ``debug`` contexts for the producers, to the run's output: ``eos`` unless
    ``TIDELOG_FAULT_CLIENT_DEBUG`` names others (empty: none). ``eos`` prints a few dozen
    lines a run (producer ids, partition drains) and, when they happen, the sequence errors
    and epoch bumps that tell a producer's own resend (the same records under a new epoch)
    from a retry the broker failed to recognise."""
    contexts = os.environ.get("TIDELOG_FAULT_CLIENT_DEBUG", "eos")
    return {"debug": contexts} if contexts else {}


class Workload:
    def __init__(self, cluster: EmbeddedCluster, topic: str, partitions: int, producers: int = 2,
                 restart_producers: bool = False):  # fmt: skip
        """``restart_producers``: a producer that fails fatally (recorded in the history's
        ``producer_errors``) is replaced by a new one under a new name, so the run keeps
        writing (an unclean election can leave an idempotent producer facing a log that lost
        what it had acknowledged)."""
        self.cluster = cluster
        self.restart_producers = restart_producers
        self.topic = topic
        self.partitions = partitions
        self.history = History()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, args=(i,), daemon=True) for i in range(producers)
        ] + [threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def _produce(self, n: int) -> None:
        name = f"p{n}"
        while True:
            try:
                self._produce_until_stopped(name)
                return
            except KafkaException as e:
                with self.history.lock:
                    self.history.producer_errors.append(f"producer {name}: {e}")
                    restarts = len(self.history.producer_errors)
            if not self.restart_producers or self._stop.is_set():
                return
            name = f"p{n}r{restarts}"

    def _produce_until_stopped(self, name: str) -> None:
        p = Producer({
            "bootstrap.servers": self.cluster.bootstrap_servers, "enable.idempotence": True,
            "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000,
            "request.timeout.ms": 10_000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, **client_debug(),
        })  # fmt: skip
        h = self.history
        seq = 0

        def report(err: KafkaError | None, msg: object) -> None:
            value = msg.value()  # type: ignore[attr-defined]
            with h.lock:
                if err is None:
                    h.acked[value] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
                    h.last_ack[msg.partition()] = time.monotonic()  # type: ignore[attr-defined]
                else:
                    h.failed.add(value)

        while not self._stop.is_set():
            value = f"{name}-{seq:07d}".encode()
            with h.lock:
                h.sent.add(value)
            try:
                p.produce(
                    self.topic, value=value, partition=seq % self.partitions, on_delivery=report
                )
            except BufferError:
                p.poll(0.1)
                continue
            seq += 1
            p.poll(0.002)
        p.flush(90)

    def _consume(self) -> None:
        c = Consumer({
            "bootstrap.servers": self.cluster.bootstrap_servers, "group.id": "jepsen-reader",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        c.assign(
            [KafkaTopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
        )
        h = self.history
        while not self._stop.is_set():
            for msg in c.consume(500, 0.2):
                if msg.error() is None:
                    with h.lock:
                        h.seen.append((msg.partition(), msg.offset(), msg.value()))
        c.close()


class Nemesis:
    """``run_one`` draws a fault from FAULTS; ``run_kind`` runs one of FAULTS or
    CONTROLLER_FAULTS. Each fault is recorded (:class:`FaultRecord`: its effect, the progress
    after it) in the history's ``records`` and printed; acknowledgements that do not resume
    on every partition within ``bound_s`` of a heal (or of a kill, while the killed broker is
    down) fail the run there, after healing."""

    def __init__(self, cluster: EmbeddedCluster, tps: list[TopicPartition], seed: int,
                 pause_s: float = 9.0, down_s: float = 3.0) -> None:  # fmt: skip
        self.cluster = cluster
        self.tps = tps
        self.partitions = len(tps)
        self.rng = random.Random(seed)
        self.pause_s = pause_s
        self.down_s = down_s
        self.bound_s = progress_bound_s(cluster)
        self.min_isr = 2  # the topic's min.insync.replicas

    def _pick(self, kind: str) -> int:
        ids = sorted(self.cluster.brokers)
        if kind == "kill-controller-follower":
            return self._controller_leading_nothing()
        if kind.endswith("controller"):
            return self.cluster.wait_for_controller()
        tp = self.rng.choice(self.tps)
        state = states(self.cluster, [tp]).get(tp)
        leader = state.leader if state is not None and state.leader >= 0 else self.rng.choice(ids)
        if kind.endswith("leader"):
            return leader
        return self.rng.choice([b for b in ids if b != leader])

    def _controller_leading_nothing(self, tries: int = 12) -> int:
        """The controller, moved (its znode deleted, as operators move Kafka's; any live
        broker may win the election) until it is a broker that leads none of the topic's
        partitions, where there is one; otherwise the controller as it is (printed)."""
        controller = self.cluster.wait_for_controller()
        for _ in range(tries):
            leaders = {s.leader for s in states(self.cluster, self.tps).values()}
            if controller not in leaders:
                return controller
            if not set(self.cluster.brokers) - leaders:
                break
            self.cluster.zk.zk.delete("/controller")
            controller = self.cluster.wait_for_controller()
        print(f"kill-controller-follower: controller {controller} leads a partition")
        return controller

    def run_one(self, history: History) -> None:
        self.run_kind(self.rng.choice(FAULTS), history)

    def run_kind(self, kind: str, history: History) -> None:
        """One fault of ``kind`` (one of FAULTS or CONTROLLER_FAULTS), then a quiet time. The
        controller is killed while it follows once every ISR is complete (so that what is
        measured is the failover, not an earlier fault's lagging replica)."""
        if kind in CONTROLLER_FAULTS:
            wait_healthy(self.cluster, self.tps)
        victim = self._pick(kind)
        broker = self.cluster.brokers[victim]
        with self.fault(history, kind, victim) as record:
            if kind.startswith("kill"):
                self.cluster.kill(victim)
                try:
                    self.while_down(history, record)
                finally:
                    self.cluster.start_broker(victim)  # once its session expired, as Kafka needs
            else:
                broker.signal(signal.SIGSTOP)
                time.sleep(self.pause_s)  # past the ZooKeeper session timeout
                broker.signal(signal.SIGCONT)
        time.sleep(self.rng.uniform(1.0, 3.0))  # quiet time before the next fault

    @contextmanager
    def fault(self, history: History, kind: str, victim: int) -> Iterator[FaultRecord]:
        """Records the fault the block makes and heals: its effects seen in ZooKeeper while
        it lasts, then waits for acknowledgements on every partition after the heal."""
        history.faults.append(f"{kind} {victim}")
        record = FaultRecord(kind, victim, time.monotonic())
        history.records.append(record)
        watch = EffectWatch(self.cluster, self.tps, record).start()
        try:
            yield record
        finally:
            watch.stop()
        record.healed = time.monotonic()
        record.resumed_after_heal_s = self.wait_progress(history, record.healed)
        print(f"{time.strftime('%H:%M:%S')} fault {len(history.records)}: {record.line()}")
        assert record.resumed_after_heal_s is not None, (
            f"no acknowledgement on every partition within {self.bound_s:.0f} s of healing "
            f"{kind} {victim}: {record.line()}")  # fmt: skip

    def while_down(self, history: History, record: FaultRecord) -> None:
        """A killed broker stays down until ZooKeeper fenced it (its session expired) and
        every partition left with ``min_isr`` replicas in sync without it (all of them after
        a complete ISR) acknowledged a write after that, within ``bound_s`` of the kill; at
        least ``down_s``."""
        deadline = record.start + self.bound_s
        zk = self.cluster.zk
        # the partitions left with min.insync.replicas in sync without the victim
        able = [p for p, isr in record.isr_before.items()
                if len(set(isr) - {record.victim}) >= self.min_isr]
        while zk.get_broker(record.victim) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        fenced = time.monotonic()
        while not history.acked_since(fenced, able):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no acknowledgement on every partition within {self.bound_s:.0f} s of "
                    f"{record.kind} {record.victim}, the broker still down: {record.line()}")
            time.sleep(0.05)
        record.resumed_down_s = time.monotonic() - record.start
        time.sleep(max(0.0, record.start + self.down_s - time.monotonic()))

    def wait_progress(self, history: History, since: float) -> float | None:
        """Seconds from ``since`` to an acknowledgement on every partition after it, or None
        past ``bound_s``."""
        deadline = since + self.bound_s
        while not history.acked_everywhere_since(since, self.partitions):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        return time.monotonic() - since

    def heal(self) -> None:
        for broker_id, b in self.cluster.brokers.items():
            if b.running:
                b.signal(signal.SIGCONT)
            else:
                self.cluster.start_broker(broker_id)


def final_log(
    cluster: EmbeddedCluster, topic: str, partitions: int
) -> dict[int, list[tuple[int, bytes]]]:
    """Every (offset, value) of each partition, read to its end after healing."""
    c = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "jepsen-final",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })  # fmt: skip
    c.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    done: set[int] = set()
    deadline = time.monotonic() + 120
    while len(done) < partitions:
        assert time.monotonic() < deadline, "final read did not reach the end of every partition"
        msg = c.poll(1.0)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                done.add(msg.partition())
            continue
        out[msg.partition()].append((msg.offset(), msg.value()))
    c.close()
    return out


@dataclass
class Verdict:
    lost: list[bytes]
    duplicated: list[bytes]
    wrong_offset: list[tuple[bytes, tuple[int, int | None], tuple[int, int]]]
    reordered: list[str]
    vanished_reads: list[tuple[int, int, bytes]]
    unknown_values: list[bytes]
    acked: int
    indeterminate_written: int
    producer_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.consistent and not (self.lost or self.vanished_reads or self.producer_errors)

    @property
    def consistent(self) -> bool:
        """What must hold even where unclean elections lose acknowledged records (the mode
        that counts losses): no duplicate, no record away from its acknowledged offset, each
        producer's order kept, nothing that was never sent. Lost records, vanished reads and
        producers that gave up are then counted and reported, not failures."""
        return not (self.duplicated or self.wrong_offset or self.reordered or self.unknown_values)


def check(history: History, final: dict[int, list[tuple[int, bytes]]]) -> Verdict:
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    at: dict[tuple[int, int], bytes] = {}
    for p, records in final.items():
        for offset, value in records:
            where[value].append((p, offset))
            at[(p, offset)] = value
    lost = [v for v in history.acked if v not in where]
    duplicated = [v for v, places in where.items() if len(places) > 1]
    # (value, acked at, found at); librdkafka acknowledges some records without an offset
    # (an "implicit ack": a request whose answer was lost is implied by a later one's), whose
    # partition only is checked
    wrong = [(v, place, where[v][0]) for v, place in history.acked.items()
             if v in where and (where[v][0] != place if _known(place[1])
                                else where[v][0][0] != place[0])]
    reordered = []
    for p, records in final.items():
        last: dict[str, int] = {}
        for offset, value in records:
            producer, seq = value.decode().split("-")
            if int(seq) <= last.get(producer, -1):
                reordered.append(
                    f"partition {p} offset {offset}: {value!r} after seq {last[producer]}"
                )
            last[producer] = int(seq)
    vanished = [(p, o, v) for p, o, v in history.seen if at.get((p, o)) != v]
    unknown = [v for v in where if v not in history.sent]
    written_failed = sum(1 for v in history.failed if v in where)
    return Verdict(lost, duplicated, wrong, reordered, vanished, unknown, len(history.acked),
                   written_failed, list(history.producer_errors))  # fmt: skip


def _known(offset: int | None) -> bool:
    return offset is not None and offset >= 0


def wait_healthy(cluster: EmbeddedCluster, tps: list[TopicPartition], timeout: float = 120) -> None:
    size = len(cluster.brokers)
    wait_for(
        lambda: all(s.leader >= 0 and len(s.isr) == size for s in states(cluster, tps).values()),
        timeout, "every partition led with a full ISR",
    )  # fmt: skip


def faults_under_load(cluster: EmbeddedCluster, tps: list[TopicPartition], workload: Workload,
                      fault: Callable[[History], None], faults: int,
                      heal: Callable[[], None]) -> Verdict:  # fmt: skip
    """The workload runs; writes acknowledged on every partition, then ``faults`` faults one
    after the other (each checked for progress by the nemesis); healed, acknowledgements on
    every partition of the healed cluster within the progress bound; then the final log read
    and checked. Prints each fault's record."""
    h = workload.history
    bound = progress_bound_s(cluster)
    started = time.monotonic()
    workload.start()
    try:
        wait_for(lambda: h.acked_everywhere_since(started, len(tps)), bound,
                 "acknowledgements on every partition before the first fault")  # fmt: skip
        for _ in range(faults):
            fault(h)
    finally:
        heal()
        for n, record in enumerate(h.records, 1):
            print(f"fault {n}: {record.line()}")
    wait_healthy(cluster, tps)
    healed = time.monotonic()
    wait_for(lambda: h.acked_everywhere_since(healed, len(tps)), bound,
             "acknowledgements on every partition of the healed cluster")  # fmt: skip
    workload.stop()
    wait_healthy(cluster, tps)
    no_effect = [r.line() for r in h.records if not r.effects]
    print(f"{len(h.records)} faults, {len(no_effect)} with no observed effect")
    assert len(no_effect) < len(h.records), "no fault took effect"
    return check(h, final_log(cluster, workload.topic, workload.partitions))
