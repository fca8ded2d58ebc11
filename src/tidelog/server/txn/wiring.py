"""Plugs the transaction coordinator into the asyncio broker.

``start_txn_coordinator(broker)`` builds it over the broker's logs, loads
``__transaction_state`` in the background (one partition per loop turn, answering
COORDINATOR_LOAD_IN_PROGRESS for a partition until it is loaded), resumes prepared
transactions, and schedules the timeout-abort and id-expiration tasks. Handlers call
``txn_coordinator_for(broker)``, which starts it on first use."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tidelog.records import ControlRecordType, RecordBatchBuilder
from tidelog.util.topic_partition import TopicPartition

from .config import TxnConfig
from .coordinator import MarkerWriter, TransactionCoordinator
from .state_manager import TransactionStateManager, TxnLogStore

log = logging.getLogger(__name__)

ATTR = "txn_coordinator"
OFFSETS_TOPIC = "__consumer_offsets"


def marker_writer(broker: Any) -> MarkerWriter:
    """Kafka's WriteTxnMarkers, in-process: a control batch appended as the coordinator, the
    high watermark advanced (one node is the whole ISR), waiting fetches woken; for a
    ``__consumer_offsets`` partition the group coordinator then applies or drops the
    transaction's pending offsets."""
    rm = broker.replica_manager

    def write(tp: TopicPartition, producer_id: int, producer_epoch: int,
              coordinator_epoch: int, commit: bool) -> None:
        from tidelog.storage.validator import AppendOrigin

        lg = rm.get_log(tp)
        if lg is None:  # the topic was deleted meanwhile: nothing left to mark (Kafka)
            log.info("skipping %s marker for %s: partition is gone",
                     "commit" if commit else "abort", tp)
            return
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                     is_transactional=True, is_control=True)
        ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        builder.append_control(ctype, broker.clock.milliseconds(), coordinator_epoch)
        lg.append_as_leader(builder.build(), origin=AppendOrigin.COORDINATOR)
        lg.maybe_increment_high_watermark(lg.log_end_offset)
        if tp.topic == OFFSETS_TOPIC:
            from tidelog.server.group.txn_offsets import complete_txn_offsets

            complete_txn_offsets(broker, tp.partition, producer_id, commit)
        for fn in rm._append_listeners:
            fn(tp)

    return write


def start_txn_coordinator(broker: Any) -> TransactionCoordinator:
    existing = getattr(broker, ATTR, None)
    if existing is not None:
        return existing
    config = TxnConfig.from_broker_config(broker.config)
    state = TransactionStateManager(config, clock=broker.clock,
                                    store=TxnLogStore(broker.replica_manager, config))
    coord = TransactionCoordinator(
        config, clock=broker.clock, state=state,
        allocate_producer_id=broker.replica_manager.allocate_producer_id,
        write_marker=marker_writer(broker))
    state.loading.update(range(config.transaction_state_log_num_partitions))
    setattr(broker, ATTR, coord)
    loop = asyncio.get_running_loop()
    broker._txn_tasks = [loop.create_task(_load_all(coord)),
                         loop.create_task(_every(
                             config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                             coord.abort_timed_out)),
                         loop.create_task(_every(
                             config.transaction_remove_expired_transaction_cleanup_interval_ms,
                             coord.remove_expired))]
    return coord


async def _load_all(coord: TransactionCoordinator) -> None:
    state = coord.state
    for p in range(coord.config.transaction_state_log_num_partitions):
        latest: dict[bytes, bytes | None] = {}
        try:
            for i, batch in enumerate(state.store.read_batches(p)):
                state.replay_batch(latest, batch)
                if i % 64 == 63:
                    await asyncio.sleep(0)
        except Exception:
            log.exception("failed to read __transaction_state-%d; loading what was read", p)
        coord.resume(state.complete_load(p, latest))
        await asyncio.sleep(0)
    log.info("transaction coordinator loaded %d transactional ids", len(state.transactions))


async def _every(interval_ms: int, fn: Any) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            fn()
        except Exception:
            log.exception("transaction coordinator task %s failed", fn.__name__)


def stop_txn_coordinator(broker: Any) -> None:
    coord: TransactionCoordinator | None = getattr(broker, ATTR, None)
    if coord is None:
        return
    coord.active = False
    for task in getattr(broker, "_txn_tasks", []):
        task.cancel()
    setattr(broker, ATTR, None)


def txn_coordinator_for(broker: Any) -> TransactionCoordinator:
    coord = getattr(broker, ATTR, None)
    return coord if coord is not None else start_txn_coordinator(broker)
