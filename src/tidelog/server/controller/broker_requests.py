"""What the controller answers brokers and admins: ControlledShutdown (7), AlterPartition (56)
and ElectLeaders (43), as Kafka's KafkaController does (doControlledShutdown,
tryProcessAlterPartition, processReplicaLeaderElection). Run from the controller's queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode
from tidelog.server.zk.data import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    LeaderIsrAndControllerEpoch,
)
from tidelog.util.topic_partition import TopicPartition

from . import election
from .host import ControllerHost

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1


@dataclass(frozen=True)
class AlterPartitionItem:
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED


@dataclass(frozen=True)
class AlterPartitionResult:
    error_code: int
    state: LeaderIsrAndControllerEpoch | None = None  # the committed state when no error


async def controlled_shutdown(
    c: ControllerHost, broker_id: int, broker_epoch: int
) -> tuple[int, list[TopicPartition]]:
    ctx = c.context
    if broker_id not in ctx.live_or_shutting_down():
        return int(ErrorCode.BROKER_NOT_AVAILABLE), []
    if broker_epoch != -1 and broker_epoch < ctx.broker_epoch(broker_id):
        return int(ErrorCode.STALE_BROKER_EPOCH), []
    ctx.shutting_down_broker_ids.add(broker_id)
    act_on = [
        tp for tp in ctx.partitions_on_broker(broker_id)
        if len(ctx.replicas(tp)) > 1 and tp in ctx.leadership
        and tp.topic not in ctx.topics_to_be_deleted
    ]  # fmt: skip
    led = [tp for tp in act_on if ctx.leadership[tp].leader == broker_id]
    followed = [tp for tp in act_on if ctx.leadership[tp].leader != broker_id]
    batch = c.batch()

    def move(tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
        return election.elect_for_controlled_shutdown(
            s, ctx.replicas(tp), ctx.online_replicas(tp, include_shutting_down=True),
            ctx.shutting_down_broker_ids, ctx.epoch,
        )  # fmt: skip

    await c.partitions.update(led, move, batch)
    for tp in followed:
        batch.add_stop_replica(broker_id, tp, delete=False)
    await c.partitions.remove_replica_from_isr(broker_id, followed, batch)
    c.send(batch)
    remaining = [tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.replicas(tp)) > 1]
    return int(ErrorCode.NONE), remaining


def _check_alter(c: ControllerHost, item: AlterPartitionItem) -> AlterPartitionResult | None:
    """The error or the unchanged current state for one item; None when it may be written."""
    ctx = c.context
    cur = ctx.leadership.get(item.tp)
    if cur is None:
        return AlterPartitionResult(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if item.partition_epoch > cur.zk_version or item.leader_epoch > cur.leader_epoch:
        return AlterPartitionResult(int(ErrorCode.NOT_CONTROLLER))
    if item.leader_epoch < cur.leader_epoch:
        return AlterPartitionResult(int(ErrorCode.FENCED_LEADER_EPOCH))
    if tuple(item.new_isr) == cur.isr and item.leader_recovery_state == cur.leader_recovery_state:
        return AlterPartitionResult(int(ErrorCode.NONE), cur)  # already so: idempotent
    if item.partition_epoch < cur.zk_version:
        return AlterPartitionResult(int(ErrorCode.INVALID_UPDATE_VERSION))
    if item.leader_recovery_state == LEADER_RECOVERING and len(item.new_isr) > 1:
        return AlterPartitionResult(int(ErrorCode.INVALID_REQUEST))
    if cur.leader_recovery_state == LEADER_RECOVERED and item.leader_recovery_state == LEADER_RECOVERING:
        return AlterPartitionResult(int(ErrorCode.INVALID_REQUEST))
    if set(item.new_isr) - ctx.live_not_shutting_down():
        return AlterPartitionResult(int(ErrorCode.INELIGIBLE_REPLICA))
    return None


async def alter_partition(
    c: ControllerHost, broker_id: int, broker_epoch: int, items: list[AlterPartitionItem]
) -> tuple[int, dict[TopicPartition, AlterPartitionResult]]:
    ctx = c.context
    if broker_id not in ctx.live_brokers or ctx.broker_epoch(broker_id) != broker_epoch:
        return int(ErrorCode.STALE_BROKER_EPOCH), {}
    out: dict[TopicPartition, AlterPartitionResult] = {}
    accepted: dict[TopicPartition, AlterPartitionItem] = {}
    for item in items:
        checked = _check_alter(c, item)
        if checked is None:
            accepted[item.tp] = item
        else:
            out[item.tp] = checked
    if accepted:
        new = {
            tp: LeaderIsrAndControllerEpoch(
                broker_id, i.leader_epoch, tuple(i.new_isr), ctx.epoch, i.leader_recovery_state,
                ctx.leadership[tp].zk_version,
            )
            for tp, i in accepted.items()
        }  # fmt: skip
        result = await c.call(c.zk.update_leader_and_isr, new, ctx.epoch_zk_version)
        batch = c.batch()
        for tp, state in result.finished.items():
            ctx.leadership[tp] = state
            out[tp] = AlterPartitionResult(int(ErrorCode.NONE), state)
        batch.add_update_metadata(ctx.live_or_shutting_down(), list(result.finished))
        c.send(batch)
        await c.reassignment.on_isr_change(list(result.finished))
        for tp in result.bad_version:
            out[tp] = AlterPartitionResult(int(ErrorCode.INVALID_UPDATE_VERSION))
        for tp in result.failed:
            out[tp] = AlterPartitionResult(int(ErrorCode.UNKNOWN_SERVER_ERROR))
    return int(ErrorCode.NONE), out


async def elect_leaders(
    c: ControllerHost, partitions: list[TopicPartition] | None, election_type: int
) -> dict[TopicPartition, tuple[int, str | None]]:
    ctx = c.context
    tps = sorted(ctx.leadership) if partitions is None else partitions
    out: dict[TopicPartition, tuple[int, str | None]] = {}
    todo: list[TopicPartition] = []
    live = ctx.live_not_shutting_down()
    for tp in tps:
        s = ctx.leadership.get(tp)
        if s is None or tp.topic in ctx.topics_to_be_deleted:
            out[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"The partition {tp} does not exist.")
        elif (election_type == ELECTION_PREFERRED and s.leader == ctx.replicas(tp)[0]) or (
            election_type == ELECTION_UNCLEAN and s.leader in live
        ):
            out[tp] = (int(ErrorCode.ELECTION_NOT_NEEDED), "Leader election not needed for topic partition.")
        else:
            todo.append(tp)
    batch = c.batch()

    def elect(tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
        return election.elect_preferred(s, ctx.replicas(tp), ctx.online_replicas(tp), ctx.epoch)

    if election_type == ELECTION_PREFERRED:
        done = await c.partitions.update(todo, elect, batch)
    else:  # Kafka's OfflinePartitionLeaderElectionStrategy(allowUnclean = true)
        done = await c.partitions.elect_offline(todo, batch, allow_unclean=True)
    c.send(batch)
    for tp in todo:
        if tp in done:
            out[tp] = (int(ErrorCode.NONE), None)
        elif election_type == ELECTION_PREFERRED:
            out[tp] = (int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),
                       f"Failed to elect leader for partition {tp} under strategy PreferredReplicaPartitionLeaderElectionStrategy")  # fmt: skip
        else:
            out[tp] = (int(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE),
                       f"Failed to elect leader for partition {tp} under strategy OfflinePartitionLeaderElectionStrategy(true)")  # fmt: skip
    return out
