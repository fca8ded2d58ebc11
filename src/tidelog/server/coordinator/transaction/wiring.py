"""Plugs the transaction coordinator into the asyncio broker.

``start_txn_coordinator(broker)`` (called by ``Broker.start``) builds it over the broker's
logs and registers it with the coordinator runtime for ``__transaction_state``, which loads
the topic's partitions (COORDINATOR_LOAD_IN_PROGRESS for a partition until it is loaded; the
prepared transactions found are resumed) and runs the timeout-abort and id-expiration timers; the broker keeps the
coordinator and its tasks in typed fields and hands them to ``stop_txn_coordinator``.
Handlers call ``txn_coordinator_for(broker)``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.txn_offsets import complete_txn_offsets
from tidelog.server.coordinator.host import CoordinatorHost
from tidelog.server.coordinator.runtime import CoordinatorRuntime
from tidelog.server.coordinator.timer import CoordinatorTimer
from tidelog.server.errors import ApiError
from tidelog.server.security.inter_broker import inter_broker_security
from tidelog.storage.validator import AppendOrigin
from tidelog.util.topic_partition import TopicPartition

from .config import TxnConfig
from .coordinator import MarkerWriter, TransactionCoordinator
from .markers import TxnMarkerSender, control_batch
from .records import TRANSACTION_STATE_TOPIC
from .shard import TransactionCoordinatorShard
from .state_manager import WRITE_TIMEOUT_MS, TransactionStateManager, TxnLogStore

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class TxnHost(CoordinatorHost, Protocol):
    """What the transaction coordinator uses of the broker: its config, clock and logs, the
    coordinator runtime, and the group coordinator that completes transactional offset
    commits."""

    @property
    def txn_coordinator(self) -> TransactionCoordinator | None: ...


def marker_writer(broker: TxnHost, sender: TxnMarkerSender | None = None) -> MarkerWriter:
    """Kafka's WriteTxnMarkers. Into a partition led here: a control batch appended as the
    coordinator at the partition's leader epoch, the high watermark advanced as far as the
    ISR has it, waiting fetches woken (in a cluster: acks=all, awaited); for a
    ``__consumer_offsets`` partition the group coordinator then applies or drops the
    transaction's pending offsets. Into a partition led elsewhere: ``sender`` sends it."""
    rm = broker.replica_manager

    def write(tp: TopicPartition, producer_id: int, producer_epoch: int,
              coordinator_epoch: int, commit: bool) -> Awaitable[None] | None:
        partition = rm.get_partition(tp)
        if sender is not None and (partition is None or not partition.is_leader):
            return sender.send(tp, producer_id, producer_epoch, coordinator_epoch, commit)
        if partition is None:  # the topic was deleted meanwhile: nothing left to mark (Kafka)
            log.info("skipping %s marker for %s: partition is gone",
                     "commit" if commit else "abort", tp)
            return None
        batch = control_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                              broker.clock.milliseconds())
        def complete() -> None:  # the transaction's pending offsets, once the ISR has it
            if tp.topic == OFFSETS_TOPIC:
                complete_txn_offsets(broker, tp.partition, producer_id, commit)

        if sender is not None:  # a cluster: replicated like any coordinator write
            info = rm.append(tp, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR)
            wait: Awaitable[None] | None = _replicated(rm, tp, info.last_offset + 1, complete)
        else:
            partition.append_to_log(batch, origin=AppendOrigin.COORDINATOR)
            partition.advance_local_committed()
            complete()
            wait = None
        rm.notify_append(tp)
        return wait

    return write


async def _replicated(rm: ReplicaManager, tp: TopicPartition, offset: int,
                      then: Callable[[], None]) -> None:  # fmt: skip
    error = (await rm.wait_replicated({tp: offset}, WRITE_TIMEOUT_MS)).get(tp, ErrorCode.NONE)
    if error != ErrorCode.NONE:
        raise ApiError(error, f"marker for {tp} not replicated")
    then()


def start_txn_coordinator(
    broker: TxnHost,
) -> tuple[TransactionCoordinator, list[asyncio.Task[None]]]:
    """The coordinator, registered with the broker's coordinator runtime for
    ``__transaction_state`` (its timeout aborts and id expiration on the runtime's timer),
    and its tasks (the load on one broker, the marker sender's closing)."""
    config = TxnConfig.from_broker_config(broker.config)
    rm = broker.replica_manager
    state = TransactionStateManager(config, clock=broker.clock, store=TxnLogStore(rm, config))
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[None]] = []
    sender = None
    if not rm.one_broker:
        sender = TxnMarkerSender(
            broker.config.node_id, rm.metadata_cache,
            broker.config.inter_broker_listener_name, inter_broker_security(broker.config))
        tasks.append(loop.create_task(_close_when_cancelled(sender)))
    coord = TransactionCoordinator(
        config, clock=broker.clock, state=state,
        allocate_producer_id=rm.allocate_producer_id,
        write_marker=marker_writer(broker, sender))
    runtime = broker.coordinator_runtime
    runtime.register(TRANSACTION_STATE_TOPIC, TransactionCoordinatorShard(coord),
                     _timer(coord, CoordinatorTimer(loop, broker.clock, "transaction coordinator")))
    partitions = range(config.transaction_state_log_num_partitions)
    if not rm.one_broker:
        pass  # in a cluster: each partition loads when this broker becomes its leader
    elif rm.topic(TRANSACTION_STATE_TOPIC) is not None:
        load = runtime.load_all(TRANSACTION_STATE_TOPIC, partitions)
        tasks += [load] if load is not None else []
    else:  # nothing to load: every partition is ours at once
        for p in partitions:
            state.complete_load(p, {})
    return coord, tasks


def _timer(coord: TransactionCoordinator, timer: CoordinatorTimer) -> CoordinatorTimer:
    """Kafka's transaction abort and transactional id expiration, at their intervals."""
    config = coord.config
    abort_ms = config.transaction_abort_timed_out_transaction_cleanup_interval_ms
    expire_ms = config.transaction_remove_expired_transaction_cleanup_interval_ms
    timer.schedule("abort-timed-out-transactions", coord.abort_timed_out, abort_ms, abort_ms)
    timer.schedule("remove-expired-transactions", coord.remove_expired, expire_ms, expire_ms)
    return timer


async def _close_when_cancelled(sender: TxnMarkerSender) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await sender.close()


def stop_txn_coordinator(coord: TransactionCoordinator, tasks: list[asyncio.Task[None]],
                         runtime: CoordinatorRuntime) -> None:
    coord.active = False
    runtime.unregister(TRANSACTION_STATE_TOPIC)  # its timer stops
    for task in tasks:
        task.cancel()


async def replicated(coord: TransactionCoordinator, transactional_id: str) -> ErrorCode:
    """In a cluster: NONE once the ISR has the id's state writes so far (acks=all), else the
    coordinator's error; at once on one broker."""
    store = coord.state.store
    appender = store.replicated if isinstance(store, TxnLogStore) else None
    if appender is None:
        return ErrorCode.NONE
    return await appender.replicated(coord.state.partition_for(transactional_id))


def txn_coordinator_for(broker: TxnHost) -> TransactionCoordinator:
    """The broker's transaction coordinator; COORDINATOR_NOT_AVAILABLE before start and after
    stop."""
    coord = broker.txn_coordinator
    if coord is None:
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker is not running")
    return coord
